"""The Actuator's steps against the loopback API server, through its public seams only: taint,
re-check, drain through the Eviction API, verify, delete — or roll back — with the in-place
dispatcher and no waits, then with the live thread dispatcher. The cluster (three nodes, a
ReplicaSet's pods, their metrics) is read with the live source and evaluated by the engine, so the
plan is the one a loop would make; faults are injected by the server, never by patching."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fakes.kube_api import FakeKubeAPI
from waiting import wait_for

from scaler.actuation.actuator import (
    FRESH_VIEW_POLL_SECONDS,
    FRESH_VIEW_WAIT_SECONDS,
    TAINT_REMOVED,
    Actuator,
    NodeOutcome,
    in_threads,
    inline,
)
from scaler.cloud.kubernetes import KubernetesProvider
from scaler.config import ScalerConfig
from scaler.engine import evaluate
from scaler.kube.leader import LeaseLost
from scaler.kube.writer import ANNOTATION_OWNER, KubeWriter
from scaler.model.records import TAINT_TO_BE_DELETED, Pod
from scaler.model.snapshot import ClusterSnapshot
from scaler.observability import Metrics
from scaler.planner import ScaleDownPlan
from scaler.reasons import NodeStatus
from scaler.simulator.registry import Plugins, resolve_plugins
from scaler.simulator.state import ClusterState, NodeState
from scaler.sources.kube import load_live_snapshot

NOW = 1_780_000_000.0
STAMP = "2026-05-28T20:26:40Z"  # NOW
NS = "apps"
POOL = "cloud.google.com/gke-nodepool"


def node_json(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-05-01T00:00:00Z",
            "labels": {POOL: "pool", "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "z-a"},
        },
        "spec": {"providerID": f"gce://p/z-a/{name}"},
        "status": {
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod_json(name: str, node: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "labels": {"app": "web"},
            "creationTimestamp": "2026-05-02T00:00:00Z",
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "uid-rs", "controller": True}
            ],
        },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def metrics_json(kind: str, name: str, cpu: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "creationTimestamp": STAMP}
    usage = {"cpu": cpu, "memory": "1Gi"}
    if kind == "NodeMetrics":
        return {"apiVersion": "metrics.k8s.io/v1beta1", "kind": kind, "metadata": meta, "timestamp": STAMP,
                "window": "30s", "usage": usage}  # fmt: skip
    meta["namespace"] = NS
    return {"apiVersion": "metrics.k8s.io/v1beta1", "kind": kind, "metadata": meta, "timestamp": STAMP,
            "window": "30s", "containers": [{"name": "c", "usage": usage}]}  # fmt: skip


def cluster() -> list[dict[str, Any]]:
    """n1: one small pod (a drain candidate); n2: one small pod; n3: a busy pod (stays)."""
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": NS, "uid": "uid-rs"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"replicas": 3, "readyReplicas": 3},
    }
    pods = [("web-1", "n1", "100m"), ("web-2", "n2", "100m"), ("web-3", "n3", "3")]
    return [
        *(node_json(n) for n in ("n1", "n2", "n3")),
        rs,
        *(pod_json(*p) for p in pods),
        *(metrics_json("NodeMetrics", n, "200m" if n != "n3" else "3") for n in ("n1", "n2", "n3")),
        *(metrics_json("PodMetrics", name, cpu) for name, _, cpu in pods),
    ]


@pytest.fixture
def fake(no_proxy: None) -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        server.grace_scale = 0.0  # an evicted pod is deleted at once
        server.load_objects(cluster())
        yield server


def config() -> ScalerConfig:
    return ScalerConfig.from_mapping({"cloud_provider": "kubernetes", "max_pod_eviction_time": 5.0})


class Harness:
    """An Actuator over the fake, with what it reports."""

    def __init__(self, api: Any, **kw: Any) -> None:
        self.api = api
        self.outcomes: list[NodeOutcome] = []
        self.sleeps: list[float] = []
        fence = kw.pop("fence", None)
        self.writer = KubeWriter(api, "scaler", clock=lambda: NOW, sleep=self.sleeps.append, replica="a_1",
                                 eviction_retry_seconds=0.01, conflict_retry_seconds=0.01, fence=fence)  # fmt: skip
        cloud = KubernetesProvider(api, retry_wait_seconds=0.01)
        kw.setdefault("dispatcher", inline)
        kw.setdefault("sleep", self.sleeps.append)
        kw.setdefault("node_poll_seconds", 0.0)
        self.actuator = Actuator(config(), self.writer, cloud, self.snapshot, Metrics(), self.outcomes.append,
                                 clock=lambda: NOW, pod_poll_seconds=0.0,
                                 rollback_backoff=(0.01, 0.01), fence=fence, **kw)  # fmt: skip

    def snapshot(self) -> ClusterSnapshot:
        return load_live_snapshot(self.api, NOW)

    def plan(self, *names: str) -> ScaleDownPlan:
        """The engine's verdicts on the live state, for nodes ``names`` only."""
        results = {r.node.name: r for r in evaluate(self.snapshot(), config()).nodes}
        chosen = [results[n] for n in names]
        assert all(r.status is not NodeStatus.UNREMOVABLE for r in chosen), [r.detail for r in chosen]
        empty = tuple(r for r in chosen if r.status is NodeStatus.REMOVABLE_EMPTY)
        drain = tuple(r for r in chosen if r.status is NodeStatus.REMOVABLE_DRAIN)
        return ScaleDownPlan(NOW, empty, drain, dict.fromkeys(names, NOW - 600), {})


def marked(fake: FakeKubeAPI, name: str) -> bool:
    node = fake.get_object("Node", name)
    assert node is not None
    taints = node["spec"].get("taints") or []
    return (
        bool(node["spec"].get("unschedulable"))
        or any(t["key"] == TAINT_TO_BE_DELETED for t in taints)
        or (ANNOTATION_OWNER in (node["metadata"].get("annotations") or {}))
    )


def test_a_drain_evicts_through_the_eviction_api_then_deletes_the_node(fake: FakeKubeAPI, api: Any) -> None:
    h = Harness(api)
    plan = h.plan("n1")
    assert [r.node.name for r in plan.drain] == ["n1"]
    assert h.actuator.start(plan) == []
    assert h.outcomes == [NodeOutcome("n1", True, "", h.outcomes[0].message, NOW)]
    assert fake.get_object("Node", "n1") is None
    assert fake.get_object("Pod", "web-1", NS) is None
    assert [r.method for r in fake.requests_to(f"/api/v1/namespaces/{NS}/pods/web-1/eviction", "POST")] == ["POST"]
    assert h.actuator.idle() and h.actuator.in_flight == {}
    assert h.sleeps[0] == config().node_delete_delay_after_taint  # the wait after the taint, injected


def test_a_failed_delete_is_rolled_back(fake: FakeKubeAPI, api: Any) -> None:
    fake.fail("/api/v1/nodes/n1", 500, method="DELETE", exact=True)
    h = Harness(api)
    assert h.actuator.start(h.plan("n1")) == []
    [outcome] = h.outcomes
    assert (outcome.node, outcome.ok, outcome.step) == ("n1", False, "delete")
    assert fake.get_object("Node", "n1") is not None and not marked(fake, "n1")
    assert h.actuator.idle() and h.actuator.rollbacks == {}


def test_a_lost_lease_stops_before_any_write(fake: FakeKubeAPI, api: Any) -> None:
    def fence() -> None:
        raise LeaseLost("lease held by b_2")

    h = Harness(api, fence=fence)
    plan = h.plan("n1")
    fake.requests.clear()
    with pytest.raises(LeaseLost):
        h.actuator.start(plan)
    assert h.actuator.lease_lost.is_set()
    assert [r for r in fake.requests if r.method != "GET"] == []


def test_the_live_dispatcher_runs_the_removal_in_its_own_thread(fake: FakeKubeAPI, api: Any) -> None:
    started: list[str] = []

    def threads(kind: str, node: str, work: Any) -> Any:
        started.append(f"{kind}-{node}")
        return in_threads(kind, node, work)

    h = Harness(api, dispatcher=threads)
    assert h.actuator.start(h.plan("n1")) == []  # returns once the thread is started
    wait_for(h.actuator.idle, what="the removal to end")
    h.actuator.stop(timeout=30)
    assert started == ["remove-n1"] and [(o.node, o.ok) for o in h.outcomes] == [("n1", True)]
    assert fake.get_object("Node", "n1") is None


class Slow:
    """A filter that passes every node after 0.3 s and counts how many checks run it at once."""

    name = "Slow"
    lock = threading.Lock()
    inside = most = calls = 0

    def __init__(self, config: ScalerConfig) -> None:
        pass

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        with Slow.lock:
            Slow.inside += 1
            Slow.calls += 1
            Slow.most = max(Slow.most, Slow.inside)
        time.sleep(0.3)
        with Slow.lock:
            Slow.inside -= 1
        return None


def test_the_re_checks_of_removals_in_their_own_threads_take_turns(fake: FakeKubeAPI, api: Any) -> None:
    """The removals in flight share the actuator's evaluation cache, whose simulation state
    serves one check at a time: their re-checks run one after the other, never together."""
    for name in ("n4", "n5"):  # destinations that are never candidates
        node = node_json(name)
        node["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}
        fake.load_objects([node, metrics_json("NodeMetrics", name, "200m")])
    Slow.inside = Slow.most = Slow.calls = 0
    plugins = Plugins(config(), (*resolve_plugins(config()).filter_classes, Slow), ())
    h = Harness(api, dispatcher=in_threads, plugins=plugins)
    assert h.actuator.start(h.plan("n1", "n2")) == []
    wait_for(h.actuator.idle, what="both removals to end")
    h.actuator.stop(timeout=30)
    assert sorted((o.node, o.ok) for o in h.outcomes) == [("n1", True), ("n2", True)]
    assert Slow.calls >= 2 and Slow.most == 1


def test_a_stale_view_holds_the_recheck_until_it_is_fresh(fake: FakeKubeAPI, api: Any) -> None:
    """While ``hold`` says the view may be stale (a kind being relisted), the removal waits
    before its re-check; once fresh it goes on and the node goes."""
    answers = ["Pod relisting after watch ERROR 410: 2s"] * 3
    h = Harness(api, hold=lambda: answers.pop() if answers else "")
    assert h.actuator.start(h.plan("n1")) == []
    assert [(o.node, o.ok) for o in h.outcomes] == [("n1", True)]
    assert h.sleeps.count(FRESH_VIEW_POLL_SECONDS) == 3


def test_a_view_stale_for_too_long_rolls_the_removal_back_with_no_eviction_or_delete(
    fake: FakeKubeAPI, api: Any
) -> None:
    h = Harness(api, hold=lambda: "Pod relisting after watch ERROR 410")
    assert h.actuator.start(h.plan("n1")) == []
    [outcome] = h.outcomes
    assert (outcome.step, outcome.message) == (
        "recheck",
        f"the cluster view stayed stale for {FRESH_VIEW_WAIT_SECONDS:.0f}s (Pod relisting after watch ERROR 410)",
    )
    assert fake.requests_to(f"/api/v1/namespaces/{NS}/pods/web-1/eviction", "POST") == []
    assert [r for r in fake.requests if r.method == "DELETE"] == []
    assert fake.get_object("Node", "n1") is not None and not marked(fake, "n1")


def test_a_drain_stops_when_someone_removes_its_taint(fake: FakeKubeAPI, api: Any) -> None:
    """A cluster-autoscaler starting beside scaler removes every ToBeDeletedByClusterAutoscaler
    taint, a drain's included: the drain stops (no further eviction), the removal fails saying
    why, the node is rolled back (uncordoned) and not deleted."""
    eviction = f"/api/v1/namespaces/{NS}/pods/web-1/eviction"
    fake.fail(eviction, 429, method="POST")  # a PDB that refuses: the drain lasts
    h = Harness(api, node_poll_seconds=0.02)
    plan = h.plan("n1")
    removed: list[int] = []

    def remove_taint() -> None:
        wait_for(lambda: fake.requests_to(eviction, "POST"), 10, "a first eviction")
        node = fake.get_object("Node", "n1")
        assert node is not None
        node["spec"]["taints"] = [
            t for t in node["spec"].get("taints") or [] if t["key"] != TAINT_TO_BE_DELETED
        ]
        fake.put_object(node)
        removed.append(len(fake.requests_to(eviction, "POST")))

    remover = threading.Thread(target=remove_taint)
    remover.start()
    assert h.actuator.start(plan) == []
    remover.join(10)
    [outcome] = h.outcomes
    assert (outcome.step, outcome.message) == ("drain", TAINT_REMOVED), outcome
    assert "cluster-autoscaler" in outcome.message
    # The watcher reads the node every 20 ms, the evictions are retried every 10 ms: at most a
    # few more attempts went out before it saw the taint gone, and none after the removal ended.
    assert len(fake.requests_to(eviction, "POST")) <= removed[0] + 5
    node = fake.get_object("Node", "n1")
    assert node is not None and not marked(fake, "n1")
