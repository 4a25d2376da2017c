"""Acceptance: the JSON report of the real-trace snapshots, checked from the report alone.

Each report is re-checked without the engine: every move respects TargetUsage cumulatively per
destination, requests fit, taints and nodeSelectors; no pod moves onto a removable node; every
DaemonSet-only node has utilization 0. The input snapshot is read only to find which nodes hold
``safe-to-evict: "false"`` pods or pods under an exhausted PDB, whose verdicts are then checked.
"""

from __future__ import annotations

import json
from collections import defaultdict
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from scaler.cli import main
from scaler.model.records import ANNOTATION_SAFE_TO_EVICT
from scaler.report.models import DryRunReport
from scaler.sources.files import load_snapshot

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data" / "snapshots"
SNAPSHOTS = {
    "bitbrains-gke-day1": ROOT / "scaler" / "examples" / "bitbrains-gke-day1",
    "bitbrains-gke-night": ROOT / "tests" / "data" / "snapshots" / "bitbrains-gke-night",
    "bitbrains-gke-night-lowreq": ROOT / "tests" / "data" / "snapshots" / "bitbrains-gke-night-lowreq",
}
# Reasons decided before the drain rules run: such nodes never reach the pod checks.
ELIGIBILITY_REASONS = {
    "RecentlyUnremovable", "CurrentlyBeingDeleted", "ScaleDownDisabledAnnotation", "NotAutoscaled",
    "NodeGroupMinSizeReached", "UnexpectedError", "ScaleDownUnreadyDisabled", "MetricsUnavailable",
    "NotUnderutilized", "DestinationForMovedPods",
}  # fmt: skip


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["dry-run", *args, "--output", "json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def tolerates(tol: dict[str, str], taint: dict[str, str]) -> bool:
    if tol.get("effect") and tol["effect"] != taint["effect"]:
        return False
    if not tol.get("key"):
        return tol.get("operator") == "Exists"
    if tol["key"] != taint["key"]:
        return False
    return tol.get("operator") == "Exists" or tol.get("value", "") == taint.get("value", "")


def check_report(report: dict[str, Any]) -> int:
    """Check every invariant; returns the number of moves checked."""
    DryRunReport.model_validate(report)
    nodes = {n["name"]: n for n in report["nodes"]}
    flags = report["flags"]
    target_cpu = Fraction(str(flags["target-cpu-usage"]))
    target_mem = Fraction(str(flags["target-memory-usage"]))
    removable = {name for name, n in nodes.items() if n["removable"]}
    moved: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    count = 0
    for n in report["nodes"]:
        assert n["removable"] == (n["status"] != "unremovable")
        assert (n["reason"] == "NoReason") == n["removable"]
        if n["moves"]:
            assert n["status"] == "removable-drain"
        for m in n["moves"]:
            count += 1
            dest = nodes[m["destination"]]
            assert dest["name"] not in removable, f"{m['pod']} moves onto removable {dest['name']}"
            assert dest["name"] != n["name"]
            assert not dest["unschedulable"]
            for taint in dest["taints"]:
                if taint["effect"] in ("NoSchedule", "NoExecute"):
                    assert any(tolerates(t, taint) for t in m["tolerations"]), (m["pod"], taint)
            for key, value in m["nodeSelector"].items():
                assert dest["labels"].get(key) == value, (m["pod"], key)
            acc = moved[dest["name"]]
            acc[0] += m["requests"]["cpuMillicores"]
            acc[1] += m["requests"]["memoryBytes"]
            acc[2] += 1
    for name, (cpu, mem, pods) in moved.items():
        d = nodes[name]
        alloc, req, use = d["allocatable"], d["requested"], d["usage"]
        # TargetUsage, cumulative: usage + every request moved here (the total bounds every prefix).
        assert use["cpuMillicores"] is not None and use["memoryBytes"] is not None
        assert use["cpuMillicores"] + cpu <= target_cpu * alloc["cpuMillicores"], name
        assert use["memoryBytes"] + mem < target_mem * alloc["memoryBytes"], name
        # NodeResourcesFit by requests.
        assert req["cpuMillicores"] + cpu <= alloc["cpuMillicores"], name
        assert req["memoryBytes"] + mem <= alloc["memoryBytes"], name
        assert req["pods"] + pods <= alloc["pods"], name
    for n in report["nodes"]:
        ds_only = n["pods"]["total"] == n["pods"]["daemonSet"] + n["pods"]["mirror"]
        assert n["empty"] == ds_only
        if ds_only and n["utilization"]["source"] == "usage":
            assert n["utilization"]["value"] == 0.0, n["name"]
            assert n["utilization"]["cpu"] == 0.0 and n["utilization"]["memory"] == 0.0
    return count


@pytest.mark.parametrize("name", sorted(SNAPSHOTS))
def test_report_invariants(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    report = run_json(capsys, "--snapshot", str(SNAPSHOTS[name]))
    moves = check_report(report)
    assert report["summary"]["podsToMove"] == moves
    if name.endswith("lowreq"):
        assert moves > 0, "the low-request snapshot must exercise moves"
    assert report["summary"]["removableEmpty"] > 0


@pytest.mark.parametrize("name", sorted(SNAPSHOTS))
def test_blocking_pods_get_their_reason(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    report = run_json(capsys, "--snapshot", str(SNAPSHOTS[name]))
    nodes = {n["name"]: n for n in report["nodes"]}
    snap = load_snapshot([SNAPSHOTS[name]])
    exhausted = [b for b in snap.pdbs if b.disruptions_allowed < 1]
    expectations: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for pod in snap.pods:
        if pod.annotations.get(ANNOTATION_SAFE_TO_EVICT) == "false" and not pod.is_daemonset and not pod.is_mirror:
            expectations[pod.node_name].append((pod.key, "NotSafeToEvictAnnotation"))
        if any(b.matches(pod) for b in exhausted) and not pod.is_daemonset:
            expectations[pod.node_name].append((pod.key, "NotEnoughPdb"))
    assert expectations, "the snapshot has blocking pods to check"
    matched = 0
    for node_name, pods in expectations.items():
        n = nodes[node_name]
        assert not n["removable"], f"{node_name} holds {pods} yet is removable"
        if n["reason"] in ELIGIBILITY_REASONS:
            continue
        assert n["reason"] == "BlockedByPod", (node_name, n["reason"])
        bp = n["blockingPod"]
        key = f"{bp['namespace']}/{bp['name']}"
        for pod_key, reason in pods:
            if key == pod_key:
                assert bp["reason"] == reason or {bp["reason"], reason} <= {"NotSafeToEvictAnnotation", "NotEnoughPdb"}
                matched += 1
    assert matched > 0, "no node was blocked by the pods we expected"


def test_bundled_snapshots_are_copies_of_shared() -> None:
    if not SHARED.is_dir():
        pytest.skip("../shared is not beside this checkout")
    for name in ("bitbrains-gke-day1", "bitbrains-gke-night"):
        for f in sorted((SHARED / name).glob("*.json")):
            assert (SNAPSHOTS[name] / f.name).read_bytes() == f.read_bytes(), f"{name}/{f.name}"


def test_schema_file_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    generated = json.loads(capsys.readouterr().out)
    on_disk = json.loads((ROOT / "scaler" / "report" / "schema.json").read_text())
    assert generated == on_disk, "run: scaler schema > scaler/report/schema.json"


def test_table_output_names_every_node(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dry-run", "--snapshot", str(SNAPSHOTS["bitbrains-gke-night-lowreq"])]) == 0
    out = capsys.readouterr().out
    snap = load_snapshot([SNAPSHOTS["bitbrains-gke-night-lowreq"]])
    for node in snap.nodes:
        assert node.name in out
    statuses = {line.split()[1] for line in out.splitlines()[1:51]}
    assert statuses == {"empty", "drain", "keep"}
    assert "nodes removable" in out and "vCPU" in out
