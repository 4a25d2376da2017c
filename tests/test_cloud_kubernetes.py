"""KubernetesProvider over real HTTP against the loopback fake API server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from builders import make_node
from fakes.gce_api import FakeGCE
from fakes.kube_api import FakeKubeAPI

from scaler.cloud.base import CloudError, CloudProvider, MinSizeReached, NodeChanged
from scaler.cloud.gke import GKEProvider, make_clients
from scaler.cloud.kubernetes import KubernetesProvider
from scaler.config import NodeGroupSpec
from scaler.limits import GroupLimits
from scaler.model.records import LABEL_NODEPOOL, Node, Resources

NODES = "/api/v1/nodes"


def node_obj(name: str, pool: str | None) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if pool is not None:
        labels[LABEL_NODEPOOL] = pool
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
        "spec": {"providerID": f"gce://proj/z/{name}"},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }


def node(name: str, pool: str, uid: str | None = None) -> Node:
    """The record of :func:`node_obj`'s node (same UID unless ``uid`` says otherwise)."""
    return make_node(name, pool=pool, zone="", uid=f"uid-{name}" if uid is None else uid)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as f:
        yield f


@pytest.fixture
def fake(server: FakeKubeAPI, no_proxy: None) -> FakeKubeAPI:
    server.reset_faults()
    server.clear()
    server.load_objects(
        [node_obj(f"a-{i}", "a") for i in range(3)]
        + [node_obj(f"b-{i}", "b") for i in range(2)]
        + [node_obj("bare", None)]
    )
    server.requests.clear()
    return server


def provider(api: Any, **kw: Any) -> KubernetesProvider:
    kw.setdefault("retry_wait_seconds", 0.01)
    return KubernetesProvider(api, **kw)


def node_deletes(fake: FakeKubeAPI) -> list[Any]:
    return [r for r in fake.requests if r.method == "DELETE" and r.path.startswith(NODES + "/")]


def test_groups_from_labels_with_default_and_explicit_limits(api: Any) -> None:
    p = provider(api, limits=GroupLimits({"b": NodeGroupSpec(min_size=1, max_size=5, name="b")}))
    groups = {g.id: g for g in p.node_groups()}
    assert set(groups) == {"a", "b"}
    assert (groups["a"].min_size, groups["a"].max_size, groups["a"].target_size) == (0, 3, 3)
    # --nodes limits hold per zone (these nodes carry no zone label: one zone, "").
    assert (groups["b"].min_size, groups["b"].max_size, groups["b"].target_size) == (0, 5, 2)
    assert [(z.zone, z.min_size, z.max_size, z.target_size) for z in groups["b"].zone_groups] == [("", 1, 5, 2)]
    group = p.node_group_for(node("a-1", "a"))
    assert group is not None and group.id == "a"
    assert p.node_group_for(Node(name="bare", allocatable=Resources())) is None
    assert p.node_group_for(node("x", "unknown")) is None


def test_refresh_is_one_paginated_list(fake: FakeKubeAPI, api: Any) -> None:
    p = provider(api, page_size=2)
    fake.requests.clear()
    p.refresh()
    lists = fake.requests_to(NODES)
    assert len(lists) == 3  # 6 nodes, 2 per page
    assert all(r.query.get("limit") == "2" for r in lists)
    assert p.node_groups()[0].target_size == 3
    assert len(fake.requests_to(NODES)) == 3  # served from the cache


def test_a_delete_shed_by_apf_waits_its_retry_after(fake: FakeKubeAPI, api: Any) -> None:
    """A node delete answered 429 with ``Retry-After: 1`` (API Priority and Fairness) is sent
    again after that second, not after the provider's own 10 ms."""
    fake.fail(f"{NODES}/a-0", 429, times=1, method="DELETE", headers={"Retry-After": "1"})
    p = provider(api)
    p.refresh()
    p.delete_nodes("a", [node("a-0", "a")])
    first, second = node_deletes(fake)
    assert second.received - first.received >= 1.0
    assert fake.get_object("Node", "a-0") is None


def test_delete_node(fake: FakeKubeAPI, api: Any) -> None:
    p = provider(api)
    p.refresh()
    p.delete_nodes("a", [node("a-0", "a")])
    [req] = node_deletes(fake)
    assert req.path == f"{NODES}/a-0"
    assert json.loads(req.body)["preconditions"] == {"uid": "uid-a-0"}
    assert [o["metadata"]["name"] for o in fake.objects("Node")] == ["a-1", "a-2", "b-0", "b-1", "bare"]
    assert p.node_groups()[0].target_size == 2
    p.refresh()
    assert p.node_groups()[0].target_size == 2


def test_already_gone_or_replaced_counts_as_deleted(fake: FakeKubeAPI, api: Any) -> None:
    p = provider(api)
    p.refresh()
    fake.delete_object("Node", "a-0")
    p.delete_nodes("a", [node("a-0", "a")])  # 404
    p.delete_nodes("a", [node("a-1", "a", uid="old-uid")])  # 409: another node under that name
    assert {o["metadata"]["name"] for o in fake.objects("Node")} >= {"a-1"}
    assert len(node_deletes(fake)) == 2


def test_a_node_changed_since_its_verified_version_is_not_deleted(fake: FakeKubeAPI, api: Any) -> None:
    """The actuator deletes at the resourceVersion it verified (tainted and cordoned by it): a
    node changed since (say, untainted by another replica) is refused with NodeChanged and kept;
    at its current version it goes."""
    from dataclasses import replace

    p = provider(api)
    p.refresh()
    current = fake.put_object(node_obj("a-0", "a"))
    version = current["metadata"]["resourceVersion"]
    fake.put_object(node_obj("a-0", "a"))  # changed after it was verified
    with pytest.raises(NodeChanged, match="changed since verified"):
        p.delete_nodes("a", [replace(node("a-0", "a"), resource_version=version)])
    assert fake.get_object("Node", "a-0") is not None
    [req] = node_deletes(fake)
    assert json.loads(req.body)["preconditions"] == {"uid": "uid-a-0", "resourceVersion": version}
    latest = fake.get_object("Node", "a-0")
    assert latest is not None
    p.delete_nodes("a", [replace(node("a-0", "a"), resource_version=latest["metadata"]["resourceVersion"])])
    assert fake.get_object("Node", "a-0") is None


def test_min_size_reached(fake: FakeKubeAPI, api: Any) -> None:
    p = provider(api, limits=GroupLimits({"b": NodeGroupSpec(min_size=1, max_size=5, name="b")}))
    p.delete_nodes("b", [node("b-0", "b")])
    with pytest.raises(MinSizeReached):
        p.delete_nodes("b", [node("b-1", "b")])
    with pytest.raises(MinSizeReached):
        p.delete_nodes("a", [node("a-0", "a")], in_flight=3)
    with pytest.raises(MinSizeReached, match="at most 1 may go"):
        p.delete_nodes("a", [node("a-0", "a"), node("a-1", "a")], in_flight=2)
    assert len(node_deletes(fake)) == 1


def test_retries_then_succeeds(fake: FakeKubeAPI, api: Any) -> None:
    p = provider(api)
    p.refresh()
    fake.fail(f"{NODES}/a-0", 503, times=2, method="DELETE", exact=True)
    p.delete_nodes("a", [node("a-0", "a")])
    assert len(node_deletes(fake)) == 3
    assert "a-0" not in {o["metadata"]["name"] for o in fake.objects("Node")}


def test_persistent_failure_is_a_cloud_error(fake: FakeKubeAPI, api: Any) -> None:
    p = provider(api, max_attempts=3)
    p.refresh()
    fake.fail(f"{NODES}/a-0", 500, method="DELETE", exact=True)
    with pytest.raises(CloudError, match="HTTP 500") as err:
        p.delete_nodes("a", [node("a-0", "a"), node("a-1", "a")])
    assert err.value.failed_nodes == ("a-0",)
    assert len(node_deletes(fake)) == 4  # 3 attempts for a-0, 1 for a-1
    assert p.node_groups()[0].target_size == 2  # a-1 went
    fake.reset_faults()
    fake.fail(f"{NODES}/a-2", 403, method="DELETE", exact=True)
    with pytest.raises(CloudError, match="HTTP 403"):
        p.delete_nodes("a", [node("a-2", "a")])
    assert len(node_deletes(fake)) == 5  # not retried


def test_refresh_failure_is_a_cloud_error(fake: FakeKubeAPI, api: Any) -> None:
    p = provider(api, max_attempts=2)
    fake.fail(NODES, 503, method="GET", exact=True)
    with pytest.raises(CloudError, match="list nodes: HTTP 503"):
        p.refresh()
    assert len(fake.requests_to(NODES)) == 2


def test_nodes_outside_the_group_are_refused(fake: FakeKubeAPI, api: Any) -> None:
    p = provider(api)
    with pytest.raises(CloudError, match="does not belong to node group a"):
        p.delete_nodes("a", [node("a-0", "a"), node("b-0", "b")])
    with pytest.raises(CloudError, match="'zzz'"):
        p.delete_nodes("zzz", [node("a-0", "zzz")])
    assert node_deletes(fake) == []


def test_both_providers_satisfy_the_protocol(api: Any) -> None:
    assert isinstance(provider(api), CloudProvider)
    with FakeGCE() as gce:
        container, compute = make_clients(gce.url)
        assert isinstance(
            GKEProvider("p", "l", "c", container_client=container, compute_clients=compute), CloudProvider
        )


def test_three_deletions_with_room_for_three_all_go(fake: FakeKubeAPI, api: Any) -> None:
    """Pool a has five nodes and a minimum of two: room for three deletions. Three drained
    nodes reach the delete step together (each DELETE answered 0.5 s late, so the calls
    overlap): each must count the others once (under way in the actuator, or already inside
    the provider's delete), not twice, and all three go."""
    import threading

    from scaler.actuation.actuator import Actuator, NodeOutcome
    from scaler.config import ScalerConfig
    from scaler.kube.writer import STATE_DRAINED, KubeWriter
    from scaler.observability import Metrics

    fake.load_objects([node_obj(f"a-{i}", "a") for i in (3, 4)])
    fake.delay(NODES + "/", 0.5, method="DELETE")
    cloud = provider(api, limits=GroupLimits({"a": NodeGroupSpec(min_size=2, max_size=10, name="a")}))
    cloud.refresh()
    writer = KubeWriter(api, "scaler", replica="r-0")
    names = ["a-0", "a-1", "a-2"]
    for name in names:
        writer.mark_to_be_deleted(name, 1_800_000_000.0)
        writer.set_state(name, STATE_DRAINED)
    config = ScalerConfig(cloud_provider="kubernetes")

    def no_snapshot() -> Any:
        raise AssertionError("a completed drain needs no snapshot")

    actuator = Actuator(config, writer, cloud, no_snapshot, Metrics(), lambda outcome: None,
                        rollback_backoff=(0.01, 0.01))  # fmt: skip
    outcomes: list[NodeOutcome] = []
    start = threading.Barrier(len(names))

    def remove(name: str) -> None:
        start.wait()
        outcomes.append(actuator.complete_deletion(node(name, "a")))

    threads = [threading.Thread(target=remove, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted((o.node, o.ok, o.message) for o in outcomes) == [(n, True, "") for n in names]
    assert sorted(o["metadata"]["name"] for o in fake.objects("Node") if o["metadata"]["name"].startswith("a-")) == [
        "a-3", "a-4"
    ]
