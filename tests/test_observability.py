"""Health, JSON logs, metrics exposition and the status document."""

from __future__ import annotations

import json
import logging

import httpx

from scaler.observability import HealthServer, JsonFormatter, Metrics, status_document, status_yaml
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
    assert doc["clusterWide"]["scaleDown"] == {"status": "CandidatesPresent", "candidates": 1, "cooldown": None}
    assert doc["nodeGroups"] == [{"name": "pool-a", "scaleDown": {"status": "CandidatesPresent", "candidates": 1}}]
    text = status_yaml(doc, plan.now)
    assert "time: '2027-01-15T08:00:00Z'" in text and "lastProbeTime" in text
    assert "reason: NodeGroupMinSizeReached" in text and "mode: dry-run" in text
    m = Metrics()
    m.observe_plan(plan)
    assert b'scaler_unremovable_nodes_count{reason="NodeGroupMinSizeReached"} 1.0' in m.exposition()
