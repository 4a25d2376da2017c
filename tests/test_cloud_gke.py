"""GKE provider and metadata over real HTTP against the loopback fake GKE/Compute/metadata server."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fakes.gce_api import COMPUTE_URL, FakeGCE
from google.cloud import container_v1
from ports import free_port

from scaler.cloud.base import (
    CHECK_CALLS,
    DELETE_CALLS,
    IAM_PERMISSIONS,
    READ_CALLS,
    CloudError,
    MinSizeReached,
    NodeGroupInfo,
)
from scaler.cloud.gke import GceRef, GKEProvider, make_clients, make_projects_client, pool_limits, zone_limits
from scaler.cloud.metadata import MetadataUnavailable, get_metadata
from scaler.config import NodeGroupSpec
from scaler.limits import GroupLimits
from scaler.model.records import LABEL_NODEPOOL, LABEL_ZONE, Node, Resources

ZONES = ("europe-west1-b", "europe-west1-c", "europe-west1-d")
DELETE_PATH = r"/instanceGroupManagers/[^/]+/deleteInstances$"
WAIT_PATH = r"/operations/[^/]+/wait$"

# Which Google API method each REST path is; every request the provider makes must be one of
# READ_CALLS / DELETE_CALLS (the lists the IAM role is checked against).
PATH_CALLS = [
    ("GET", re.compile(r"^/v1/projects/[^/]+/locations/[^/]+/clusters/[^/]+/nodePools$"), "container.clusters.nodePools.list"),
    ("GET", re.compile(r"^/compute/v1/projects/[^/]+/zones/[^/]+/instanceGroupManagers/[^/]+$"), "compute.instanceGroupManagers.get"),
    ("POST", re.compile(DELETE_PATH), "compute.instanceGroupManagers.deleteInstances"),
    ("POST", re.compile(WAIT_PATH), "compute.zoneOperations.wait"),
    ("POST", re.compile(r"^/v3/projects/[^/]+:testIamPermissions$"), "cloudresourcemanager.projects.testIamPermissions"),
]  # fmt: skip


def call_of(method: str, path: str) -> str:
    for m, pattern, call in PATH_CALLS:
        if m == method and pattern.search(path):
            return call
    raise AssertionError(f"unexpected request {method} {path}")


@pytest.fixture
def fake(no_proxy: None) -> Iterator[FakeGCE]:
    with FakeGCE() as f:
        yield f


def make_provider(fake: FakeGCE, **kw: Any) -> GKEProvider:
    container, compute = make_clients(fake.url)
    kw.setdefault("retry_wait_seconds", 0.01)
    return GKEProvider(
        fake.project, fake.location, fake.cluster, container_client=container, compute_clients=compute, **kw
    )


def node(fake: FakeGCE, instance: str, *, pool: str | None = None, provider_id: str | None = None) -> Node:
    mig = fake.mig_of(instance)
    return Node(
        name=instance,
        allocatable=Resources(cpu_millicores=4000, memory_bytes=16 << 30, pods=110),
        labels={LABEL_NODEPOOL: pool if pool is not None else fake.pool_of(instance), LABEL_ZONE: mig.zone},
        provider_id=fake.provider_id(instance) if provider_id is None else provider_id,
    )


def deletes(fake: FakeGCE) -> list[Any]:
    return fake.requests_matching("POST", DELETE_PATH)


# -- groups ----------------------------------------------------------------------------------------


def zone_limits_of(group: NodeGroupInfo) -> dict[str, tuple[int, int, int]]:
    return {z.zone: (z.min_size, z.max_size, z.target_size) for z in group.zone_groups}


def test_pool_limits_are_per_zone_total_limits_are_for_the_pool(fake: FakeGCE) -> None:
    fake.add_pool("zonal", ZONES, 2, min=1, max=4)
    fake.add_pool("total", ZONES[:2], 3, min=2, max=5, total=True)
    groups = {g.id: g for g in make_provider(fake).node_groups()}
    # minNodeCount/maxNodeCount hold in each zone (one MIG per zone); the pool has no own minimum.
    assert (groups["zonal"].min_size, groups["zonal"].max_size, groups["zonal"].target_size) == (0, 12, 6)
    assert zone_limits_of(groups["zonal"]) == dict.fromkeys(ZONES, (1, 4, 2))
    assert groups["zonal"].zones == ZONES
    # totalMinNodeCount/totalMaxNodeCount hold for the whole pool; no zone has a minimum.
    assert (groups["total"].min_size, groups["total"].max_size, groups["total"].target_size) == (2, 5, 6)
    assert zone_limits_of(groups["total"]) == dict.fromkeys(ZONES[:2], (0, 5, 3))
    assert groups["total"].zones == ZONES[:2]


def test_disabled_autoscaling_pins_size_and_limits_override(fake: FakeGCE) -> None:
    fake.add_pool("fixed", ZONES[:1], 3, enabled=False)
    fake.add_pool("limited", ZONES[:1], 3, enabled=False)
    auto = fake.add_pool("auto", ZONES, 1, min=1, max=2)
    mig = fake.mig_of(auto[0])
    limits = GroupLimits(
        pools={
            "limited": NodeGroupSpec(min_size=1, max_size=6, name="limited"),
            "auto": NodeGroupSpec(min_size=0, max_size=9, name="auto"),
        },
        migs={mig.name: NodeGroupSpec(min_size=1, max_size=4, name=mig.name)},
    )
    groups = {g.id: g for g in make_provider(fake, limits=limits).node_groups()}
    assert (groups["fixed"].min_size, groups["fixed"].max_size) == (3, 3)
    assert zone_limits_of(groups["fixed"]) == {ZONES[0]: (3, 3, 3)}
    assert (groups["limited"].min_size, groups["limited"].max_size) == (0, 6)
    assert zone_limits_of(groups["limited"]) == {ZONES[0]: (1, 6, 3)}
    # A pool entry limits each zone; an entry naming one MIG wins in that MIG's zone.
    assert (groups["auto"].min_size, groups["auto"].max_size) == (0, 27)
    assert zone_limits_of(groups["auto"]) == {z: (1, 4, 1) if z == mig.zone else (0, 9, 1) for z in ZONES}


@pytest.mark.parametrize(
    ("autoscaling", "zones", "target", "override", "expected"),
    [
        (None, 3, 4, None, (4, 4)),
        (container_v1.NodePoolAutoscaling(enabled=False, min_node_count=1, max_node_count=3), 3, 5, None, (5, 5)),
        (container_v1.NodePoolAutoscaling(enabled=True, min_node_count=1, max_node_count=3), 3, 5, None, (0, 9)),
        (container_v1.NodePoolAutoscaling(enabled=True, min_node_count=0, max_node_count=3), 2, 1, None, (0, 6)),
        (container_v1.NodePoolAutoscaling(enabled=True, total_min_node_count=2, total_max_node_count=7), 3, 4, None, (2, 7)),
        (container_v1.NodePoolAutoscaling(enabled=True, total_min_node_count=0, total_max_node_count=7), 3, 4, None, (0, 7)),
        (None, 3, 4, NodeGroupSpec(min_size=1, max_size=2, name="p"), (0, 6)),
    ],
)  # fmt: skip
def test_pool_limits(
    autoscaling: container_v1.NodePoolAutoscaling | None,
    zones: int,
    target: int,
    override: NodeGroupSpec | None,
    expected: tuple[int, int],
) -> None:
    assert pool_limits(autoscaling, zones, target, override) == expected


@pytest.mark.parametrize(
    ("autoscaling", "target", "override", "expected"),
    [
        (None, 4, None, (4, 4)),
        (container_v1.NodePoolAutoscaling(enabled=False, min_node_count=1, max_node_count=3), 5, None, (5, 5)),
        (container_v1.NodePoolAutoscaling(enabled=True, min_node_count=1, max_node_count=3), 2, None, (1, 3)),
        (container_v1.NodePoolAutoscaling(enabled=True, total_min_node_count=2, total_max_node_count=7), 4, None, (0, 7)),
        (container_v1.NodePoolAutoscaling(enabled=True, min_node_count=1, max_node_count=3), 4, NodeGroupSpec(min_size=2, max_size=5, name="p"), (2, 5)),
    ],
)  # fmt: skip
def test_zone_limits(
    autoscaling: container_v1.NodePoolAutoscaling | None,
    target: int,
    override: NodeGroupSpec | None,
    expected: tuple[int, int],
) -> None:
    assert zone_limits(autoscaling, target, override) == expected


def test_refresh_reads_pools_once_and_each_mig_once(fake: FakeGCE) -> None:
    fake.add_pool("a", ZONES, 1)
    fake.add_pool("b", ZONES[:2], 1)
    provider = make_provider(fake)
    provider.refresh()
    calls = [call_of(r.method, r.path) for r in fake.requests]
    assert calls.count("container.clusters.nodePools.list") == 1
    assert calls.count("compute.instanceGroupManagers.get") == 5
    assert len(calls) == 6
    provider.node_groups()  # served from the cache
    assert len(fake.requests) == 6


def test_every_request_is_a_listed_call_with_an_iam_permission(fake: FakeGCE) -> None:
    names = fake.add_pool("a", ZONES, 2)
    provider = make_provider(fake)
    provider.refresh()
    provider.delete_nodes("a", [node(fake, names[0]), node(fake, names[2])])
    seen = {call_of(r.method, r.path) for r in fake.requests}
    assert seen == set(READ_CALLS) | set(DELETE_CALLS)
    assert set(IAM_PERMISSIONS) == set(READ_CALLS) | set(DELETE_CALLS)


def test_node_to_group_via_provider_id_then_label(fake: FakeGCE) -> None:
    a = fake.add_pool("a", ZONES[:2], 2)
    b = fake.add_pool("b", ZONES[:2], 2)
    provider = make_provider(fake)
    # providerID wins over a wrong label
    group = provider.node_group_for(node(fake, a[3], pool="b"))
    assert group is not None and group.id == "a"
    # no providerID: the label
    group = provider.node_group_for(node(fake, b[0], provider_id=""))
    assert group is not None and group.id == "b"
    # an instance of no known MIG, label of no known pool
    assert (
        provider.node_group_for(node(fake, b[0], pool="zzz", provider_id="gce://proj/europe-west1-b/other-1"))
        is None
    )
    # right name prefix, wrong zone: not that MIG
    mig = fake.mig_of(a[0])
    other_zone = next(z for z in ZONES if z != mig.zone)
    assert (
        provider.node_group_for(node(fake, a[0], pool="", provider_id=f"gce://proj/{other_zone}/{a[0]}"))
        is None
    )
    assert provider.node_group_for(Node(name="x", allocatable=Resources())) is None


def test_gce_ref_parsing() -> None:
    ref = GceRef.from_provider_id("gce://my-proj/us-central1-a/gke-c-p-1234abcd-x1y2")
    assert ref == GceRef("my-proj", "us-central1-a", "gke-c-p-1234abcd-x1y2")
    assert ref.provider_id == "gce://my-proj/us-central1-a/gke-c-p-1234abcd-x1y2"
    assert (
        ref.instance_url
        == f"{COMPUTE_URL}/projects/my-proj/zones/us-central1-a/instances/gke-c-p-1234abcd-x1y2"
    )
    mig = GceRef.from_url(f"{COMPUTE_URL}/projects/p/zones/z/instanceGroupManagers/m-grp")
    assert mig == GceRef("p", "z", "m-grp")
    for bad in ("", "aws:///us-east-1a/i-123", "gce://p/z", "kind://x"):
        with pytest.raises(ValueError):
            GceRef.from_provider_id(bad)
    with pytest.raises(ValueError):
        GceRef.from_url(f"{COMPUTE_URL}/projects/p/regions/r/instanceGroupManagers/m")


# -- delete ----------------------------------------------------------------------------------------


def test_delete_one_node(fake: FakeGCE) -> None:
    names = fake.add_pool("a", ZONES[:2], 2, min=0, max=5)
    provider = make_provider(fake)
    provider.refresh()
    fake.requests.clear()
    victim = names[1]
    mig = fake.mig_of(victim)
    provider.delete_nodes("a", [node(fake, victim)])

    [post] = deletes(fake)
    assert (
        post.path
        == f"/compute/v1/projects/proj/zones/{mig.zone}/instanceGroupManagers/{mig.name}/deleteInstances"
    )
    assert post.json == {"instances": [mig.instance_url(victim)], "skipInstancesOnValidationError": True}
    assert re.fullmatch(r"[0-9a-f-]{36}", post.query["requestId"])
    [wait] = fake.requests_matching("POST", WAIT_PATH)
    op = next(iter(fake.operations))
    assert wait.path == f"/compute/v1/projects/proj/zones/{mig.zone}/operations/{op[1]}/wait"
    assert fake.deleted_instances == [victim]
    assert mig.target_size == 1 and fake.target_size("a") == 3
    assert provider.node_groups()[0].target_size == 3  # the cache follows the deletion
    provider.refresh()
    assert provider.node_groups()[0].target_size == 3


def test_delete_across_zones_one_call_per_mig(fake: FakeGCE) -> None:
    names = fake.add_pool("a", ZONES, 3)
    provider = make_provider(fake)
    victims = [names[0], names[1], names[3], names[8]]
    provider.delete_nodes("a", [node(fake, v) for v in victims])
    posts = deletes(fake)
    assert len(posts) == 3
    assert sorted(len(p.json["instances"]) for p in posts) == [1, 1, 2]
    assert len(fake.requests_matching("POST", WAIT_PATH)) == 3
    assert sorted(fake.deleted_instances) == sorted(victims)
    assert fake.target_size("a") == 5


def test_post_503_twice_then_success_deletes_once(fake: FakeGCE) -> None:
    names = fake.add_pool("a", ZONES[:1], 3)
    provider = make_provider(fake)
    fake.fail("POST", DELETE_PATH, 503, times=2)
    provider.delete_nodes("a", [node(fake, names[0])])
    posts = deletes(fake)
    assert len(posts) == 3
    assert len({p.query["requestId"] for p in posts}) == 1  # one request id for every attempt
    assert fake.deleted_instances == [names[0]]
    assert fake.target_size("a") == 2


def test_post_failing_after_commit_is_deduplicated_by_request_id(fake: FakeGCE) -> None:
    names = fake.add_pool("a", ZONES[:1], 3)
    provider = make_provider(fake)
    fake.fail("POST", DELETE_PATH, 503, times=1, after=True)
    provider.delete_nodes("a", [node(fake, names[0])])
    assert len(deletes(fake)) == 2
    assert fake.deleted_instances == [names[0]]
    assert fake.target_size("a") == 2


def test_429_is_retried(fake: FakeGCE) -> None:
    fake.add_pool("a", ZONES[:1], 2)
    provider = make_provider(fake)
    fake.fail("GET", r"/nodePools$", 429, times=2)
    fake.fail("GET", r"/instanceGroupManagers/[^/]+$", 429, times=1)
    provider.refresh()
    assert len(fake.requests_matching("GET", r"/nodePools$")) == 3
    assert len(fake.requests_matching("GET", r"/instanceGroupManagers/[^/]+$")) == 2
    assert provider.node_groups()[0].target_size == 2


@pytest.mark.parametrize("status", [500, 502, 504])
def test_persistent_5xx_is_a_cloud_error_after_max_attempts(fake: FakeGCE, status: int) -> None:
    fake.add_pool("a", ZONES[:1], 2)
    provider = make_provider(fake, max_attempts=3)
    fake.fail("GET", r"/nodePools$", status)
    with pytest.raises(CloudError, match=rf"container\.clusters\.nodePools\.list .*HTTP {status}"):
        provider.refresh()
    assert len(fake.requests_matching("GET", r"/nodePools$")) == 3


def test_persistent_500_on_delete_names_the_failed_nodes(fake: FakeGCE) -> None:
    names = fake.add_pool("a", ZONES[:1], 3)
    provider = make_provider(fake, max_attempts=4)
    provider.refresh()
    fake.fail("POST", DELETE_PATH, 500)
    with pytest.raises(CloudError, match=r"deleteInstances .*HTTP 500") as err:
        provider.delete_nodes("a", [node(fake, names[0])])
    assert err.value.failed_nodes == (names[0],)
    assert len(deletes(fake)) == 4
    assert fake.deleted_instances == []
    assert provider.node_groups()[0].target_size == 3


def test_non_retryable_error_is_not_retried(fake: FakeGCE) -> None:
    fake.add_pool("a", ZONES[:1], 2)
    provider = make_provider(fake)
    fake.fail("GET", r"/nodePools$", 403)
    with pytest.raises(CloudError, match="HTTP 403"):
        provider.refresh()
    assert len(fake.requests_matching("GET", r"/nodePools$")) == 1


def test_unknown_cluster_is_a_cloud_error(fake: FakeGCE) -> None:
    container, compute = make_clients(fake.url)
    provider = GKEProvider(
        "proj", "europe-west1", "nope", container_client=container, compute_clients=compute
    )
    with pytest.raises(CloudError, match="HTTP 404"):
        provider.refresh()


def test_failing_wait_never_reposts_the_delete(fake: FakeGCE) -> None:
    names = fake.add_pool("a", ZONES[:1], 3)
    provider = make_provider(fake, max_attempts=3)
    provider.refresh()
    fake.fail("POST", WAIT_PATH, 503)
    with pytest.raises(CloudError, match=r"zoneOperations\.wait .*HTTP 503") as err:
        provider.delete_nodes("a", [node(fake, names[0])])
    assert err.value.failed_nodes == (names[0],)
    assert len(deletes(fake)) == 1
    assert len(fake.requests_matching("POST", WAIT_PATH)) == 3
    # the outcome is unknown: the cached size counts the node as gone (conservative)
    assert provider.node_groups()[0].target_size == 2


def test_wait_retries_transient_errors(fake: FakeGCE) -> None:
    names = fake.add_pool("a", ZONES[:1], 3)
    provider = make_provider(fake)
    fake.fail("POST", WAIT_PATH, 503, times=1)
    provider.delete_nodes("a", [node(fake, names[0])])
    assert len(deletes(fake)) == 1
    assert fake.deleted_instances == [names[0]]


def test_operation_polled_until_done(fake: FakeGCE) -> None:
    names = fake.add_pool("a", ZONES[:1], 3)
    provider = make_provider(fake)
    fake.operation_pending_polls = 2
    provider.delete_nodes("a", [node(fake, names[0])])
    assert len(fake.requests_matching("POST", WAIT_PATH)) == 3


def test_operation_not_done_in_time(fake: FakeGCE) -> None:
    names = fake.add_pool("a", ZONES[:1], 3)
    provider = make_provider(fake, operation_timeout_seconds=0.3)
    fake.operation_pending_polls = 10_000
    with pytest.raises(CloudError, match=r"not DONE after 0\.3s"):
        provider.delete_nodes("a", [node(fake, names[0])])
    assert len(deletes(fake)) == 1


def test_operation_error_is_a_cloud_error(fake: FakeGCE) -> None:
    names = fake.add_pool("a", ZONES[:1], 3)
    provider = make_provider(fake)
    provider.refresh()
    fake.fail_next_operation("RESOURCE_NOT_READY", "the MIG is being updated")
    with pytest.raises(CloudError, match="RESOURCE_NOT_READY: the MIG is being updated") as err:
        provider.delete_nodes("a", [node(fake, names[0])])
    assert err.value.failed_nodes == (names[0],)
    assert fake.deleted_instances == []
    assert provider.node_groups()[0].target_size == 3  # nothing was deleted


# -- min size and validation -----------------------------------------------------------------------


def test_min_size_reached(fake: FakeGCE) -> None:
    names = fake.add_pool("a", ZONES[:1], 2, min=1, max=3)
    provider = make_provider(fake)
    provider.delete_nodes("a", [node(fake, names[0])])
    with pytest.raises(MinSizeReached, match="min size reached"):
        provider.delete_nodes("a", [node(fake, names[1])])
    assert len(deletes(fake)) == 1
    assert fake.deleted_instances == [names[0]]


def test_min_size_counts_in_flight_and_batch_size(fake: FakeGCE) -> None:
    names = fake.add_pool("a", ZONES[:1], 3, min=1, max=3)
    provider = make_provider(fake)
    with pytest.raises(MinSizeReached):
        provider.delete_nodes("a", [node(fake, names[0])], in_flight=2)
    with pytest.raises(MinSizeReached, match="at most 2 may go"):
        provider.delete_nodes("a", [node(fake, n) for n in names])
    with pytest.raises(MinSizeReached, match="at most 1 may go"):
        provider.delete_nodes("a", [node(fake, names[0]), node(fake, names[1])], in_flight=1)
    assert deletes(fake) == []
    provider.delete_nodes("a", [node(fake, names[0])], in_flight=1)
    assert fake.deleted_instances == [names[0]]


def test_a_zone_at_its_minimum_is_refused_whatever_the_other_zones_hold(fake: FakeGCE) -> None:
    """minNodeCount is per zone: with 1 per zone, the second node of one zone stays, though the
    pool (6 nodes, 3 zones) would be above a pool-wide reading of the minimum (3)."""
    names = fake.add_pool("a", ZONES, 2, min=1, max=3)
    provider = make_provider(fake)
    first, second = names[:2]  # both in the first zone
    provider.delete_nodes("a", [node(fake, first)], zone_in_flight={})
    with pytest.raises(MinSizeReached, match=f"zone {ZONES[0]}: min size reached"):
        provider.delete_nodes("a", [node(fake, second)], zone_in_flight={})
    with pytest.raises(MinSizeReached, match="at most 1 may go"):
        provider.delete_nodes("a", [node(fake, n) for n in names[2:4]], zone_in_flight={})
    # Deletions in flight elsewhere count in their own zone only.
    provider.delete_nodes("a", [node(fake, names[2])], in_flight=1, zone_in_flight={ZONES[0]: 1})
    assert fake.deleted_instances == [first, names[2]]


def test_concurrent_deletes_count_each_other(fake: FakeGCE) -> None:
    names = fake.add_pool("a", ZONES[:1], 2, min=1, max=3)
    provider = make_provider(fake)
    provider.refresh()
    fake.delay("POST", DELETE_PATH, 0.3)
    errors: list[BaseException] = []

    def delete(name: str) -> None:
        try:
            provider.delete_nodes("a", [node(fake, name)])
        except CloudError as e:
            errors.append(e)

    threads = [threading.Thread(target=delete, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert len(errors) == 1 and isinstance(errors[0], MinSizeReached)
    assert len(fake.deleted_instances) == 1


def test_autoscaling_disabled_pool_is_never_shrunk(fake: FakeGCE) -> None:
    names = fake.add_pool("fixed", ZONES[:2], 3, enabled=False)
    provider = make_provider(fake)
    for n in names:
        with pytest.raises(MinSizeReached):
            provider.delete_nodes("fixed", [node(fake, n)])
    assert deletes(fake) == []
    assert fake.target_size("fixed") == 6


def test_nodes_outside_the_group_are_refused(fake: FakeGCE) -> None:
    a = fake.add_pool("a", ZONES[:1], 3)
    b = fake.add_pool("b", ZONES[:1], 3)
    provider = make_provider(fake)
    with pytest.raises(CloudError, match="does not belong to node group a"):
        provider.delete_nodes("a", [node(fake, a[0]), node(fake, b[0], pool="a")])
    with pytest.raises(CloudError, match="is not a GCE instance"):
        provider.delete_nodes("a", [node(fake, a[0], provider_id="")])
    with pytest.raises(CloudError, match="'zzz' is not a node pool"):
        provider.delete_nodes("zzz", [node(fake, a[0])])
    assert deletes(fake) == []
    provider.delete_nodes("a", [])  # nothing to do
    assert deletes(fake) == []


# -- metadata and from_environment -------------------------------------------------------------


def test_from_environment_reads_the_metadata_server(fake: FakeGCE, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.add_pool("a", ZONES[:1], 2)
    monkeypatch.setenv("GCE_METADATA_HOST", fake.host)
    container, compute = make_clients(fake.url)
    provider = GKEProvider.from_environment(
        container_client=container, compute_clients=compute, retry_wait_seconds=0.01
    )
    assert (provider.project, provider.location, provider.cluster) == (
        fake.project,
        fake.location,
        fake.cluster,
    )
    meta = fake.requests_matching("GET", r"^/computeMetadata/v1/")
    assert {r.path for r in meta} == {
        "/computeMetadata/v1/project/project-id",
        "/computeMetadata/v1/instance/attributes/cluster-name",
        "/computeMetadata/v1/instance/attributes/cluster-location",
    }
    assert all(r.headers["metadata-flavor"] == "Google" for r in meta)
    assert [g.id for g in provider.node_groups()] == ["a"]


def test_from_environment_explicit_values_skip_the_metadata_server(
    fake: FakeGCE, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GCE_METADATA_HOST", f"127.0.0.1:{free_port()}")  # nothing listens there
    container, compute = make_clients(fake.url)
    provider = GKEProvider.from_environment(
        "p", "l", "c", container_client=container, compute_clients=compute
    )
    assert provider.parent == "projects/p/locations/l/clusters/c"


def test_metadata_unavailable_when_down(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GCE_METADATA_HOST", f"127.0.0.1:{free_port()}")  # nothing listens there
    with pytest.raises(MetadataUnavailable, match="metadata server unavailable"):
        GKEProvider.from_environment()
    with pytest.raises(MetadataUnavailable):
        get_metadata("project/project-id", attempts=1)


def test_metadata_missing_value_and_transient_errors(fake: FakeGCE, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GCE_METADATA_HOST", fake.host)
    with pytest.raises(MetadataUnavailable, match="HTTP 404"):
        get_metadata("instance/attributes/nope")
    fake.fail("GET", r"^/computeMetadata/", 503, times=1)
    assert get_metadata("project/project-id", retry_wait_seconds=0.01) == fake.project
    fake.metadata["instance/attributes/cluster-name"] = "renamed"
    assert get_metadata("/instance/attributes/cluster-name") == "renamed"


def test_metadata_answer_must_come_from_a_metadata_server(
    fake: FakeGCE, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GCE_METADATA_HOST", fake.host)
    fake.fail("GET", r"^/computeMetadata/", 200, times=1, body="<html>captive portal</html>")
    with pytest.raises(MetadataUnavailable, match="Metadata-Flavor"):
        get_metadata("project/project-id")


# -- the start-up IAM check (Resource Manager projects.testIamPermissions) ---------------------------


def make_checked_provider(fake: FakeGCE) -> GKEProvider:
    return make_provider(fake, projects_client=make_projects_client(fake.url))


def test_iam_check_passes_when_every_permission_is_granted(fake: FakeGCE) -> None:
    provider = make_checked_provider(fake)
    assert provider.missing_permissions(dry_run=False) == ""
    (request,) = [r for r in fake.requests if r.path.endswith(":testIamPermissions")]
    assert request.path == f"/v3/projects/{fake.project}:testIamPermissions"
    assert sorted(request.json["permissions"]) == sorted(set(IAM_PERMISSIONS.values()))
    assert call_of(request.method, request.path) in CHECK_CALLS


def test_iam_check_names_the_missing_permission_and_the_call_needing_it(fake: FakeGCE) -> None:
    reads = {IAM_PERMISSIONS[c] for c in READ_CALLS}
    fake.iam_permissions = reads  # the dry-run role bound, real deletions asked
    provider = make_checked_provider(fake)
    problem = provider.missing_permissions(dry_run=False)
    assert "compute.instanceGroupManagers.update" in problem
    assert "compute.instanceGroupManagers.deleteInstances" in problem
    assert f"projects/{fake.project}" in problem and "iam-role.yaml" in problem
    # A dry-run only needs the reads, and asks only for them.
    assert provider.missing_permissions(dry_run=True) == ""
    asked = [r.json["permissions"] for r in fake.requests if r.path.endswith(":testIamPermissions")]
    assert sorted(asked[-1]) == sorted(reads)
    fake.iam_permissions = set()
    assert "container.clusters.get" in provider.missing_permissions(dry_run=True)


def test_iam_check_that_cannot_be_made_is_a_warning_not_a_failure(
    fake: FakeGCE, caplog: pytest.LogCaptureFixture
) -> None:
    fake.fail("POST", r":testIamPermissions$", 403)  # Resource Manager API disabled, for instance
    provider = make_checked_provider(fake)
    assert provider.missing_permissions(dry_run=False) == ""
    assert "cannot check the IAM permissions" in caplog.text and "403" in caplog.text
