"""The status ConfigMap of ``scaler run`` and every node's verdict label and annotation.

The ConfigMap holds YAML shaped like CA's ``cluster-autoscaler-status``
(``clusterstate/utils/status.go``) plus every node's verdict.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

import yaml

from scaler.observability.plan import PlanView
from scaler.reasons import NodeStatus, UnremovableReason

__all__ = ["node_status", "status_document", "status_label", "status_yaml"]


def status_label(status: NodeStatus, reason: UnremovableReason) -> str:
    """A node's ``scaler.io/scale-down-status`` label: the reason it stays, or
    ``removable-empty`` / ``removable-drain`` (a valid label value: at most 63 letters, digits
    and dashes). It alone tells whether the node's annotation must change."""
    return reason.value if status is NodeStatus.UNREMOVABLE else status.value


def node_status(status: NodeStatus, reason: UnremovableReason, detail: str, since: str) -> tuple[str, str]:
    """A node's verdict as its ``scaler.io/scale-down-status`` label (:func:`status_label`) and
    annotation: compact JSON ``{"status", "reason", "detail", "since"}``, ``since`` (RFC 3339)
    being when this status and reason began."""
    doc = {"status": status.value, "reason": reason.value, "detail": detail, "since": since}
    return status_label(status, reason), json.dumps(doc, separators=(",", ":"))


def _usd(v: float | None) -> float | str:
    return "unknown" if v is None else round(v, 2)


def _savings(plan: PlanView, costs: Mapping[str, float | None], price_source: str) -> dict[str, Any]:
    """``clusterWide.scaleDown.savings``: the unneeded nodes' monthly cost, how many are unpriced."""
    unneeded_costs = [costs.get(n) for n in plan.unneeded]
    known = [c for c in unneeded_costs if c is not None]
    return {
        "monthlyUsd": _usd(sum(known) if known or not unneeded_costs else None),
        "unpricedNodes": len(unneeded_costs) - len(known),
        "priceSource": price_source,
    }


def _node_entries(plan: PlanView, costs: Mapping[str, float | None]) -> list[dict[str, Any]]:
    """``nodes``: every node's status, reason and detail by name; an unneeded one's monthly cost."""
    nodes = []
    for name, (status, reason, detail) in sorted(plan.verdicts.items()):
        entry: dict[str, Any] = {
            "name": name,
            "status": status.value,
            "reason": reason.value,
            "detail": detail,
        }
        if name in plan.unneeded:
            entry["monthlyCostUsd"] = _usd(costs.get(name))
        nodes.append(entry)
    return nodes


def status_document(
    plan: PlanView,
    groups: Mapping[str, Any],
    in_flight: Mapping[str, str],
    *,
    leader: str,
    dry_run: bool,
    costs: Mapping[str, float | None] | None = None,
    price_source: str = "",
    metrics_api: Mapping[str, str] | None = None,
    relief: Mapping[str, Any] | None = None,
    rollbacks: Mapping[str, str] | None = None,
    history: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The status ConfigMap's content without its timestamps: CA's layout
    (``clusterWide.scaleDown``, ``nodeGroups[].scaleDown``) plus ``nodes`` (every node's status
    and reason), ``deletionsInProgress`` and ``metricsAPI`` (``status: Available``, or
    ``Unavailable`` with ``since`` and ``message``). ``groups`` maps node name → node group.

    With ``costs`` (node → USD per month, ``None`` when unknown) the unneeded nodes' entries get
    ``monthlyCostUsd`` and ``clusterWide.scaleDown.savings`` sums them (``monthlyUsd``, the
    number of ``unpricedNodes``, whose cost says ``unknown``, and the ``priceSource``).

    With ``relief`` (``--hot-node-relief``) the document has ``hotNodeRelief``: that mapping
    (the controller's hot nodes, since when, which carry the ``scaler.io/hot`` taint and which
    are being relieved).

    With ``rollbacks`` (node → the last error of its rollback) the document has
    ``rollbacksPending``: the nodes whose removal failed and are still tainted or cordoned
    because undoing it failed so far (it is retried).

    With ``history`` (``--history prometheus``) the document has ``history``: per background
    cache (``profiles``, ``gpuUsage``) its status (``NotLoaded``, ``Loaded``, ``Failing``,
    ``Stale``), ``loadedAt``, ``consecutiveFailures`` and its last failure (``lastError``,
    ``lastErrorAt``)."""
    costs = costs or {}
    per_group: Counter[str] = Counter()
    for name in plan.unneeded:
        per_group[str(groups.get(name, ""))] += 1
    doc: dict[str, Any] = {
        "autoscalerStatus": "Running",
        "mode": "dry-run" if dry_run else "active",
        "leader": leader,
        "metricsAPI": dict(metrics_api or {"status": "Available"}),
        "clusterWide": {
            "scaleDown": {
                "status": "CandidatesPresent" if plan.unneeded else "NoCandidates",
                "candidates": len(plan.unneeded),
                "cooldown": plan.cooldown or None,
                "activeBudgets": list(plan.active_budgets),
                "savings": _savings(plan, costs, price_source),
            }
        },
        "nodeGroups": [
            {
                "name": g,
                "scaleDown": {"status": "CandidatesPresent" if n else "NoCandidates", "candidates": n},
            }
            for g, n in sorted(per_group.items())
            if g
        ],
        "deletionsInProgress": sorted(in_flight),
        "nodes": _node_entries(plan, costs),
    }
    if relief is not None:
        doc["hotNodeRelief"] = dict(relief)
    if history is not None:
        doc["history"] = dict(history)
    if rollbacks:
        doc["rollbacksPending"] = [{"name": n, "error": e} for n, e in sorted(rollbacks.items())]
    return doc


def status_yaml(document: Mapping[str, Any], now: float) -> str:
    """The ``status`` key of the status ConfigMap: ``document`` with ``time`` (and CA's
    ``clusterWide.scaleDown.lastProbeTime``) set to ``now`` (Unix seconds)."""
    stamp = dt.datetime.fromtimestamp(now, dt.UTC).isoformat().replace("+00:00", "Z")
    doc = {"time": stamp, **document}
    cluster = dict(doc.get("clusterWide") or {})
    cluster["scaleDown"] = {**(cluster.get("scaleDown") or {}), "lastProbeTime": stamp}
    doc["clusterWide"] = cluster
    return yaml.safe_dump(doc, sort_keys=False)
