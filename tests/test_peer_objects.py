"""The side-by-side harness's pure parts (``benchmarks/peer``): how a snapshot is reshaped for a
real API server and the kwok provider, how CA's log and metrics are read, how differences are
classified. No API server here; ``tests/test_peer_ca.py`` runs the whole thing."""

from __future__ import annotations

import json
from typing import Any

import yaml
from realk8s import CaLoop, ca_loops, prometheus_samples

from benchmarks.generate import generate
from benchmarks.peer.objects import (
    ANNOTATION_KWOK_GROUP,
    ANNOTATION_KWOK_MANAGED,
    kwok_config_maps,
    load_plan,
    object_path,
)
from benchmarks.peer.run import classify, markdown, order_only

NOW = "2026-11-04T12:00:00Z"


def _steps(plan: Any, wave: str) -> list[Any]:
    return dict(plan.waves)[wave]


def test_generated_cluster_plan_is_ordered_and_kwok_shaped() -> None:
    plan = load_plan(generate(50).iter_objects(), NOW)
    names = [w for w, _ in plan.waves]
    # owners before what they own: Deployments before ReplicaSets, workloads before pods, nodes before pods
    assert names.index("Deployment") < names.index("ReplicaSet") < names.index("pods")
    assert names.index("nodes") < names.index("pods") and names[0] == "namespaces"
    nodes = _steps(plan, "nodes")
    assert len(nodes) == 50 and sum(len(v) for v in plan.pools.values()) == 50
    for step in nodes:
        meta, spec = step.body["metadata"], step.body["spec"]
        assert spec["providerID"] == f"kwok:{meta['name']}"
        assert meta["annotations"][ANNOTATION_KWOK_GROUP] == meta["labels"]["cloud.google.com/gke-nodepool"]
        assert meta["annotations"][ANNOTATION_KWOK_MANAGED] == "fake"
        assert "uid" not in meta and "status" not in step.body and "taints" not in spec
        assert step.status["allocatable"] and step.patch == {"spec": {"taints": step.patch["spec"]["taints"]}}
    assert len(plan.node_metrics) == 50 and plan.pod_metrics


def test_pods_are_created_bound_with_their_status_and_what_admission_needs() -> None:
    plan = load_plan(generate(50).iter_objects(), NOW)
    pods = _steps(plan, "pods")
    classes = {s.body["metadata"]["name"]: s.body["value"] for s in _steps(plan, "serviceaccounts")
               if s.kind == "PriorityClass"}  # fmt: skip
    assert classes  # the generator's "high" and "best-effort-batch" classes
    for step in pods:
        meta, spec = step.body["metadata"], step.body["spec"]
        assert spec["nodeName"] and "priority" not in spec and "preemptionPolicy" not in spec
        assert "uid" not in meta and "resourceVersion" not in meta and "creationTimestamp" not in meta
        assert step.status and step.status["phase"] and "qosClass" not in step.status
        for ref in meta.get("ownerReferences") or []:
            assert ref["kind"] in {"ReplicaSet", "StatefulSet", "DaemonSet", "Job", "Node"}
        if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
            assert "serviceAccountName" not in spec
            assert not any("serviceAccountToken" in json.dumps(v) for v in spec.get("volumes") or [])
        else:
            assert spec["automountServiceAccountToken"] is False
        for c in spec["containers"]:
            assert "." not in c["name"]
    for step in _steps(plan, "pdbs"):
        assert all(v >= 0 for v in step.status.values() if isinstance(v, int))
    for step in _steps(plan, "Job"):
        assert step.body["spec"]["manualSelector"] is True
        assert step.body["spec"]["template"]["spec"]["restartPolicy"] in ("Never", "OnFailure")


def test_a_pod_with_a_priority_but_no_class_gets_one_and_a_node_without_pool_is_not_kwok() -> None:
    objects = [
        {"kind": "Node", "metadata": {"name": "n1", "labels": {}}, "spec": {"providerID": "kwok:n1"},
         "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "x"}]}},
        {"kind": "Pod", "metadata": {"name": "p", "namespace": "apps", "uid": "u1"},
         "spec": {"nodeName": "n1", "priority": -5, "containers": [{"name": "a.b", "image": "i"}]},
         "status": {"phase": "Running", "qosClass": "BestEffort"}},
        {"kind": "PodMetrics", "metadata": {"name": "p", "namespace": "apps"}, "timestamp": NOW,
         "containers": [{"name": "a.b", "usage": {"cpu": "1m", "memory": "1Ki"}}]},
    ]  # fmt: skip
    plan = load_plan(objects, NOW)
    (node,) = _steps(plan, "nodes")
    assert node.body["spec"]["providerID"] == "external://n1"
    assert node.body["metadata"]["annotations"][ANNOTATION_KWOK_GROUP] == "unmanaged"
    assert node.status["conditions"][0]["lastHeartbeatTime"] == NOW
    (pod,) = _steps(plan, "pods")
    assert pod.body["spec"]["priorityClassName"] == "peer-priority--5"
    assert pod.body["spec"]["containers"][0]["name"] == "a-b"
    assert plan.pod_metrics[0]["containers"][0]["name"] == "a-b"
    assert [s.body["value"] for s in _steps(plan, "serviceaccounts") if s.kind == "PriorityClass"] == [-5]
    assert {s.body["metadata"]["name"] for s in _steps(plan, "namespaces")} == {"apps"}
    assert plan.notes["nodes without a node pool (not autoscaled)"] == 1


def test_kwok_config_maps_describe_one_group_per_pool() -> None:
    plan = load_plan(generate(50).iter_objects(), NOW)
    config, templates = kwok_config_maps(plan.pools, "kube-system")
    assert yaml.safe_load(config["data"]["config"])["readNodesFrom"] == "configmap"
    items = json.loads(templates["data"]["templates"])["items"]
    assert {t["metadata"]["annotations"][ANNOTATION_KWOK_GROUP] for t in items} == set(plan.pools)
    for t in items:
        ann = t["metadata"]["annotations"]
        pool = ann[ANNOTATION_KWOK_GROUP]
        assert int(ann["cluster-autoscaler.kwok.nodegroup/min-count"]) == 0
        assert int(ann["cluster-autoscaler.kwok.nodegroup/desired-count"]) == len(plan.pools[pool])
        assert int(ann["cluster-autoscaler.kwok.nodegroup/max-count"]) >= len(plan.pools[pool])


def test_object_paths() -> None:
    assert object_path("Pod", "p", "ns") == "/api/v1/namespaces/ns/pods/p"
    assert object_path("ReplicaSet", namespace="ns") == "/apis/apps/v1/namespaces/ns/replicasets"
    assert object_path("Node", "n", "ignored") == "/api/v1/nodes/n"
    assert object_path("PodDisruptionBudget", namespace="a") == "/apis/policy/v1/namespaces/a/poddisruptionbudgets"
    assert object_path("PriorityClass", "x") == "/apis/scheduling.k8s.io/v1/priorityclasses/x"


def test_ca_log_and_metrics_are_read() -> None:
    log = (
        "I1124 03:12:38.1 393 static_autoscaler.go:1] Starting main loop\n"
        "I1124 03:12:38.2 393 eligibility.go:1] Node a unremovable: cpu requested (70% of allocatable) is above the scale-down utilization threshold\n"
        "I1124 03:12:38.3 393 cluster.go:1] node b cannot be removed: pod with local storage present: x\n"
        "I1124 03:12:38.4 393 nodes.go:84] c is unneeded since 2026-11-24 03:12:48 +0000 UTC m=+10 duration 0s\n"
        "I1124 03:12:48.0 393 static_autoscaler.go:1] Starting main loop\n"
        "I1124 03:12:48.4 393 nodes.go:84] c is unneeded since 2026-11-24 03:12:48 +0000 UTC m=+10 duration 10s\n"
        "I1124 03:12:58.0 393 static_autoscaler.go:1] Starting main loop\n"
    )  # fmt: skip
    loops = ca_loops(log)
    assert len(loops) == 2  # the third has not finished
    assert loops[0].unneeded == {"c"} and loops[1].unneeded == {"c"}
    assert loops[0].unremovable() == {
        "a": "unremovable: cpu requested (70% of allocatable) is above the scale-down utilization threshold",
        "b": "cannot be removed: pod with local storage present: x",
    }
    text = (
        '# HELP x\ncluster_autoscaler_function_duration_seconds_sum{function="main"} 12.5\n'
        'cluster_autoscaler_function_duration_seconds_count{function="main"} 5\nup 1\n'
    )
    assert prometheus_samples(text, "cluster_autoscaler_function_duration_seconds_sum") == {'function="main"': 12.5}
    assert prometheus_samples(text, "up") == {"": 1.0}
    assert CaLoop(frozenset(), ()).unremovable() == {}


def _side(removable: list[str], reasons: dict[str, str] | None = None) -> dict[str, Any]:
    return {"removable": removable, "reasons": reasons or {}}


def test_differences_are_order_only_when_each_side_takes_the_others_set() -> None:
    ca, ours = _side(["a", "b"], {"c": "cannot be removed: not enough pod disruption budget to move x/p"}), _side(
        ["a", "c"], {"b": "BlockedByPod: NotEnoughPdb"}
    )
    cross = {"scalerOnCaSet": ["a", "b"], "caOnScalerSet": ["a", "c"], "caRejected": {}}
    assert order_only({"a", "b"}, {"a", "c"}, cross)
    diffs = classify(ca, ours, cross)
    assert [(d["node"], d["cause"]) for d in diffs] == [("b", "order"), ("c", "order")]
    assert diffs[0]["ca"] == "unneeded" and diffs[0]["scaler"] == "BlockedByPod: NotEnoughPdb"
    # CA refusing c for a PDB spent by a pod that runs elsewhere (it moved it there): still order
    twice = {**cross, "caOnScalerSet": ["a"], "caRejected": {"c": {"reason": "pdb", "podNode": "a"}}}
    assert order_only({"a", "b"}, {"a", "c"}, twice)
    # ... but not for a pod of its own, nor when scaler refuses part of CA's set
    own = {**twice, "caRejected": {"c": {"reason": "pdb", "podNode": "c"}}}
    assert not order_only({"a", "b"}, {"a", "c"}, own)
    assert classify(ca, ours, {**cross, "scalerOnCaSet": ["a"]})[0]["cause"] == "unexplained"
    assert "cause" not in classify(ca, ours)[0]


def test_markdown_section_from_results() -> None:
    entry = {
        "nodes": 3, "pods": 10, "loadSeconds": {"total": 1.5}, "ca": _side(["a"]), "scalerCaMode": _side(["a"]),
        "scalerDefaults": {**_side(["a", "b"]), "extra": {"nodes": {"a": {"cpuMillicores": 4000, "usage": 0.1},
                                                                     "b": {"cpuMillicores": 2000, "usage": 0.3}}}},
        "parity": [], "usageVsCa": [{"node": "b", "ca": "unremovable: x", "scaler": "removable"}],
    }  # fmt: skip
    text = markdown({"decisions": {"tiny": entry}})
    assert text.startswith("<!-- peer:begin") and text.rstrip().endswith("<!-- peer:end -->")
    assert "| tiny | 3 / 10 | 1.50 s | 1 | 1 | 1 | — (same sets) | none |" in text
    assert "| tiny | 1 (4.0 vCPU, busiest 10%) | 2 (6.0 vCPU, busiest 30%) | 1 | — | `b` |" in text


def test_markdown_loop_rows_and_notes() -> None:
    side = {"functions": {"main": 4.0, "findUnneeded": 3.5, "scaleDown": 0.001}, "loops": 5, "window_seconds": 60.0,
            "cpu_seconds_per_loop": 3.0, "rss_peak_bytes": 512 * 2**20, "simulated_per_loop": 200.0}  # fmt: skip
    entry = {
        "nodes": 1000, "pods": 30000, "loadSeconds": {"total": 240.0, "pods": 180.0}, "loadRequests": 80000,
        "ca": side, "scaler": {**side, "functions": {"main": 1.0}, "simulated_per_loop": 224.0},
        "peakRssBytes": {"kube-apiserver": 3 * 2**30}, "controlPlaneGoMemLimitBytes": 10 * 2**30,
        "machine": {"nproc": 2, "loadavg": [3.0]}, "othersAfter": [],
    }  # fmt: skip
    text = markdown({"loops": {"1000": entry}})
    assert "| 1,000 / 30,000 | 4.0 min | 4.00 s | 0.00 s | 3.50 s | 1.00 s | 0.25× |" in text
    assert "| 512 / 512 MiB | 200 / 224 |" in text
    assert "kube-apiserver 3.0 GiB (kube-apiserver and etcd with `GOMEMLIMIT` 10 GiB)" in text
