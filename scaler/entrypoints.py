"""Entry-point scans shared by the plugin registries (simulator plugins, eviction metrics).

``importlib.metadata.entry_points`` reads the metadata of every installed distribution on each
call: milliseconds, paid by every evaluation that resolves its plugins (once per controller
loop, once per step of a replay). Nothing is installed into a running process, so a scan is
kept until ``sys.path`` changes (a test that puts a new distribution on the path, or an
interpreter that adds a site directory, scans again).
"""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint, entry_points

__all__ = ["DuplicateEntryPoint", "scan"]

_CACHE: dict[str, tuple[tuple[str, ...], dict[str, EntryPoint]]] = {}


class DuplicateEntryPoint(ValueError):
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
