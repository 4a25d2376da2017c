"""The configuration's compact specs and their models: ``--nodes=MIN:MAX:NAME``
(:class:`NodeGroupSpec`) and the scheduled disruption budgets (``budgets``,
``--scale-down-budget``: :class:`ScaleDownBudget`), with :class:`ConfigError`, the error of bad
configuration. :mod:`scaler.config` builds :class:`~scaler.config.ScalerConfig` on them and
re-exports every name.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from scaler.errors import InputError
from scaler.model.times import format_duration, parse_duration_seconds

__all__ = [
    "ConfigError",
    "DisruptionReasonName",
    "NodeGroupSpec",
    "ScaleDownBudget",
    "parse_budget_spec",
    "parse_node_group_spec",
    "prometheus_url_problem",
    "redact_url",
]


class ConfigError(InputError, ValueError):
    """Bad configuration (file or flag); the message names the key and the bad value."""


class NodeGroupSpec(BaseModel):
    """``--nodes=MIN:MAX:NAME``: size limits, in nodes, of each zone of node pool ``NAME``, or of
    the managed instance group ``NAME`` (:class:`scaler.limits.GroupLimits`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_size: int = Field(ge=0)
    max_size: int = Field(ge=0)
    name: str = Field(min_length=1)


def parse_node_group_spec(value: str) -> NodeGroupSpec:
    """Parse ``MIN:MAX:NAME`` (``NAME`` may be a node-pool name or a MIG URL ending in it).

    Raises:
        ConfigError: malformed spec, negative sizes, or min > max (message names the value).
    """
    m = re.fullmatch(r"(\d+):(\d+):(.+)", value.strip())
    if not m:
        raise ConfigError(f"--nodes: expected MIN:MAX:NAME, got {value!r}")
    lo, hi, name = int(m[1]), int(m[2]), m[3].rstrip("/").rsplit("/", 1)[-1]
    if not name:  # "1:3:/" would otherwise escape as a pydantic ValidationError
        raise ConfigError(f"--nodes: empty node group name in {value!r}")
    if lo > hi:
        raise ConfigError(f"--nodes: min {lo} is greater than max {hi} in {value!r}")
    return NodeGroupSpec(min_size=lo, max_size=hi, name=name)


DisruptionReasonName = Literal["empty", "underutilized", "unready", "relief"]
"""Why a node is disrupted: removed, as CA's ``scaled_down_nodes_total{reason}`` says it (an empty
node, a drained underutilized Ready one, or a drained NotReady one:
:func:`scaler.budgets.disruption_reason`), or relieved of some pods because it is hot
(``relief``, hot-node relief)."""

_CRON_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_BUDGET_NODES = re.compile(r"(100|[0-9]{1,2})%|[0-9]+")


class ScaleDownBudget(BaseModel):
    """One scheduled disruption budget (``budgets`` / ``--scale-down-budget``).

    Karpenter's ``NodePool.spec.disruption.budgets[]`` (``pkg/apis/v1/nodepool.go``: ``nodes``,
    ``schedule``, ``duration``, ``reasons``) plus scaler's ``timeZone`` (IANA name; Karpenter's
    schedules are UTC only, kubernetes-sigs/karpenter#3074), ``nodePools`` (the pools it applies
    to, each on its own; empty: every pool) and ``name`` (named in ``ScaleDownBudgetExhausted``).

    Attributes:
        name: the budget's name; ``budget-N`` (1-based position) when not given.
        nodes: ``"N"`` nodes or ``"P%"`` of the pool's nodes (0-100, rounded up).
        schedule: 5-field cron expression (or ``@daily`` and the other macros) in ``time_zone``
            at which a window starts; ``None``: always active.
        duration: window length in seconds (elapsed time), set exactly when ``schedule`` is.
        time_zone: IANA time zone of ``schedule`` (default ``UTC``).
        reasons: disruption reasons it limits (``empty``, ``underutilized``, ``unready``,
            ``relief``); empty: all.
        node_pools: node pools it limits; empty: all.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str = ""
    nodes: str
    schedule: str | None = None
    duration: float | None = Field(None, gt=0)
    time_zone: str = Field("UTC", alias="timeZone")
    reasons: tuple[DisruptionReasonName, ...] = ()
    node_pools: tuple[str, ...] = Field((), alias="nodePools")

    @field_validator("nodes", mode="before")
    @classmethod
    def _nodes(cls, v: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError(f"nodes must be a count or a percentage like 10%, got {v!r}")
        text = str(v).strip()
        if not _BUDGET_NODES.fullmatch(text):
            raise ValueError(f"nodes must be a count or a percentage 0-100% like 10%, got {v!r}")
        return text

    @field_validator("schedule", mode="before")
    @classmethod
    def _schedule(cls, v: Any) -> Any:
        if v is None:
            return None
        text = " ".join(str(v).split())
        text = _CRON_MACROS.get(text.lower(), text)
        if len(text.split()) != 5:
            raise ValueError(f"schedule must be a 5-field cron expression, got {v!r}")
        try:
            CronSim(text, dt.datetime(2026, 1, 1))
        except CronSimError as e:
            raise ValueError(f"invalid cron schedule {v!r}: {e}") from None
        return text

    @field_validator("duration", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        if isinstance(v, str):
            return parse_duration_seconds(v)
        return v

    @field_validator("time_zone", mode="before")
    @classmethod
    def _zone(cls, v: Any) -> Any:
        try:
            ZoneInfo(str(v))
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown IANA time zone {v!r}") from None
        return str(v)

    @field_validator("reasons", "node_pools", mode="before")
    @classmethod
    def _list(cls, v: Any, info: ValidationInfo) -> Any:
        if isinstance(v, str):
            v = [x.strip() for x in v.split(",") if x.strip()]
        if info.field_name == "reasons" and isinstance(v, (list, tuple)):
            v = [str(x).strip().lower() for x in v]  # Karpenter spells them Empty, Underutilized
        return v

    @model_validator(mode="after")
    def _window(self) -> ScaleDownBudget:
        # Karpenter: "'schedule' must be set with 'duration'".
        if (self.schedule is None) != (self.duration is None):
            raise ValueError("schedule and duration must be given together")
        return self

    def describe(self) -> str:
        """One line: ``nodes 0, 0 9 * * 1-5 for 9h0m0s Europe/Amsterdam, underutilized, pools web``."""
        parts = [f"nodes {self.nodes}"]
        if self.schedule is not None and self.duration is not None:
            parts.append(f"{self.schedule} for {format_duration(self.duration)} {self.time_zone}")
        if self.reasons:
            parts.append("reasons " + ",".join(self.reasons))
        if self.node_pools:
            parts.append("pools " + ",".join(self.node_pools))
        return ", ".join(parts)


_BUDGET_KEYS = {
    "name": "name",
    "nodes": "nodes",
    "schedule": "schedule",
    "duration": "duration",
    "timezone": "timeZone",
    "time-zone": "timeZone",
    "reasons": "reasons",
    "nodepools": "nodePools",
    "node-pools": "nodePools",
}


def parse_budget_spec(value: str) -> dict[str, Any]:
    """Parse ``--scale-down-budget``'s compact form into the mapping of a ``budgets`` entry.

    ``NODES[;key=value...]``: fields separated by ``;`` (cron uses spaces, commas, slashes and
    dashes, never semicolons), the first may be the bare ``nodes``; keys are the YAML names
    (``nodes``, ``schedule``, ``duration``, ``timeZone``, ``reasons``, ``nodePools``, ``name``;
    case does not matter); lists are comma-separated. Example:
    ``0;schedule=0 9 * * 1-5;duration=9h;timeZone=Europe/Amsterdam;reasons=underutilized``.

    Raises:
        ConfigError: an unknown or repeated key, or a field without ``=`` (names the value).
    """
    out: dict[str, Any] = {}
    for i, field in enumerate(f.strip() for f in value.split(";")):
        if not field:
            continue
        key, eq, text = field.partition("=")
        if not eq:
            if i == 0:
                key, text = "nodes", field
            else:
                raise ConfigError(f"--scale-down-budget: expected key=value, got {field!r} in {value!r}")
        name = _BUDGET_KEYS.get(key.strip().lower())
        if name is None:
            raise ConfigError(f"--scale-down-budget: unknown key {key.strip()!r} in {value!r}")
        if name in out:
            raise ConfigError(f"--scale-down-budget: {name} given twice in {value!r}")
        out[name] = text.strip()
    if "nodes" not in out:
        raise ConfigError(f"--scale-down-budget: no nodes in {value!r}")
    return out


def redact_url(url: str) -> str:
    """``url`` fit to print or store: a user name or password (``http://user:pass@host``) becomes
    ``***@``, a query string ``?***`` and a fragment ``#***``; anything that does not parse as a
    URL is replaced whole by ``<unparsable URL>``. Scheme, host, port and path stay."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<unparsable URL>"
    if not parts.netloc and "@" in url:  # no scheme: "user:pass@host:9090" parses as a path
        return "***@" + url.rpartition("@")[2].split("?")[0].split("#")[0]
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    elif host and port is not None and not netloc:
        netloc = f"{host}:{port}"
    return urlunsplit(
        (parts.scheme, netloc, parts.path, "***" if parts.query else "", "***" if parts.fragment else "")
    )


def prometheus_url_problem(url: str) -> str:
    """Why ``url`` cannot be ``--prometheus-url`` (``""`` when it can): it must be ``http://`` or
    ``https://`` with a host, and carry no credentials: a user name or password in the URL, a
    query string or a fragment would be printed in errors and logs and stored in exports and
    the replay's cache, so they are refused and the message points to
    ``--prometheus-auth-file``. The message shows the URL redacted (:func:`redact_url`)."""
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError:
        return f"--prometheus-url {shown}: not a URL"
    if parts.scheme not in ("http", "https") or not host:
        return f"--prometheus-url must be http://HOST[:PORT][/PATH] or https://…, got {shown}"
    if "@" in parts.netloc:
        return (
            f"--prometheus-url {shown}: credentials in the URL are refused (they would be printed and "
            "stored); put them in --prometheus-auth-file (one 'Authorization: Basic …' line, or a bearer token)"
        )
    if parts.query or parts.fragment:
        return (
            f"--prometheus-url {shown}: a query string or fragment is refused (it may hold a token, and the "
            "URL is the base the API paths are added to); put a token in --prometheus-auth-file"
        )
    return ""
