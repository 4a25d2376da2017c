"""What every parser of API objects shares: the error of a malformed object, how messages name
an object, and the timestamp and resource-list parsers. :mod:`scaler.model.parse` re-exports
them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NoReturn

from scaler.errors import InputError
from scaler.model import wire
from scaler.model.quantity import (
    QuantityError,
    parse_bytes,
    parse_count,
    parse_millicores,
)
from scaler.model.records import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerRef,
    Resources,
)
from scaler.model.times import rfc3339_seconds

__all__ = ["ObjectError", "describe", "ident", "parse_resources", "parse_time"]


class ObjectError(InputError, ValueError):
    """An API object is malformed; the message names the object and the bad field or value."""


def ident(kind: str, namespace: str, name: str) -> str:
    """How messages name an object: ``Pod shop/web-0``, ``Node n1``, ``Pod 7/<unnamed>``."""
    return f"{kind or 'object'} {f'{namespace}/' if namespace else ''}{name or '<unnamed>'}"


def describe(w: wire.ObjectW) -> str:
    """:func:`ident` of a decoded object."""
    m = w.metadata
    return ident(str(type(w).__struct_config__.tag), m.namespace, m.name)


# -- times and durations ---------------------------------------------------------------------------


def parse_time(value: str, field: str = "timestamp", where: str = "object") -> float:
    """Parse an RFC 3339 timestamp (``2026-11-04T14:00:00Z``) into Unix seconds (a time without a
    zone is UTC).

    Raises:
        ObjectError: not a valid RFC 3339 time (message names ``where``, the field and the value).
    """
    try:
        return rfc3339_seconds(value)
    except (ValueError, TypeError, AttributeError):
        raise ObjectError(f"{where}: field {field!r} is not a timestamp: {value!r}") from None


# -- pieces ----------------------------------------------------------------------------------------


def parse_resources(raw: Mapping[str, wire.Quantity], where: str, field: str) -> Resources:
    """Parse a ``ResourceList`` (``{"cpu": "250m", "memory": "1Gi", ...}``) into
    :class:`Resources`. ``pods`` is parsed as a count, ``storage`` skipped; other names go to
    ``extended``.

    Raises:
        ObjectError: a malformed quantity (message names ``where``, the field and the value).
    """
    cpu = mem = eph = pods = 0
    ext: dict[str, int] = {}
    try:
        for name, value in raw.items():
            if name == "cpu":
                cpu = parse_millicores(value)
            elif name == "memory":
                mem = parse_bytes(value)
            elif name == "ephemeral-storage":
                eph = parse_bytes(value)
            elif name == "pods":
                pods = parse_count(value)
            elif name != "storage":
                ext[name] = parse_count(value)
    except QuantityError as e:
        raise ObjectError(f"{where}: {field}: {e}") from None
    return Resources(cpu, mem, eph, pods, ext)


def _label_selector(w: wire.LabelSelectorW | None) -> LabelSelector | None:
    if w is None:
        return None
    exprs = tuple(
        LabelSelectorRequirement(e.key, e.operator, tuple(e.values or ())) for e in w.match_expressions or ()
    )
    return LabelSelector(w.match_labels or {}, exprs)


def _node_selector(w: wire.NodeSelectorW | None) -> tuple[NodeSelectorTerm, ...] | None:
    """A required node selector's terms; ``None`` when there is none (or it lists no terms)."""
    if w is None or w.node_selector_terms is None:
        return None

    def reqs(rs: list[wire.NodeSelectorRequirementW] | None) -> tuple[NodeSelectorRequirement, ...]:
        return tuple(NodeSelectorRequirement(r.key, r.operator, tuple(r.values or ())) for r in rs or ())

    return tuple(
        NodeSelectorTerm(reqs(t.match_expressions), reqs(t.match_fields)) for t in w.node_selector_terms
    )


def _controller_ref(meta: wire.MetaW) -> OwnerRef | None:
    for o in meta.owner_references or ():
        if o.controller:
            return OwnerRef(o.kind, o.name, o.uid, o.api_version)
    return None


def _missing(w: wire.ObjectW, field: str) -> NoReturn:
    raise ObjectError(f"{describe(w)}: missing required field {field!r}")


def _time(value: str | None, field: str, w: wire.ObjectW) -> float | None:
    """Unix seconds of an optional timestamp of ``w`` (``None`` when absent)."""
    if not value:
        return None
    try:
        return rfc3339_seconds(value)
    except (ValueError, TypeError):
        raise ObjectError(f"{describe(w)}: field {field!r} is not a timestamp: {value!r}") from None
