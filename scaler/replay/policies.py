"""Policies a replay compares: built-in ones and any flag set a user names.

``--policies`` takes a comma-separated list. Each item is a built-in name or
``NAME=--flag=value;--flag2=value`` (flags of ``scaler run``, ``;``-separated; a flag without
``=value`` is ``true``). Values may contain commas (``x=--filter-plugins=TargetUsage,Mine``): an
item that is neither a built-in name nor ``NAME=--…`` continues the previous one.

Built-ins (each on top of the defaults and the replay's ``--config`` file; :data:`POLICY_HELP`
explains each as ``scaler replay --help`` and the docs do):

``ca-requests``
    cluster-autoscaler: utilization by requests, threshold 0.5, no TargetUsage
    (``--utilization-source=requests --scale-down-utilization-threshold=0.5 --filter-plugins=``).
``ca-usage`` (formerly ``seed``, still accepted)
    the published modified cluster-autoscaler (seed 004): real usage, *instantaneous*
    (aggregated over a 0-length window: the last sample only), TargetUsage 0.45/0.75
    (``--usage-window=0``).
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
    "POLICY_ALIASES",
    "POLICY_HELP",
    "PORTRAIT_PLUGINS",
    "Policy",
    "PolicyError",
    "build_policy",
    "builtin_policy",
    "make_policy",
    "parse_policies",
]

PORTRAIT_PLUGINS = ("PodFitsResourceOnPortrait", "ResourceBalanceOnPortrait")
"""The resource-portrait plugins: a policy naming either is fed workload profiles."""

BUILTIN_POLICIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "ca-requests": (
        "cluster-autoscaler: requests-based utilization, threshold 0.5, no TargetUsage",
        ("--utilization-source=requests", "--scale-down-utilization-threshold=0.5", "--filter-plugins="),
    ),
    "ca-usage": (
        "the published modified cluster-autoscaler: real usage, newest sample, TargetUsage 0.45/0.75",
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

POLICY_ALIASES = {"seed": "ca-usage"}
"""Former names of built-in policies, still accepted by ``--policies`` (reports use the name)."""

DEFAULT_POLICIES = ("ca-requests", "ca-usage", "scaler", "scaler-portrait")
"""Policies compared when ``--policies`` is not given."""

POLICY_HELP: dict[str, str] = {
    "ca-requests": "cluster-autoscaler as GKE runs it: a node is underutilized by its pods' requests "
    "(threshold 0.5), and its pods may move wherever their requests fit.",
    "ca-usage": "the published modified cluster-autoscaler (also accepted as seed): utilization from real "
    "usage, the newest sample only, and a pod moves only where the destination stays under TargetUsage "
    "(CPU 0.45, memory 0.75 of allocatable, a moved pod counting max(request, usage)).",
    "scaler": "scaler's defaults: real usage, its p95 over --scale-down-unneeded-time (10m), and TargetUsage "
    "0.45/0.75.",
    "scaler-relief": "scaler with hot-node relief, which evicts pods from busy nodes: a node above "
    "--hot-node-cpu-threshold or --hot-node-memory-threshold for --hot-node-time is soft-tainted and loses "
    "the fewest pods that bring it back under.",
    "scaler-portrait": "scaler with the resource-portrait plugins: hourly workload profiles, built from the "
    "replay's own past (--history-days), allow a move only if the destination stays under its targets in "
    "every hour of the day.",
    "none": "no scale-down: the baseline every figure is compared with (always replayed).",
}
"""What each built-in policy is, in a sentence (``scaler replay --help`` and the docs)."""

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


def make_policy(
    name: str,
    values: Mapping[str, Any],
    base: Mapping[str, Any] | None = None,
    description: str = "",
    flags: Sequence[str] = (),
    *,
    usage_window: float | None = None,
    history_days: float | None = None,
    scale_down: bool = True,
    scheduler_plugins: bool = False,
) -> Policy:
    """A policy from typed configuration ``values`` (keys as in the config file, ``-`` or ``_``;
    values as the file takes them) over ``base`` (the ``--config`` mapping), with the
    replay-only options as in :class:`Policy`; ``flags`` are shown in reports, never read.

    Raises:
        PolicyError: an unknown key or an invalid value (names both the policy and the key).
    """
    try:
        config = ScalerConfig.from_mapping({**(base or {}), **values})
    except ConfigError as e:
        raise PolicyError(f"policy {name!r}: {e}") from None
    return Policy(
        name=name,
        description=description or (" ".join(flags) if flags else "defaults"),
        flags=tuple(flags),
        config=config,
        usage_window=usage_window,
        history_days=history_days if history_days is not None else float(config.history_days),
        scale_down=scale_down,
        scheduler_plugins=scheduler_plugins,
    )


def builtin_policy(name: str, base: Mapping[str, Any] | None = None) -> Policy:
    """The built-in policy ``name`` (or its former name) over ``base``.

    Raises:
        PolicyError: an unknown name, or ``base`` rejected.
    """
    name = POLICY_ALIASES.get(name, name)
    if name not in BUILTIN_POLICIES:
        known = ", ".join(BUILTIN_POLICIES)
        raise PolicyError(f"unknown policy {name!r}: use one of {known}, or NAME=--flag=value;--flag2=value")
    description, flags = BUILTIN_POLICIES[name]
    return build_policy(name, flags, base, description)


def build_policy(
    name: str, flags: Sequence[str], base: Mapping[str, Any] | None = None, description: str = ""
) -> Policy:
    """Build a policy from ``--flag=value`` strings (a ``--policies`` item, or a built-in's) on
    top of ``base`` (flag-named keys, e.g. from ``--config``).

    Raises:
        PolicyError: a malformed flag, an unknown key or an invalid value (names both the
            policy and the flag).
    """
    where = f"policy {name!r}"
    values: dict[str, Any] = {}
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
            given = values.get("nodes", (base or {}).get("nodes", []))
            values["nodes"] = [*given, *value.split(",")] if value else []
        else:
            values[key] = value
    return make_policy(
        name,
        values,
        base,
        description,
        flags,
        usage_window=usage_window,
        history_days=history_days,
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
            if token in BUILTIN_POLICIES or token in POLICY_ALIASES or _ITEM.match(token) or not items:
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
        item = POLICY_ALIASES.get(item, item)
        if item in BUILTIN_POLICIES:
            policies.append(builtin_policy(item, base))
            continue
        m = _ITEM.match(item)
        if m is None:
            known = ", ".join(BUILTIN_POLICIES)
            raise PolicyError(
                f"unknown policy {item!r}: use one of {known}, or NAME=--flag=value;--flag2=value"
            )
        name, given = m[1], m[2]
        if name in BUILTIN_POLICIES or name in POLICY_ALIASES:
            raise PolicyError(f"policy name {name!r} is a built-in policy; choose another name")
        policies.append(build_policy(name, [f.strip() for f in given.split(";") if f.strip()], base))
    names = [p.name for p in policies]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        former = [a for a, n in POLICY_ALIASES.items() if n == dup]
        also = f" ({former[0]} is its former name)" if former else ""
        raise PolicyError(f"policy {dup!r} is listed twice{also}")
    if not policies:
        raise PolicyError("--policies: no policy given")
    for p in policies:
        if not _NAME.match(p.name):
            raise PolicyError(f"bad policy name {p.name!r}")
    return policies
