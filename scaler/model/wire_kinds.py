"""Every kind a snapshot may hold, by name, for the decoders (:mod:`scaler.model.decode`): the
Structs of :mod:`scaler.model.wire` and of :mod:`scaler.model.wire_dra`."""

from __future__ import annotations

from typing import Any, Union

from scaler.model.wire import (
    CONTROLLER_TYPES,
    NamespaceW,
    NodeMetricsW,
    NodeW,
    ObjectW,
    PersistentVolumeClaimW,
    PersistentVolumeW,
    PodDisruptionBudgetW,
    PodMetricsW,
    PodW,
)
from scaler.model.wire_dra import DRA_TYPES

__all__ = ["ANY_KIND", "KIND_TYPES"]

_KINDS: tuple[type[ObjectW], ...] = (
    NodeW,
    PodW,
    PodDisruptionBudgetW,
    NodeMetricsW,
    PodMetricsW,
    PersistentVolumeW,
    PersistentVolumeClaimW,
    NamespaceW,
    *CONTROLLER_TYPES,
    *DRA_TYPES,
)
KIND_TYPES: dict[str, type[ObjectW]] = {str(t.__struct_config__.tag): t for t in _KINDS}
"""Kind name -> its Struct, for every kind a snapshot may hold."""

ANY_KIND: Any = Union[_KINDS]  # noqa: UP007 (a runtime value: the decoders' type)
"""The tagged union of every kind in :data:`KIND_TYPES` (an object whose ``kind`` says which)."""
