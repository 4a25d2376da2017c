"""Entry points: the one loader behind both plugin registries (simulator plugins, eviction
metrics).

:func:`entry_points_of` lists a group's entry points by name, :func:`find` resolves one name and
:func:`load` imports its target; each failure is an :class:`EntryPointError` whose message names
the plugin, which each registry re-raises as its own error type
(:class:`scaler.simulator.registry.PluginError`,
:class:`scaler.eviction.metrics.EvictionConfigError`).

``importlib.metadata.entry_points`` reads the metadata of every installed distribution on each
call: milliseconds, paid by every evaluation that resolves its plugins (once per controller
loop, once per step of a replay). Nothing is installed into a running process, so a scan is
kept until ``sys.path`` changes (a test that puts a new distribution on the path, or an
interpreter that adds a site directory, scans again).
"""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint, entry_points

from scaler.errors import InputError

__all__ = ["DuplicateEntryPoint", "EntryPointError", "entry_points_of", "find", "load", "scan"]

_CACHE: dict[str, tuple[tuple[str, ...], dict[str, EntryPoint]]] = {}


class DuplicateEntryPoint(InputError, ValueError):
    """One name is registered twice in a group with different targets.

    Attributes:
        name: the entry-point name.
        first: the first target (``module:attr``).
        second: the other target.
    """

    def __init__(self, name: str, first: str, second: str) -> None:
        super().__init__(f"{name!r} is registered twice, as {first!r} and {second!r}")
        self.name, self.first, self.second = name, first, second


def scan(group: str) -> dict[str, EntryPoint]:
    """Entry points of ``group`` by name (not loaded), from a cache kept while ``sys.path``
    stays the same. The caller must not modify the returned mapping.

    Raises:
        DuplicateEntryPoint: two distributions register one name with different targets.
    """
    key = tuple(sys.path)
    hit = _CACHE.get(group)
    if hit is not None and hit[0] == key:
        return hit[1]
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=group):
        prev = found.get(ep.name)
        if prev is not None and prev.value != ep.value:
            raise DuplicateEntryPoint(ep.name, prev.value, ep.value)
        found[ep.name] = ep
    _CACHE[group] = (key, found)
    return found


class EntryPointError(InputError, ValueError):
    """An entry point is unknown, registered twice, or cannot be imported; the message names it
    and what it was meant to be (e.g. ``"filter plugin 'X'"``)."""


def entry_points_of(group: str, what: str) -> dict[str, EntryPoint]:
    """:func:`scan` of ``group``, with a duplicate turned into an :class:`EntryPointError`
    (``what``: the kind of plugin, for the message, e.g. ``"plugin"``).

    Raises:
        EntryPointError: two distributions register one name with different targets.
    """
    try:
        return scan(group)
    except DuplicateEntryPoint as e:
        raise EntryPointError(f"{what} {e}; uninstall one of the distributions") from e


def find(group: str, name: str, what: str) -> EntryPoint:
    """The entry point ``name`` of ``group``.

    Raises:
        EntryPointError: ``name`` is not registered (the message lists the registered names),
            or a name is registered twice.
    """
    eps = entry_points_of(group, what)
    ep = eps.get(name)
    if ep is None:
        available = ", ".join(sorted(eps)) or "none"
        raise EntryPointError(f"unknown {what} {name!r}; available: {available}")
    return ep


def load(ep: EntryPoint, what: str) -> object:
    """Import the object ``ep`` names.

    Raises:
        EntryPointError: the import fails (any exception of the plugin's module).
    """
    try:
        return ep.load()
    except Exception as e:
        raise EntryPointError(f"cannot load {what} {ep.name!r} ({ep.value!r}): {e}") from e
