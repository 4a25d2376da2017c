"""Health, JSON logs, metrics exposition and the status document."""

from __future__ import annotations

import json
import logging
import re

import httpx

from scaler.observability import (
    HealthServer,
    JsonFormatter,
    Metrics,
    node_status,
    status_document,
    status_yaml,
)
from scaler.planner import ScaleDownPlan
from scaler.reasons import NodeStatus, UnremovableReason


def test_healthz_turns_red_when_the_loop_stalls() -> None:
    state = {"ok": True}
    server = HealthServer("127.0.0.1:0", Metrics(), lambda: state["ok"]).start()
    try:
        url = f"http://127.0.0.1:{server.port}"
        assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
        state["ok"] = False
        assert httpx.get(f"{url}/healthz", timeout=5).status_code == 500
        assert "scaler_unneeded_nodes_count" in httpx.get(f"{url}/metrics", timeout=5).text
        assert httpx.get(f"{url}/nope", timeout=5).status_code == 404
    finally:
        server.stop()


def test_controller_health_follows_max_inactivity(tmp_path: object) -> None:
    from scaler.config import ScalerConfig
    from scaler.controller import Controller

    now = [1000.0]
    ctl = Controller.__new__(Controller)  # only the health logic is exercised
    ctl.config = ScalerConfig(max_inactivity=60)
    ctl.clock = lambda: now[0]
    ctl.last_loop_end = 1000.0
    assert ctl.healthy()
    now[0] = 1059.0
    assert ctl.healthy()
    now[0] = 1061.0
    assert not ctl.healthy()


def test_json_log_lines() -> None:
    record = logging.LogRecord("scaler.x", logging.WARNING, __file__, 1, "node %s failed", ("n1",), None)
    record.node = "n1"
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "WARNING" and line["message"] == "node n1 failed" and line["node"] == "n1"
    assert line["logger"] == "scaler.x" and line["time"].endswith("+00:00")


def test_status_document_and_yaml() -> None:
    plan = ScaleDownPlan(
        now=1_800_000_000.0, empty=(), drain=(), unneeded={"a": 1.0},
        verdicts={"a": (NodeStatus.UNREMOVABLE, UnremovableReason.NotUnneededLongEnough, "x"),
                  "b": (NodeStatus.UNREMOVABLE, UnremovableReason.NodeGroupMinSizeReached, "y")},
    )  # fmt: skip
    doc = status_document(plan, {"a": "pool-a", "b": "pool-a"}, {}, leader="r0", dry_run=True)
    assert doc["clusterWide"]["scaleDown"] == {
        "status": "CandidatesPresent", "candidates": 1, "cooldown": None, "activeBudgets": [],
        "savings": {"monthlyUsd": "unknown", "unpricedNodes": 1, "priceSource": ""},
    }  # fmt: skip
    assert doc["nodes"][0]["monthlyCostUsd"] == "unknown" and "monthlyCostUsd" not in doc["nodes"][1]
    assert doc["nodeGroups"] == [{"name": "pool-a", "scaleDown": {"status": "CandidatesPresent", "candidates": 1}}]
    text = status_yaml(doc, plan.now)
    assert "time: '2027-01-15T08:00:00Z'" in text and "lastProbeTime" in text
    assert "reason: NodeGroupMinSizeReached" in text and "mode: dry-run" in text
    m = Metrics()
    m.observe_plan(plan)
    assert b'scaler_unremovable_nodes_count{reason="NodeGroupMinSizeReached"} 1.0' in m.exposition()


def test_status_document_gives_the_monthly_cost_of_unneeded_nodes() -> None:
    plan = ScaleDownPlan(
        now=1_800_000_000.0, empty=(), drain=(), unneeded={"a": 1.0, "b": 1.0, "c": 1.0},
        verdicts={n: (NodeStatus.UNREMOVABLE, UnremovableReason.NotUnneededLongEnough, "x") for n in "abcd"},
        active_budgets=("night",),
    )  # fmt: skip
    costs = {"a": 277.4, "b": 100.0, "c": None, "d": 50.0}
    doc = status_document(plan, {}, {}, leader="r0", dry_run=False, costs=costs, price_source="bundled, 2025")
    scale_down = doc["clusterWide"]["scaleDown"]
    assert scale_down["savings"] == {"monthlyUsd": 377.4, "unpricedNodes": 1, "priceSource": "bundled, 2025"}
    assert scale_down["activeBudgets"] == ["night"]
    assert [n.get("monthlyCostUsd") for n in doc["nodes"]] == [277.4, 100.0, "unknown", None]
    assert "monthlyCostUsd: unknown" in status_yaml(doc, plan.now)
    m = Metrics()
    m.observe_plan(plan, ["night", "weekend"])
    text = m.exposition()
    assert b'scaler_scale_down_budget_active{budget="night"} 1.0' in text
    assert b'scaler_scale_down_budget_active{budget="weekend"} 0.0' in text


def test_node_status_label_and_annotation() -> None:
    label, annotation = node_status(
        NodeStatus.UNREMOVABLE, UnremovableReason.ScaleDownBudgetExhausted, "budget night", "2027-01-15T08:00:00Z"
    )
    assert label == "ScaleDownBudgetExhausted"
    assert json.loads(annotation) == {
        "status": "unremovable", "reason": "ScaleDownBudgetExhausted", "detail": "budget night",
        "since": "2027-01-15T08:00:00Z",
    }  # fmt: skip
    label, _ = node_status(NodeStatus.REMOVABLE_DRAIN, UnremovableReason.NoReason, "2 pod(s)", "x")
    assert label == "removable-drain"
    # Every label value is a valid Kubernetes label value (<= 63, alphanumerics, '-', '_', '.').
    for status in NodeStatus:
        for reason in UnremovableReason:
            value, _ = node_status(status, reason, "", "")
            assert re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", value), value
