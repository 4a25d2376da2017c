"""Decision parity with the real cluster-autoscaler 1.30.7 on a small cluster (issue 17).

A twelve-node cluster, one node per case of CA's scale-down rules, is loaded into a real
kube-apiserver (``../shared/k8s``) through the side-by-side harness (``benchmarks/peer``):
kwok-shaped nodes, Deployments/ReplicaSets, a StatefulSet, a DaemonSet and a Job owning their
pods, a PDB with no disruption left, metrics through ``metrics.k8s.io``. The real
cluster-autoscaler (``../shared/ca``, kwok provider) runs on it; ``scaler dry-run`` in CA's mode
(``--utilization-source=requests --filter-plugins=``) runs against the same API server at the
same moment. Both must find the same nodes removable, and agree on why each other node stays.

The cluster has room to spare on the destinations, so the order in which each simulates its
candidates cannot change the answer (on the bundled snapshots it can: ``python -m
benchmarks.peer decisions`` lists those differences, see docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.peer import harness

pytestmark = pytest.mark.skipif(bool(harness.unavailable()), reason=harness.unavailable() or "available")

NOW = "2026-11-04T12:00:00Z"
CPU, MEM = 4000, 16 * 2**30
POOL = "cloud.google.com/gke-nodepool"


def node(name: str, pool: str | None = "pool-a", **extra: Any) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "topology.kubernetes.io/zone": "zone-a"}
    if pool:
        labels[POOL] = pool
    labels.update(extra.pop("labels", {}))
    resources = {"cpu": f"{CPU}m", "memory": str(MEM), "pods": "110"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": extra.pop("annotations", {})},
        "spec": {"providerID": f"gce://p/zone-a/{name}"},
        "status": {"capacity": resources, "allocatable": resources,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "lastHeartbeatTime": NOW, "lastTransitionTime": NOW}]},
    }  # fmt: skip


def owner(kind: str, name: str) -> list[dict[str, Any]]:
    api = {"Job": "batch/v1", "Node": "v1"}.get(kind, "apps/v1")
    return [{"apiVersion": api, "kind": kind, "name": name, "uid": f"old-{kind}-{name}", "controller": True}]


def pod(name: str, on: str, cpu: int, *, ns: str = "apps", app: str | None = None, owned: tuple[str, str] | None = None,
        annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": {"app": app or name}, "annotations": annotations or {}}
    if owned:
        meta["ownerReferences"] = owner(*owned)
    containers = [{"name": "main", "image": "registry.k8s.io/pause:3.9",
                   "resources": {"requests": {"cpu": f"{cpu}m", "memory": str(cpu * 2**20)}}}]  # fmt: skip
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {"nodeName": on, "containers": containers, **spec},
        "status": {"phase": "Running", "startTime": NOW,
                   "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]},
    }  # fmt: skip


def workload(kind: str, name: str, replicas: int, ns: str = "apps", **meta: Any) -> dict[str, Any]:
    api = "batch/v1" if kind == "Job" else "apps/v1"
    template = {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}}  # fmt: skip
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": name}}, "template": template}
    if kind != "DaemonSet":
        spec["parallelism" if kind == "Job" else "replicas"] = replicas
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": ns, **meta}, "spec": spec}


def rs(name: str, replicas: int, ns: str = "apps") -> dict[str, Any]:
    return workload("ReplicaSet", name, replicas, ns)


def metrics(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for o in objects:
        if o["kind"] == "Node":
            out.append({"kind": "NodeMetrics", "metadata": {"name": o["metadata"]["name"]}, "timestamp": NOW,
                        "window": "30s", "usage": {"cpu": "400m", "memory": str(2 * 2**30)}})  # fmt: skip
        elif o["kind"] == "Pod":
            out.append({"kind": "PodMetrics", "metadata": {"name": o["metadata"]["name"], "namespace": o["metadata"]["namespace"]},
                        "timestamp": NOW, "window": "30s",
                        "containers": [{"name": "main", "usage": {"cpu": "10m", "memory": str(64 * 2**20)}}]})  # fmt: skip
    return out


# node → (CA's answer, scaler's reason); "removable" on both sides for the nodes that go.
EXPECTED = {
    "busy-1": ("above the scale-down utilization threshold", "NotUnderutilized"),
    "busy-2": ("above the scale-down utilization threshold", "NotUnderutilized"),
    "empty": ("removable", "removable"),
    "movable": ("removable", "removable"),
    "stateful": ("removable", "removable"),
    "local-storage": ("local storage", "BlockedByPod"),
    "bare": ("not replicated", "BlockedByPod"),
    "system": ("kube-system", "BlockedByPod"),
    "no-evict": ("not safe to evict", "BlockedByPod"),
    "pdb": ("disruption budget", "BlockedByPod"),
    "pinned": ("can reschedule only", "NoPlaceToMovePods"),
    "disabled": ("", "ScaleDownDisabledAnnotation"),
    "unmanaged": ("", "NotAutoscaled"),
}


def small_cluster() -> list[dict[str, Any]]:
    """One node per case of :data:`EXPECTED` (4 CPU / 16 GiB each)."""
    objs: list[dict[str, Any]] = [
        node("busy-1"), node("busy-2"), node("empty"), node("movable"), node("stateful"), node("local-storage"),
        node("bare"), node("system"), node("no-evict"), node("pdb"), node("pinned", labels={"disktype": "ssd"}),
        node("disabled", annotations={"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}),
        node("unmanaged", pool=None),
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "apps"},
         "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web"}},
                               "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}}}},
        {**rs("web-1", 4), "metadata": {"name": "web-1", "namespace": "apps", "ownerReferences": owner("Deployment", "web")}},
        rs("mover", 1), rs("scratch", 1), rs("dns", 1, "kube-system"), rs("keep", 1), rs("guarded", 1), rs("ssd", 1),
        workload("StatefulSet", "db", 1), workload("DaemonSet", "agent", 0, "kube-system"), workload("Job", "report", 1),
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guarded", "namespace": "apps"},
         "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
         "status": {"currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1, "disruptionsAllowed": 0}},
    ]  # fmt: skip
    for i, n in enumerate(("busy-1", "busy-1", "busy-2", "busy-2")):  # 70% of cpu requested on each busy node
        objs.append(pod(f"web-1-{i}", n, 1400, app="web", owned=("ReplicaSet", "web-1")))
    objs += [
        pod("agent-empty", "empty", 100, ns="kube-system", app="agent", owned=("DaemonSet", "agent")),
        pod("agent-disabled", "disabled", 100, ns="kube-system", app="agent", owned=("DaemonSet", "agent")),
        pod("mover-1", "movable", 500, app="mover", owned=("ReplicaSet", "mover")),
        pod("db-0", "stateful", 300, app="db", owned=("StatefulSet", "db")),
        pod("report-1", "stateful", 200, app="report", owned=("Job", "report")),
        pod("scratch-1", "local-storage", 200, app="scratch", owned=("ReplicaSet", "scratch"),
            volumes=[{"name": "tmp", "emptyDir": {}}]),
        pod("debug", "bare", 200),
        pod("dns-1", "system", 200, ns="kube-system", app="dns", owned=("ReplicaSet", "dns")),
        pod("keep-1", "no-evict", 200, app="keep", owned=("ReplicaSet", "keep"),
            annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
        pod("guarded-1", "pdb", 200, app="guarded", owned=("ReplicaSet", "guarded")),
        pod("ssd-1", "pinned", 200, app="ssd", owned=("ReplicaSet", "ssd"), nodeSelector={"disktype": "ssd"}),
    ]  # fmt: skip
    return objs + metrics(objs)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Loaded]:
    with harness.loaded_cluster(small_cluster(), tmp_path_factory.mktemp("peer")) as cluster:
        yield cluster


def ca_args() -> list[str]:
    return [*harness.CA_DECISION_FLAGS, "--scan-interval=2s"]


def test_ca_and_scaler_in_ca_mode_remove_the_same_nodes_for_the_same_reasons(loaded: harness.Loaded) -> None:
    assert loaded.report.missing_owners == {}, "every owner reference points at a created object"
    with harness.running_ca(loaded, ca_args()) as ca:
        ca_side = harness.ca_decisions(ca, loaded.cp, loops=2, timeout=90)
        ours = harness.scaler_decisions(loaded, harness.SCALER_CA_MODE)
        again = harness.ca_decisions(ca, loaded.cp, loops=3, timeout=60)
    expected = sorted(n for n, (c, _) in EXPECTED.items() if c == "removable")
    assert ca_side.removable == expected, ca.output[-4000:]
    assert again.removable == expected
    assert ours.removable == expected
    for name, (ca_words, our_reason) in EXPECTED.items():
        if ca_words == "removable":
            continue
        assert ours.reasons[name].startswith(our_reason), (name, ours.reasons[name])
        if ca_words:
            assert ca_words in ca_side.reasons.get(name, "").lower(), (name, ca_side.reasons.get(name))
    assert ca_side.extra["statusCandidates"] == len(expected), ca_side.extra["statusConfigMap"]


def test_scaler_defaults_judge_by_the_served_metrics(loaded: harness.Loaded) -> None:
    """scaler's defaults on the same cluster read the served NodeMetrics: the busy nodes are
    70% requested but use 10%, so they are candidates (not ``NotUnderutilized``), and no node
    lacks metrics."""
    ours = harness.scaler_decisions(loaded)
    assert "empty" in ours.removable
    assert "MetricsUnavailable" not in ours.extra["reasonCounts"], ours.extra
    for name in ("busy-1", "busy-2"):
        assert not ours.reasons.get(name, "").startswith("NotUnderutilized"), ours.reasons.get(name)
