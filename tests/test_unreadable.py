"""Objects the live source cannot read (:mod:`scaler.model.unreadable`): which nodes each kind
concerns, what is still read of a malformed object, and that the engine keeps those nodes
neither candidates nor destinations. And hostile nesting: 100,000 levels of JSON or YAML are one
line and exit 2 (snapshot files, the config file, ``--prices``), and a LIST page or a watch
event nested that deep is a decode error, never a ``RecursionError``."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
import pytest
from builders import make_node, make_pod

from scaler.cli import main
from scaler.config import ScalerConfig
from scaler.engine import evaluate
from scaler.errors import EXIT_BAD_INPUT
from scaler.model.decode import TOO_DEEP, decode_list, decode_watch_event
from scaler.model.parse import ObjectError
from scaler.model.records import ANNOTATION_SCALE_DOWN_DISABLED, OwnerRef, Volume
from scaler.model.snapshot import ClusterSnapshot
from scaler.model.unreadable import Unreadable, placeholder_node, unreadable_nodes
from scaler.reasons import UnremovableReason
from scaler.status import parse_annotations

DEPTH = 100_000
EXAMPLE = Path(__file__).resolve().parents[1] / "scaler" / "examples" / "bitbrains-gke-day1"


def bad(kind: str, name: str, namespace: str = "", **kw: Any) -> Unreadable:
    where = f"{namespace}/{name}" if namespace else name
    return Unreadable(kind, namespace, name, f"{kind} {where}: broken", **kw)


def test_each_kind_concerns_the_narrowest_set_of_nodes() -> None:
    nodes = [make_node(n) for n in ("n1", "n2", "n3", "n4")]
    pods = [
        make_pod("web-0", node="n1", namespace="shop", controller=OwnerRef("ReplicaSet", "web")),
        make_pod("db-0", node="n2", namespace="shop", volumes=(Volume("data", "persistentVolumeClaim", claim_name="data-0"),)),
        make_pod("api-0", node="n3", namespace="api", controller=OwnerRef("ReplicaSet", "web")),
    ]  # fmt: skip

    def concerned(*objects: Unreadable) -> set[str]:
        return set(unreadable_nodes(objects, nodes, pods))

    assert concerned(bad("Node", "n4", node="n4")) == {"n4"}
    assert concerned(bad("Pod", "x", "shop", node="n2")) == {"n2"}
    assert concerned(bad("Pod", "pending", "shop", node="")) == set()  # unbound: no node to keep
    assert concerned(bad("Pod", "x", "shop", node_known=False)) == {"n1", "n2", "n3", "n4"}
    assert concerned(bad("ReplicaSet", "web", "shop")) == {"n1"}  # not api's web
    assert concerned(bad("PodDisruptionBudget", "any", "shop")) == {"n1", "n2"}
    assert concerned(bad("PersistentVolumeClaim", "data-0", "shop")) == {"n2"}
    assert concerned(bad("PersistentVolume", "pv-1")) == {"n1", "n2", "n3", "n4"}
    assert concerned(bad("Namespace", "shop")) == {"n1", "n2", "n3", "n4"}
    why = unreadable_nodes([bad("Pod", "x", "shop", node="n1"), bad("ReplicaSet", "web", "shop")], nodes, pods)
    assert why == {"n1": "cannot read Pod shop/x: broken (and 1 more unreadable object(s))"}


def test_what_is_read_of_a_malformed_object() -> None:
    page = json.dumps({"kind": "PodList", "items": [
        {"metadata": {"name": "ok", "namespace": "a"}, "spec": {"nodeName": "n1", "containers": []}},
        {"metadata": {"name": "bad", "namespace": "a", "uid": "u1"}, "spec": {"nodeName": "n2", "priority": "high"}},
        {"metadata": {"name": "worse", "namespace": "a"}, "spec": {"nodeName": 7, "priority": "high"}},
    ]}).encode()  # fmt: skip
    with pytest.raises(ObjectError, match=r"field 'spec\.priority' must be an integer"):
        decode_list(page, "Pod")  # strict: a file, or a LIST that must be whole
    records = decode_list(page, "Pod", lenient=True).records
    assert [type(r).__name__ for r in records] == ["Pod", "Unreadable", "Unreadable"]
    assert (records[1].uid, records[1].node, records[1].node_known) == ("u1", "n2", True)
    assert (records[2].node, records[2].node_known) == ("", False)  # its node cannot be told
    node = decode_list(b'{"items": [{"metadata": {"name": "n9", "labels": {"pool": "a", "n": 1}}}]}', "Node",
                       lenient=True).records[0]  # fmt: skip
    # A label of the wrong type is itself why; the labels that are strings are kept.
    assert node.message == "Node n9: field 'metadata.labels' must map each key to a string, got {'pool': 'a', 'n': 1}"
    assert node.labels == {"pool": "a"}
    assert placeholder_node(node).labels == {"pool": "a"} and not placeholder_node(node).ready
    event = decode_watch_event(
        b'{"type": "MODIFIED", "object": {"metadata": {"name": "n9", "resourceVersion": "5"}}}', "Node"
    )
    assert event.record is None and event.unreadable is not None and event.unreadable.name == "n9"


def test_an_unreadable_nodes_pods_stay_but_it_is_neither_candidate_nor_destination() -> None:
    """n2's 2-core pod fits only on n1 (n3 is full; n1 stays, scale-down disabled). With n1
    unreadable it fits nowhere: n1 is no destination, nor a candidate, with the object's line."""
    nodes = [make_node("n1", annotations={ANNOTATION_SCALE_DOWN_DISABLED: "true"}), make_node("n2"), make_node("n3")]
    pods = [make_pod("a", node="n2", cpu_m=2000), make_pod("b", node="n3", cpu_m=3000)]
    snap = ClusterSnapshot.create(0.0, nodes, pods)
    config = ScalerConfig(utilization_source="requests", filter_plugins=())  # CA mode: requests, no TargetUsage
    before = {r.node.name: r for r in evaluate(snap, config).nodes}
    assert before["n2"].removable and [dest for _, dest in before["n2"].moves] == ["n1"]
    why = "cannot read Pod default/c: broken"
    after = {r.node.name: r for r in evaluate(replace(snap, unreadable={"n1": why}), config).nodes}
    assert (after["n1"].reason, after["n1"].detail) == (UnremovableReason.UnreadableObject, why)
    assert after["n2"].reason is UnremovableReason.NoPlaceToMovePods


def deep_json() -> str:
    return '{"kind": "List", "items": [' + "[" * DEPTH + "]" * DEPTH + "]}"


@pytest.mark.parametrize("name,text", [
    ("nodes.json", deep_json()),
    ("nodes.json", '{"kind": "Node", "metadata": {"name": "n", "labels": ' + '{"a": ' * DEPTH + "1" + "}" * DEPTH + "}}"),
    ("nodes.yaml", "items:\n- " + "[" * DEPTH + "]" * DEPTH + "\n"),
    ("nodes.yaml", "kind: Node\nmetadata: " + "{a: " * DEPTH + "1" + "}" * DEPTH + "\n"),
])  # fmt: skip
def test_a_snapshot_nested_100000_deep_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str
) -> None:
    (tmp_path / name).write_text(text, encoding="utf-8")
    assert main(["dry-run", "--snapshot", str(tmp_path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith(f"scaler: error: {tmp_path / name}: invalid ") and err.count("\n") == 1, err[:500]
    assert "nested" in err or "nesting" in err, err


@pytest.mark.parametrize("flag", ["--config", "--prices"])
def test_a_config_or_price_file_nested_100000_deep_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("x: " + "[" * DEPTH + "]" * DEPTH + "\n", encoding="utf-8")
    assert main(["dry-run", "--snapshot", str(EXAMPLE), flag, str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("nested too deeply" in err or "maximum nesting depth" in err), err[:500]


def test_live_answers_nested_100000_deep_are_decode_errors() -> None:
    with pytest.raises(msgspec.DecodeError, match=re.escape(TOO_DEEP)):
        decode_list(deep_json().encode(), "Pod", lenient=True)
    line = ('{"type": "ADDED", "object": ' + "[" * DEPTH + "]" * DEPTH + "}").encode()
    with pytest.raises(msgspec.DecodeError, match=re.escape(TOO_DEEP)):
        decode_watch_event(line, "Pod")
    # A node's status annotation nested that deep (anyone may write one): not ours, skipped.
    deep = "[" * DEPTH + "]" * DEPTH
    assert parse_annotations([{"metadata": {"name": "n", "annotations": {"scaler.io/scale-down-status": deep}}}]) == {}
