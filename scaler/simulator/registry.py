"""Plugin registry: the built-in filters plus plugins found through entry points.

The simulator always runs :data:`BUILTIN_FILTERS` (kube-scheduler's default feasibility
checks, the ones cluster-autoscaler's simulation runs, reference §4c), then the filters named
in ``config.filter_plugins`` (default: ``TargetUsage``, seed 004), and scores feasible nodes
with the plugins named in ``config.score_plugins`` (default: none, i.e. CA's first fit).

Named plugins are found by entry point, group ``scaler.plugins``: any installed distribution
can add one, e.g. in its ``pyproject.toml``::

    [project.entry-points."scaler.plugins"]
    MyFilter = "my_package.filters:MyFilter"

An entry point must name a class that is built as ``cls(config)`` and whose instances satisfy
:class:`~scaler.simulator.state.FilterPlugin` (``name`` and ``filter``) or
:class:`~scaler.simulator.state.ScorePlugin` (``name`` and ``score``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint

from scaler.config import ScalerConfig
from scaler.entrypoints import EntryPointError, entry_points_of, find, load
from scaler.errors import InputError
from scaler.simulator.dynamic_resources import DynamicResources
from scaler.simulator.filters import (
    BaseFilter,
    InterPodAffinity,
    NodeAffinity,
    NodePorts,
    NodeResourcesFit,
    NodeUnschedulable,
    PodTopologySpread,
    TaintToleration,
    VolumeZone,
)
from scaler.simulator.state import FilterPlugin, ScorePlugin

__all__ = [
    "BUILTIN_FILTERS",
    "ENTRY_POINT_GROUP",
    "POD_SCANNING_FILTERS",
    "PluginError",
    "Plugins",
    "discover",
    "load_filters",
    "load_scorers",
    "resolve_plugins",
]

ENTRY_POINT_GROUP = "scaler.plugins"
"""The entry-point group plugins register under."""

BUILTIN_FILTERS: tuple[type[BaseFilter], ...] = (
    NodeUnschedulable,
    NodeResourcesFit,
    TaintToleration,
    NodeAffinity,
    NodePorts,
    VolumeZone,
    DynamicResources,
    InterPodAffinity,
    PodTopologySpread,
)
"""The always-on filters, cheapest first so that most nodes are rejected early: flag and
arithmetic checks, then label matching, then PV lookups, then resource claims (free for a pod
without any), then the checks that scan other pods."""


class PluginError(InputError, ValueError):
    """A plugin name is unknown, ambiguous, cannot be loaded or built, or the object does not
    satisfy the plugin protocol. The message names the plugin."""


def _load(ep: EntryPoint) -> type:
    """Import the class an entry point names.

    Raises:
        PluginError: the import fails or the target is not a class.
    """
    try:
        obj = load(ep, "plugin")
    except EntryPointError as e:
        raise PluginError(str(e)) from e
    if not isinstance(obj, type):
        raise PluginError(f"plugin {ep.name!r} ({ep.value!r}) is not a class")
    return obj


def _entry_points() -> dict[str, EntryPoint]:
    try:
        return entry_points_of(ENTRY_POINT_GROUP, "plugin")
    except EntryPointError as e:
        raise PluginError(str(e)) from e


def discover() -> dict[str, type]:
    """Load every plugin class registered under ``scaler.plugins``, by entry-point name.

    Raises:
        PluginError: a registered plugin cannot be imported, is not a class, or a name is
            registered twice with different targets.
    """
    return {name: _load(ep) for name, ep in sorted(_entry_points().items())}


def _build(name: str, config: ScalerConfig, kind: str) -> object:
    """Resolve ``name`` by entry point and build it with ``config``.

    Raises:
        PluginError: unknown name (the message lists the available ones), or a load or
            construction failure.
    """
    try:
        ep = find(ENTRY_POINT_GROUP, name, f"{kind} plugin")
    except EntryPointError as e:
        raise PluginError(str(e)) from e
    cls = _load(ep)
    try:
        return cls(config)
    except Exception as e:
        raise PluginError(f"cannot create {kind} plugin {name!r} ({ep.value!r}): {e}") from e


# Built-in filters that scan other pods (cost grows with the cluster): they run last, after the
# configured plugins (TargetUsage is cheap and refuses many nodes).
POD_SCANNING_FILTERS = frozenset({"InterPodAffinity", "PodTopologySpread"})


def load_filters(config: ScalerConfig) -> list[FilterPlugin]:
    """The filters the simulator runs, in order: :data:`BUILTIN_FILTERS` except the
    pod-scanning ones (:data:`POD_SCANNING_FILTERS`), then each name in
    ``config.filter_plugins`` resolved by entry point, then the pod-scanning built-ins. Names
    of built-in filters and repeated names are skipped (each filter runs once).

    Raises:
        PluginError: a name is unknown (the message lists the available plugins), the plugin
            cannot be loaded or built, or it is not a filter plugin (no ``name`` str or no
            ``filter`` method).
    """
    cheap = [cls for cls in BUILTIN_FILTERS if cls.name not in POD_SCANNING_FILTERS]
    scanning = [cls for cls in BUILTIN_FILTERS if cls.name in POD_SCANNING_FILTERS]
    builtin_names = {cls.name for cls in BUILTIN_FILTERS}
    named = _load_named(config.filter_plugins, config, "filter", FilterPlugin, builtin_names)
    filters: list[FilterPlugin] = [cls(config) for cls in cheap]
    filters.extend(p for p in named if isinstance(p, FilterPlugin))
    return filters + [cls(config) for cls in scanning]


def load_scorers(config: ScalerConfig) -> list[ScorePlugin]:
    """The score plugins named in ``config.score_plugins``, in order, each once.

    Raises:
        PluginError: a name is unknown (the message lists the available plugins), the plugin
            cannot be loaded or built, or it is not a score plugin (no ``name`` str or no
            ``score`` method).
    """
    return [
        p
        for p in _load_named(config.score_plugins, config, "score", ScorePlugin)
        if isinstance(p, ScorePlugin)
    ]


@dataclass(frozen=True, slots=True)
class Plugins:
    """The simulation's plugins resolved from the configuration's names once
    (:func:`resolve_plugins`): their classes, of which :meth:`build` makes a fresh set of
    instances, one per evaluation (what :func:`load_filters` and :func:`load_scorers` give), so
    a plugin keeps no state from one evaluation to the next."""

    config: ScalerConfig
    filter_classes: tuple[Callable[[ScalerConfig], FilterPlugin], ...]
    score_classes: tuple[Callable[[ScalerConfig], ScorePlugin], ...]

    def build(self) -> tuple[list[FilterPlugin], list[ScorePlugin]]:
        """Fresh filter and score plugin instances, in the resolved order."""
        return [c(self.config) for c in self.filter_classes], [c(self.config) for c in self.score_classes]


def resolve_plugins(config: ScalerConfig) -> Plugins:
    """Resolve ``config.filter_plugins`` and ``config.score_plugins`` to classes once, building
    each once to check it (``scaler run`` does this at start, so that a bad name stops it there
    instead of failing every loop).

    Raises:
        PluginError: as :func:`load_filters` and :func:`load_scorers`.
    """
    filters, scorers = load_filters(config), load_scorers(config)
    return Plugins(config, tuple(type(f) for f in filters), tuple(type(s) for s in scorers))


def _load_named(
    names: tuple[str, ...], config: ScalerConfig, role: str, protocol: type, skip: set[str] | None = None
) -> list[object]:
    """Build the plugins ``names`` (each once, ``skip`` excluded) and check each satisfies
    ``protocol`` (a runtime-checkable Protocol with a ``name`` and a ``role`` method).

    Raises:
        PluginError: unknown, unloadable, or not a ``role`` plugin.
    """
    seen = set(skip or ())
    out: list[object] = []
    for name in names:
        if name in seen:
            continue
        seen.add(name)
        plugin = _build(name, config, role)
        if not isinstance(plugin, protocol) or not isinstance(getattr(plugin, "name", None), str):
            raise PluginError(
                f"plugin {name!r} is not a {role} plugin: it needs a 'name' string and a "
                f"'{role}(pod, node, state)' method"
            )
        out.append(plugin)
    return out
