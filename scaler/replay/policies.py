"""Policies a replay compares: built-in ones and any flag set a user names.

``--policies`` takes a comma-separated list. Each item is a built-in name or
``NAME=--flag=value;--flag2=value`` (flags of ``scaler run``, ``;``-separated; a flag without
``=value`` is ``true``). Values may contain commas (``x=--filter-plugins=TargetUsage,Mine``): an
item that is neither a built-in name nor ``NAME=--…`` continues the previous one.

Built-ins (each on top of the defaults and the replay's ``--config`` file):

``ca-requests``
    cluster-autoscaler: utilization by requests, threshold 0.5, no TargetUsage
    (``--utilization-source=requests --scale-down-utilization-threshold=0.5 --filter-plugins=``).
``seed``
    seed 004: real usage, *instantaneous* (aggregated over a 0-length window: the last sample
    only), TargetUsage 0.45/0.75 (``--usage-window=0``).
``scaler``
    scaler's defaults: real usage aggregated (p95) over ``--scale-down-unneeded-time``,
    TargetUsage 0.45/0.75.
``scaler-relief``
    ``scaler`` with hot-node relief (``--hot-node-relief``): nodes above the hot-node waterlines
    for ``--hot-node-time`` are soft-tainted and lose the fewest pods that bring them back under
    (:mod:`scaler.relief`).
``scaler-portrait``
    ``scaler`` with the resource-portrait plugins (seed 001): the Filter
    ``PodFitsResourceOnPortrait`` and the Score ``ResourceBalanceOnPortrait``, fed with hourly
    workload profiles built from the replay's own past (``--history-days``, default 7).
``none``
    no scale-down at all: the baseline cost and overload of the cluster as it is.

Replay-only flags, accepted in any policy: ``--usage-window=DURATION`` (the window usage is
aggregated over; default ``--scale-down-unneeded-time``; ``0`` = the newest sample only),
``--history-days=N`` (days of past usage the workload profiles cover, when the configuration has
no such key), ``--scale-down=false`` (decide nothing, as ``none``), ``--scheduler-plugins`` (the
simulated kube-scheduler also runs the policy's Filter and Score plugins, see
:mod:`scaler.replay.world`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scaler.config import ConfigError, ScalerConfig
from scaler.errors import InputError
from scaler.model.times import parse_duration_seconds

__all__ = [
    "BUILTIN_POLICIES",
    "DEFAULT_POLICIES",
    "PORTRAIT_PLUGINS",
    "Policy",
    "PolicyError",
    "build_policy",
    "parse_policies",
]

PORTRAIT_PLUGINS = ("PodFitsResourceOnPortrait", "ResourceBalanceOnPortrait")
"""The resource-portrait plugins: a policy naming either is fed workload profiles."""

BUILTIN_POLICIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "ca-requests": (
        "cluster-autoscaler: requests-based utilization, threshold 0.5, no TargetUsage",
        ("--utilization-source=requests", "--scale-down-utilization-threshold=0.5", "--filter-plugins="),
    ),
    "seed": (
        "seed 004: real usage, instantaneous, TargetUsage 0.45/0.75",
        ("--usage-window=0", "--target-cpu-usage=0.45", "--target-memory-usage=0.75"),
    ),
    "scaler": ("scaler defaults: real usage, p95 over the unneeded window, TargetUsage 0.45/0.75", ()),
    "scaler-relief": (
        "scaler with hot-node relief: hot nodes soft-tainted and relieved of the fewest pods",
        ("--hot-node-relief",),
    ),
    "scaler-portrait": (
        "scaler with resource portraits: hourly workload profiles (fit filter + balance score)",
        (
            "--filter-plugins=TargetUsage,PodFitsResourceOnPortrait",
            "--score-plugins=ResourceBalanceOnPortrait",
        ),
    ),
    "none": ("no scale-down: the cluster as it is", ("--scale-down=false",)),
}
"""Built-in policy name → (description, flags)."""

DEFAULT_POLICIES = ("ca-requests", "seed", "scaler", "scaler-portrait")
"""Policies compared when ``--policies`` is not given."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_ITEM = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)=(--.*)$", re.S)
_DEFAULT_HISTORY_DAYS = 7.0


class PolicyError(InputError, ValueError):
    """A policy is malformed; the message names the policy and the bad flag or value."""


@dataclass(frozen=True, slots=True)
class Policy:
    """One replayed policy.

    Attributes:
        name: its name in reports.
        description: one line (built-ins) or the flags (user policies).
        flags: the flags that define it, as given.
        config: the controller's configuration.
        usage_window: seconds of usage history the evaluation aggregates; ``None`` means
            ``--scale-down-unneeded-time`` (the live controller's window).
        history_days: days of past usage in the workload profiles.
        scale_down: ``False`` for the no-scale-down baseline.
        scheduler_plugins: the simulated scheduler also runs the policy's plugins.
    """

    name: str
    description: str
    flags: tuple[str, ...]
    config: ScalerConfig
    usage_window: float | None = None
    history_days: float = _DEFAULT_HISTORY_DAYS
    scale_down: bool = True
    scheduler_plugins: bool = False

    @property
    def portrait(self) -> bool:
        """True when a resource-portrait plugin is enabled (the replay then attaches profiles)."""
        names = set(self.config.filter_plugins) | set(self.config.score_plugins)
        return any(p in names for p in PORTRAIT_PLUGINS)


def _split_flags(text: str, where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in text.split(";"):
        item = raw.strip()
        if not item:
            continue
        if not item.startswith("--") or len(item) < 3:
            raise PolicyError(f"{where}: expected --flag=value, got {item!r}")
        key, sep, value = item[2:].partition("=")
        out[key.strip()] = value if sep else "true"
    return out


def _truthy(value: str, where: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise PolicyError(f"{where}: expected true or false, got {value!r}")


def build_policy(
    name: str, flags: Sequence[str], base: Mapping[str, Any] | None = None, description: str = ""
) -> Policy:
    """Build a policy from ``--flag=value`` strings on top of ``base`` (flag-named keys, e.g.
    from ``--config``).

    Raises:
        PolicyError: a malformed flag, an unknown key or an invalid value (names both the
            policy and the flag).
    """
    where = f"policy {name!r}"
    values: dict[str, Any] = dict(base or {})
    extras = _split_flags(";".join(flags), where)
    usage_window: float | None = None
    history_days: float | None = None
    scale_down = True
    scheduler_plugins = False
    fields = set(ScalerConfig.model_fields)
    for key, value in extras.items():
        norm = key.replace("-", "_")
        if norm == "usage_window":
            try:
                usage_window = parse_duration_seconds(value)
            except ValueError:
                raise PolicyError(f"{where}: --usage-window: not a duration: {value!r}") from None
            if usage_window < 0:
                raise PolicyError(f"{where}: --usage-window must be >= 0, got {value!r}")
        elif norm == "history_days" and norm not in fields:
            try:
                history_days = float(value)
            except ValueError:
                raise PolicyError(f"{where}: --history-days: not a number: {value!r}") from None
            if not history_days > 0:
                raise PolicyError(f"{where}: --history-days must be > 0, got {value!r}")
        elif norm == "scale_down":
            scale_down = _truthy(value, f"{where}: --scale-down")
        elif norm == "scheduler_plugins":
            scheduler_plugins = _truthy(value, f"{where}: --scheduler-plugins")
        elif norm == "nodes":
            values.setdefault("nodes", [])
            values["nodes"] = [*values["nodes"], *value.split(",")] if value else []
        else:
            values[key] = value
    try:
        config = ScalerConfig.from_mapping(values)
    except ConfigError as e:
        raise PolicyError(f"{where}: {e}") from None
    days = (
        history_days
        if history_days is not None
        else float(getattr(config, "history_days", _DEFAULT_HISTORY_DAYS))
    )
    return Policy(
        name=name,
        description=description or (" ".join(flags) if flags else "defaults"),
        flags=tuple(flags),
        config=config,
        usage_window=usage_window,
        history_days=days,
        scale_down=scale_down,
        scheduler_plugins=scheduler_plugins,
    )


def _items(specs: Sequence[str]) -> list[str]:
    """Split ``--policies`` values into items, re-joining values that held commas."""
    items: list[str] = []
    for spec in specs:
        for part in spec.split(","):
            token = part.strip()
            if not token:
                continue
            if token in BUILTIN_POLICIES or _ITEM.match(token) or not items:
                items.append(token)
            else:
                items[-1] = f"{items[-1]},{token}"
    return items


def parse_policies(specs: Sequence[str], base: Mapping[str, Any] | None = None) -> list[Policy]:
    """Parse ``--policies`` values (each a comma-separated list) into policies, in order.

    Raises:
        PolicyError: an unknown built-in name, a malformed or duplicate item, or a bad flag.
    """
    policies: list[Policy] = []
    for item in _items(specs):
        if item in BUILTIN_POLICIES:
            description, flags = BUILTIN_POLICIES[item]
            policies.append(build_policy(item, flags, base, description))
            continue
        m = _ITEM.match(item)
        if m is None:
            known = ", ".join(BUILTIN_POLICIES)
            raise PolicyError(
                f"unknown policy {item!r}: use one of {known}, or NAME=--flag=value;--flag2=value"
            )
        name, given = m[1], m[2]
        if name in BUILTIN_POLICIES:
            raise PolicyError(f"policy name {name!r} is a built-in policy; choose another name")
        policies.append(build_policy(name, [f.strip() for f in given.split(";") if f.strip()], base))
    names = [p.name for p in policies]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise PolicyError(f"policy {dup!r} is listed twice")
    if not policies:
        raise PolicyError("--policies: no policy given")
    for p in policies:
        if not _NAME.match(p.name):
            raise PolicyError(f"bad policy name {p.name!r}")
    return policies
