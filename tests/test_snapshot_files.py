"""Snapshot files (JSON or YAML, Lists or single objects, multi-document YAML, directories) and
build_snapshot / flatten_objects."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import scaler
from scaler.model.decode import flatten_objects
from scaler.model.parse import ObjectError
from scaler.model.records import Resources
from scaler.model.snapshot import ClusterSnapshot, SnapshotError, build_snapshot
from scaler.sources.files import iter_snapshot_files, load_objects, load_snapshot

EXAMPLE = Path(scaler.__file__).parent / "examples" / "bitbrains-gke-day1"
T0 = 1793800800.0  # 2026-11-04T14:00:00Z


def node_obj(name: str, cpu: str = "4", memory: str = "16Gi") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"cloud.google.com/gke-nodepool": "pool-a"}},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod_obj(name: str, node: str, cpu: str = "100m", namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Running"},
    }


def node_metrics_list(*names_and_ts: tuple[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "metrics.k8s.io/v1beta1",
        "kind": "NodeMetricsList",
        "metadata": {},
        "items": [
            {
                "metadata": {"name": name},
                "timestamp": ts,
                "window": "30s",
                "usage": {"cpu": "500m", "memory": "1Gi"},
            }
            for name, ts in names_and_ts
        ],
    }


def write_json(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


# --- the bundled example ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def example() -> ClusterSnapshot:
    return load_snapshot([EXAMPLE])


def test_bundled_example_counts(example: ClusterSnapshot) -> None:
    assert len(example.nodes) == 94
    assert len(example.pods) == 1172
    assert len(example.pdbs) == 36
    assert len(example.controllers) == 227
    assert len(example.node_metrics) == 94
    assert len(example.pod_metrics) == 1172
    assert example.has_workloads is True
    assert example.has_pvs is False


def test_bundled_example_now_is_the_newest_node_metrics_timestamp(example: ClusterSnapshot) -> None:
    assert example.now == max(m.timestamp for m in example.node_metrics.values())
    assert example.now == T0 - 12  # 2026-11-04T13:59:48Z


def test_bundled_example_records(example: ClusterSnapshot) -> None:
    name = "gke-prod-eu-default-pool-3e629681-ec85"
    n = example.node_by_name[name]
    assert n.allocatable == Resources(7910, 27793806336, 47060071478, 110, {"hugepages-2Mi": 0})
    assert (n.node_group, n.zone, n.ready) == ("default-pool", "us-central1-a", True)
    assert len(example.pods_by_node[name]) == 14  # the README's table
    m = example.node_metrics[name]
    assert (m.cpu_millicores, m.memory_bytes, m.window_seconds) == (1084, 4649246 * 1024, 30.0)
    assert sorted({x.node_group for x in example.nodes}) == ["default-pool", "highmem-pool"]
    assert sum(len(v) for v in example.pods_by_node.values()) == 1172
    assert [x.name for x in example.nodes] == sorted(x.name for x in example.nodes)


def test_bundled_example_directory_skips_the_readme() -> None:
    files = [p.name for p in iter_snapshot_files([EXAMPLE])]
    assert files == [
        "node-metrics.json",
        "nodes.json",
        "pdbs.json",
        "pod-metrics.json",
        "pods.json",
        "workloads.json",
    ]


def test_explicit_now_overrides_the_metrics_time() -> None:
    assert load_snapshot([EXAMPLE], now=123.5).now == 123.5


# --- formats ------------------------------------------------------------------------------------

MULTI_DOC_YAML = """\
apiVersion: v1
kind: Node
metadata:
  name: n1
  creationTimestamp: 2026-11-04T14:00:00Z
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
  conditions:
  - type: Ready
    status: "True"
---
apiVersion: v1
kind: Pod
metadata:
  name: solo
  namespace: shop
  labels: {tier: 1, canary: true}
  creationTimestamp: 2026-11-04T13:00:00Z
spec:
  nodeName: n1
  containers:
  - name: c
    resources:
      requests: {cpu: 0.5, memory: 64Mi}
---
# an empty document is skipped
---
apiVersion: v1
kind: PodList
items:
- metadata: {name: a, namespace: shop}
  spec:
    nodeName: n1
    containers: [{name: c, resources: {requests: {cpu: 250m}}}]
- kind: Pod
  metadata: {name: b, namespace: shop}
  spec:
    nodeName: n1
    containers: [{name: c, resources: {limits: {cpu: "1", memory: 1Gi}}}]
"""


def test_yaml_multi_document_file_mixing_node_pod_and_pod_list(tmp_path: Path) -> None:
    f = tmp_path / "cluster.yaml"
    f.write_text(MULTI_DOC_YAML, encoding="utf-8")
    objs = list(load_objects([f]))
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [
        ("Node", "n1"),
        ("Pod", "solo"),
        ("Pod", "a"),  # kind taken from the PodList
        ("Pod", "b"),
    ]
    snap = load_snapshot([f], now=T0)
    assert [n.name for n in snap.nodes] == ["n1"]
    assert snap.node_by_name["n1"].creation_ts == T0  # unquoted YAML timestamp
    assert [p.key for p in snap.pods_by_node["n1"]] == ["shop/a", "shop/b", "shop/solo"]
    by_name = {p.name: p for p in snap.pods}
    assert by_name["solo"].requests == Resources(500, 64 * 2**20, 0, 1, {})
    assert by_name["solo"].creation_ts == T0 - 3600
    assert by_name["solo"].labels == {"tier": "1", "canary": "true"}  # as kubectl would send them
    assert by_name["a"].requests.cpu_millicores == 250
    assert by_name["b"].requests == Resources(1000, 2**30, 0, 1, {})
    assert snap.now == T0


def test_node_metrics_list_items_without_kind(tmp_path: Path) -> None:
    f = write_json(
        tmp_path / "m.json",
        node_metrics_list(("n1", "2026-11-04T13:59:00Z"), ("n2", "2026-11-04T13:59:48Z")),
    )
    objs = list(load_objects([f]))
    assert [o["kind"] for o in objs] == ["NodeMetrics", "NodeMetrics"]
    write_json(
        tmp_path / "n.json", {"kind": "List", "items": [node_obj("n1"), node_obj("n2"), pod_obj("p", "n1")]}
    )
    snap = load_snapshot([tmp_path])
    assert sorted(snap.node_metrics) == ["n1", "n2"]
    assert snap.node_metrics["n1"].cpu_millicores == 500
    assert snap.now == T0 - 12  # the newest of the two


def test_pod_metrics_list_items_without_kind_and_now_from_pod_metrics(tmp_path: Path) -> None:
    write_json(
        tmp_path / "n.json", {"kind": "List", "items": [node_obj("n1"), pod_obj("p", "n1", namespace="ns")]}
    )
    write_json(
        tmp_path / "pm.json",
        {
            "kind": "PodMetricsList",
            "items": [
                {
                    "metadata": {"name": "p", "namespace": "ns"},
                    "timestamp": "2026-11-04T14:00:00Z",
                    "window": "30s",
                    "containers": [{"name": "c", "usage": {"cpu": "5m", "memory": "1Mi"}}],
                }
            ],
        },
    )
    snap = load_snapshot([tmp_path])
    assert list(snap.pod_metrics) == [("ns", "p")]
    assert snap.pod_metrics[("ns", "p")].cpu_millicores == 5
    assert snap.now == T0


def test_directory_with_readme_and_nested_dirs(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# not a snapshot {", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("garbage", encoding="utf-8")
    sub = tmp_path / "sub"
    sub.mkdir()
    write_json(sub / "nodes.json", {"kind": "NodeList", "items": [node_obj("n1")]})
    (tmp_path / "pods.yml").write_text(
        "kind: PodList\nitems:\n- " + json.dumps(pod_obj("p", "n1")) + "\n", encoding="utf-8"
    )
    write_json(tmp_path / "metrics.JSON", node_metrics_list(("n1", "2026-11-04T14:00:00Z")))
    assert [p.relative_to(tmp_path).as_posix() for p in iter_snapshot_files([tmp_path])] == [
        "metrics.JSON",
        "pods.yml",
        "sub/nodes.json",
    ]
    snap = load_snapshot([tmp_path])
    assert (len(snap.nodes), len(snap.pods), snap.now) == (1, 1, T0)


def test_directory_without_snapshot_files(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("hi", encoding="utf-8")
    with pytest.raises(
        SnapshotError, match=re.escape(f"{tmp_path}: directory holds no .json or .yaml files")
    ):
        load_snapshot([tmp_path])


def test_explicit_file_is_read_whatever_its_extension(tmp_path: Path) -> None:
    f = tmp_path / "dump.txt"
    f.write_text("kind: Node\n" + "metadata: {name: n1}\nstatus: {allocatable: {cpu: '1', memory: 1Gi}}\n")
    assert [o["kind"] for o in load_objects([f])] == ["Node"]
    g = tmp_path / "dump.out"
    g.write_text(json.dumps({"kind": "List", "items": [node_obj("n2")]}))
    assert [o["metadata"]["name"] for o in load_objects([g])] == ["n2"]


def test_json_top_level_array_and_nested_lists(tmp_path: Path) -> None:
    f = write_json(
        tmp_path / "a.json",
        [node_obj("n1"), {"kind": "List", "items": [{"kind": "PodList", "items": [pod_obj("p", "n1")]}]}],
    )
    assert [(o["kind"], o["metadata"]["name"]) for o in load_objects([f])] == [("Node", "n1"), ("Pod", "p")]


def test_yaml_flow_style_starting_with_brace_falls_back_to_yaml(tmp_path: Path) -> None:
    f = tmp_path / "n.yaml"
    f.write_text("{kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: '1', memory: 1Gi}}}\n")
    assert [o["metadata"]["name"] for o in load_objects([f])] == ["n1"]


def test_json_with_byte_order_mark(tmp_path: Path) -> None:
    f = tmp_path / "nodes.json"
    f.write_bytes(b"\xef\xbb\xbf" + json.dumps({"kind": "List", "items": [node_obj("n1")]}).encode())
    assert [o["metadata"]["name"] for o in load_objects([f])] == ["n1"]


def test_a_kind_the_snapshot_does_not_use_is_an_error_naming_the_file_and_kind(tmp_path: Path) -> None:
    # Issue 12 point 3: a ConfigMap in pods.json is refused, not skipped.
    f = write_json(
        tmp_path / "pods.json",
        {
            "kind": "List",
            "items": [pod_obj("p", ""), {"kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}}],
        },
    )
    with pytest.raises(SnapshotError) as e:
        load_snapshot([tmp_path], now=0.0)
    assert str(e.value).startswith(
        f"{f}: unsupported object kind 'ConfigMap' (ns/cm); a snapshot holds CronJob, "
    )


@pytest.mark.parametrize("two_files", [False, True])
def test_duplicate_objects_are_an_error_naming_both_places(tmp_path: Path, two_files: bool) -> None:
    first = [node_obj("n1"), pod_obj("p", "n1", cpu="100m")]
    second = [pod_obj("p", "n1", cpu="300m")]
    if two_files:
        write_json(tmp_path / "a.json", {"kind": "List", "items": first})
        write_json(tmp_path / "b.json", {"kind": "PodList", "items": second})
        places = (f"{tmp_path / 'a.json'} item 1", f"{tmp_path / 'b.json'} item 0")
    else:
        write_json(tmp_path / "a.json", {"kind": "List", "items": first + second})
        places = (f"{tmp_path / 'a.json'} item 1", f"{tmp_path / 'a.json'} item 2")
    with pytest.raises(SnapshotError) as e:
        load_snapshot([tmp_path], now=0.0)
    assert str(e.value) == f"Pod default/p appears twice: in {places[0]} and in {places[1]}"


def test_a_snapshot_without_pods_is_refused(tmp_path: Path) -> None:
    # Issue 12 point 3: nodes and node metrics alone would report every node removable.
    write_json(tmp_path / "nodes.json", {"kind": "List", "items": [node_obj("n1")]})
    write_json(tmp_path / "node-metrics.json", node_metrics_list(("n1", "2026-11-04T14:00:00Z")))
    with pytest.raises(SnapshotError) as e:
        load_snapshot([tmp_path])
    assert str(e.value) == (
        f"{tmp_path}: the snapshot has no Pod objects; every cluster runs pods (kube-system at least): "
        "include them (kubectl get pods -A -o json)"
    )


def test_pods_bound_to_a_missing_node_are_skipped_and_said(tmp_path: Path) -> None:
    """A snapshot taken while nodes were being removed (before pod garbage collection ran) holds
    pods bound to nodes it does not have: they are skipped, as the live source and
    cluster-autoscaler's cluster snapshot skip them, and one line says how many and where."""
    write_json(
        tmp_path / "all.json",
        {
            "kind": "List",
            "items": [
                node_obj("n1"),
                pod_obj("p", "n1"),
                pod_obj("q", "gone", namespace="shop"),
                pod_obj("r", "gone", namespace="shop"),
                pod_obj("s", "also-gone"),
            ],
        },
    )
    lines: list[str] = []
    snap = load_snapshot([tmp_path], now=0.0, warn=lines.append)
    assert [p.key for p in snap.pods] == ["default/p"]
    assert lines == [
        "skipped 3 pods bound to nodes not in the snapshot, as the live source and cluster-autoscaler "
        "skip them: also-gone (1), gone (2)"
    ]


def test_dry_run_skips_pods_bound_to_a_missing_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``scaler dry-run --snapshot`` on the bundled example plus a pod bound to a node that is
    gone: exit 0, the decisions of the example alone, and one line on stderr naming the node."""
    from scaler.cli import main

    dangling = tmp_path / "dangling"
    dangling.mkdir()
    write_json(dangling / "pod.json", pod_obj("orphan", "gke-prod-eu-default-pool-3e629681-gone"))
    assert main(["dry-run", "--snapshot", str(EXAMPLE), "-o", "json"]) == 0
    alone = capsys.readouterr().out
    assert main(["dry-run", "--snapshot", str(EXAMPLE), str(dangling), "-o", "json"]) == 0
    out, err = capsys.readouterr()
    assert out.replace(f", {dangling}", "") == alone
    assert (
        "scaler: skipped 1 pod bound to node not in the snapshot, as the live source and cluster-autoscaler "
        "skip them: gke-prod-eu-default-pool-3e629681-gone (1)\n"
    ) in err


def test_a_pod_without_spec_is_refused(tmp_path: Path) -> None:
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "q", "namespace": "shop"}}
    f = write_json(tmp_path / "pods.json", {"kind": "List", "items": [node_obj("n1"), bare]})
    with pytest.raises(SnapshotError) as e:
        load_snapshot([tmp_path], now=0.0)
    assert str(e.value) == f"{f}: Pod shop/q: missing required field 'spec'"


def test_unscheduled_pods_need_no_node(tmp_path: Path) -> None:
    write_json(tmp_path / "all.json", {"kind": "List", "items": [node_obj("n1"), pod_obj("p", "")]})
    assert [p.node_name for p in load_snapshot([tmp_path], now=0.0).pods] == [""]


def test_pvs_and_workloads_flags(tmp_path: Path) -> None:
    objs: list[dict[str, Any]] = [node_obj("n1")]
    snap = build_snapshot(objs, now=1.0)
    assert (snap.has_pvs, snap.has_workloads) == (False, False)
    objs += [
        {"kind": "PersistentVolume", "metadata": {"name": "pv1"}},
        {
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"volumeName": "pv1"},
        },
        {"kind": "Deployment", "metadata": {"name": "d", "namespace": "ns"}, "spec": {"replicas": 2}},
        {"kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "ns"}, "spec": {}},
    ]
    snap = build_snapshot(objs, now=1.0)
    assert (snap.has_pvs, snap.has_workloads) == (True, True)
    assert list(snap.pvs) == ["pv1"]
    assert snap.pvcs[("ns", "c")].volume_name == "pv1"
    assert snap.controllers[("Deployment", "ns", "d")].replicas == 2
    assert [(b.namespace, b.name) for b in snap.pdbs] == [("ns", "b")]


def test_pods_on_unknown_nodes_are_kept_but_not_indexed() -> None:
    snap = build_snapshot([node_obj("n1"), pod_obj("p", "elsewhere"), pod_obj("q", "")], now=5.0)
    assert sorted(p.name for p in snap.pods) == ["p", "q"]
    assert snap.pods_by_node == {"n1": ()}


# --- errors -------------------------------------------------------------------------------------


def test_bad_json_names_the_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "nodes.json"
    f.write_text('{\n  "kind": "NodeList",\n  "items": [\n    {"kind": "Node",}\n  ]\n}\n')
    with pytest.raises(SnapshotError) as e:
        load_snapshot([f])
    msg = str(e.value)
    assert msg.startswith(f"{f}: invalid JSON at line 4 column ")
    assert "\n" not in msg


def test_bad_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "nodes.yaml"
    f.write_text("kind: Node\nmetadata:\n  name: n1\n   bad: indent\n")
    with pytest.raises(SnapshotError, match=re.escape(f"{f}: invalid YAML at line 4")):
        load_snapshot([f])


def test_nonexistent_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(SnapshotError, match=f"^{re.escape(str(missing))}: no such file or directory$"):
        load_snapshot([missing])


def test_unsupported_kind_names_the_kind_and_object(tmp_path: Path) -> None:
    f = write_json(tmp_path / "x.json", {"kind": "Gadget", "metadata": {"name": "g", "namespace": "ns"}})
    with pytest.raises(SnapshotError) as e:
        load_snapshot([f], now=0.0)
    assert str(e.value).startswith(
        f"{f}: unsupported object kind 'Gadget' (ns/g); a snapshot holds CronJob, "
    )


def test_object_without_kind_or_with_unhashable_kind(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match=r"^unsupported object kind None \(x\); a snapshot holds "):
        build_snapshot([{"metadata": {"name": "x"}}], now=0.0)
    with pytest.raises(SnapshotError, match=re.escape("unsupported object kind ['Pod'] (x)")):
        build_snapshot([{"kind": ["Pod"], "metadata": {"name": "x"}}], now=0.0)


def test_no_metrics_and_no_now(tmp_path: Path) -> None:
    f = write_json(tmp_path / "n.json", {"kind": "List", "items": [node_obj("n1"), pod_obj("p", "n1")]})
    with pytest.raises(SnapshotError) as e:
        load_snapshot([f])
    assert str(e.value) == f"{f}: snapshot has no metrics timestamp; pass --now"
    assert load_snapshot([f], now=42.0).now == 42.0


def test_malformed_object_becomes_a_snapshot_error_naming_it(tmp_path: Path) -> None:
    bad = pod_obj("web-0", "n1", cpu="1.2.3", namespace="shop")
    f = write_json(tmp_path / "pods.json", {"kind": "PodList", "items": [bad]})
    with pytest.raises(SnapshotError) as e:
        load_snapshot([f], now=0.0)
    assert str(e.value) == f"{f}: Pod shop/web-0: container 'c' resources: invalid quantity '1.2.3'"


def test_wrongly_shaped_object_is_a_snapshot_error_not_a_crash() -> None:
    bad = pod_obj("p", "n1")
    bad["spec"]["containers"] = ["nginx"]
    with pytest.raises(
        SnapshotError, match=r"^Pod default/p: field 'spec.containers\[0\]' must be an object, got 'nginx'$"
    ):
        build_snapshot([bad], now=0.0)


def test_document_that_is_not_an_object(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("just a string\n")
    with pytest.raises(SnapshotError, match=re.escape(f"{f}: expected a Kubernetes object or List, got str")):
        load_objects([f])
    g = write_json(tmp_path / "l.json", [node_obj("n1"), 5])
    with pytest.raises(
        SnapshotError,
        match=re.escape(f"{g} item 1: expected a Kubernetes object or List, got int"),
    ):
        load_objects([g])


def flat(doc: Any) -> list[tuple[Any, str | None]]:
    return [(obj, kind) for obj, kind, _ in flatten_objects(doc, "src")]


def test_flatten_objects() -> None:
    assert flat(None) == []
    assert flat({"kind": "PodList", "items": None}) == []
    assert flat({"kind": "Pod", "metadata": {"name": "p"}}) == [
        ({"kind": "Pod", "metadata": {"name": "p"}}, None)
    ]
    # items without a kind in a kind-less or generic List get no kind from it
    assert flat({"items": [{"metadata": {"name": "a"}}]}) == [({"metadata": {"name": "a"}}, None)]
    assert flat({"kind": "List", "items": [{"metadata": {"name": "a"}}]}) == [
        ({"metadata": {"name": "a"}}, None)
    ]
    # a typed List names its items' kind; an item's own kind wins when parsed
    assert flat({"kind": "PodList", "items": [{"kind": "Node"}, {}]}) == [
        ({"kind": "Node"}, "Pod"),
        ({}, "Pod"),
    ]
    assert flat({"kind": "NodeMetricsList", "items": [{}]}) == [({}, "NodeMetrics")]
    places = [
        p
        for _, _, p in flatten_objects(
            {"kind": "List", "items": [{}, {"kind": "PodList", "items": [{}]}]}, "f"
        )
    ]
    assert places == ["f item 0", "f item 1 item 0"]
    with pytest.raises(ObjectError, match=r"^src: 'items' must be a list$"):
        flat({"kind": "PodList", "items": {"a": 1}})
    with pytest.raises(ObjectError, match=r"^src item 1: expected a Kubernetes object or List, got str$"):
        flat({"kind": "PodList", "items": [{}, "x"]})
    with pytest.raises(ObjectError, match=r"^src: expected a Kubernetes object or List, got list$"):
        flat([{}])


def test_yaml_scalars_are_read_as_kubectl_would_send_them(tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(
        "kind: List\nitems:\n"
        "- {kind: Node, metadata: {name: n1}, spec: {unschedulable: true},"
        " status: {allocatable: {cpu: 2, memory: 1Gi}}}\n"
        "- {kind: Deployment, metadata: {name: d, namespace: ns}, spec: {replicas: 3}}\n"
        "- {kind: Pod, metadata: {name: p, namespace: ns}, spec: {nodeName: n1, priority: -5,"
        " containers: [{name: c}]}}\n"
        "- {kind: PodDisruptionBudget, metadata: {name: b, namespace: ns}, spec: {selector: null}}\n"
    )
    snap = load_snapshot([f], now=0.0)
    assert snap.nodes[0].unschedulable is True and snap.nodes[0].allocatable.cpu_millicores == 2000
    assert snap.controllers[("Deployment", "ns", "d")].replicas == 3
    assert snap.pods[0].priority == -5
    assert snap.pdbs[0].selector is None
    f.write_text("kind: Deployment\nmetadata: {name: d}\nspec: {replicas: many}\n")
    with pytest.raises(SnapshotError, match=r"Deployment d: field 'spec.replicas' must be an integer, got 'many'$"):
        load_snapshot([f], now=0.0)
