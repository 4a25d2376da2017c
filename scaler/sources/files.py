"""Read snapshot files: ``kubectl get … -o json|yaml`` output, Lists or single objects, any mix.

Directories are read recursively (``*.json``, ``*.yaml``, ``*.yml``, in name order); other files
there are skipped. A path given explicitly is read whatever its extension: JSON first, then YAML.

JSON is decoded straight into records (:func:`scaler.model.decode.records_of_document`: one
msgspec pass, then item by item), one file at a time: a file's bytes are released before the next
one is read, and no tree of dicts is built. YAML is read with every scalar as a string (only
``null`` is resolved) and converted leniently, so that ``cpu: 0.5``, ``tier: 1`` and unquoted
timestamps mean what ``kubectl`` would send.

A snapshot must be complete and unambiguous (:func:`load_snapshot`): some Pods, each object once,
only kinds the snapshot uses, and no metrics reading stamped far ahead of the others
(:data:`METRICS_AHEAD_SECONDS`: it would become the evaluation time and make every other reading
stale). A pod bound to a node the snapshot does not hold (saved while the node was being removed,
before pod garbage collection ran) is skipped, as the live source and cluster-autoscaler's
cluster snapshot skip it, and said in one line.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import statistics
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
import yaml

from scaler.model.decode import (
    TOO_DEEP,
    Place,
    decode_document,
    document_records,
    flatten_objects,
    records_of_plain,
)
from scaler.model.gcpause import no_cycle_collector
from scaler.model.parse import ObjectError, Record
from scaler.model.records import NodeMetrics, Pod, PodMetrics
from scaler.model.revisions import RevisionCounter
from scaler.model.snapshot import ClusterSnapshot, RecordSet, SnapshotError
from scaler.model.times import format_duration, format_time

__all__ = [
    "METRICS_AHEAD_SECONDS",
    "iter_snapshot_files",
    "load_objects",
    "load_snapshot",
    "skipped_pods_line",
]

METRICS_AHEAD_SECONDS = 600.0
"""A NodeMetrics or PodMetrics reading stamped more than this (seconds) after the median of the
snapshot's NodeMetrics (PodMetrics when it has none) is refused: metrics-server stamps every
reading of one scrape within a minute or two, so such a reading is a clock or editing error."""

_SUFFIXES = (".json", ".yaml", ".yml")
_BOM = b"\xef\xbb\xbf"
_MAP_FROM = 1 << 24  # bytes: files from 16 MiB on are mapped, not read


class _StringLoader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):  # type: ignore[misc]
    """YAML with every plain scalar a string, except ``null``/``~``/empty (None)."""


_StringLoader.yaml_implicit_resolvers = {}
_StringLoader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)


def iter_snapshot_files(paths: Sequence[str | Path]) -> Iterator[Path]:
    """Yield the files to read for ``paths`` (files as given, directories expanded).

    Raises:
        SnapshotError: a path does not exist (names the path).
    """
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in _SUFFIXES)
            if not files:
                raise SnapshotError(f"{p}: directory holds no .json or .yaml files")
            yield from files
        elif p.is_file():
            yield p
        else:
            raise SnapshotError(f"{p}: no such file or directory")


def _read(path: Path) -> bytes | memoryview:
    """The file's bytes without a byte-order mark (PowerShell writes one). A large file is mapped
    rather than copied into memory: its pages are the page cache's, read once by the decoder."""
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < _MAP_FROM:
                data: bytes | memoryview = f.read()
            else:
                flags = mmap.MAP_PRIVATE | getattr(mmap, "MAP_POPULATE", 0)
                data = memoryview(mmap.mmap(f.fileno(), 0, flags=flags, prot=mmap.PROT_READ))
    except OSError as e:
        raise SnapshotError(f"{path}: cannot read: {e}") from None
    return data[3:] if data[:3] == _BOM else data


def _is_json(path: Path, data: bytes | memoryview) -> bool:
    return path.suffix.lower() == ".json" or bytes(data[:64]).lstrip()[:1] in (b"{", b"[")


def _json_error(path: Path, data: bytes) -> Any:
    """The document when the standard library accepts what msgspec refused (``NaN``, huge
    integers); otherwise raises its error with line and column."""
    try:
        return json.loads(data)
    except RecursionError:
        raise SnapshotError(f"{path}: invalid JSON: {TOO_DEEP}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        where = (
            f" at line {e.lineno} column {e.colno}: {e.msg}" if isinstance(e, json.JSONDecodeError) else ""
        )
        raise SnapshotError(f"{path}: invalid JSON{where or f': {e}'}") from None


def _yaml_documents(path: Path, data: bytes) -> list[Any]:
    try:
        return [d for d in yaml.load_all(data.decode("utf-8"), Loader=_StringLoader) if d is not None]
    except RecursionError:
        raise SnapshotError(
            f"{path}: invalid YAML: nested too deeply (deeper than the parser's recursion limit)"
        ) from None
    except UnicodeDecodeError as e:
        raise SnapshotError(f"{path}: cannot read: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise SnapshotError(f"{path}: invalid YAML{where}: {getattr(e, 'problem', e)}") from None


def _plain_documents(path: Path, view: bytes | memoryview) -> tuple[list[Any], bool]:
    """The documents of a file that is not well-formed JSON for msgspec, as plain values, and
    whether they are JSON (strict types) rather than YAML (every scalar a string)."""
    data = bytes(view)
    if path.suffix.lower() == ".json" or (_is_json(path, data) and not data.lstrip().startswith(b"{")):
        return [_json_error(path, data)], True
    if _is_json(path, data):  # YAML flow style ({kind: Node, ...}) starts like JSON
        try:
            return [json.loads(data)], True
        except RecursionError:
            raise SnapshotError(f"{path}: invalid JSON: {TOO_DEEP}") from None
        except ValueError:
            pass
    return _yaml_documents(path, data), False


def _sources(path: Path, docs: list[Any]) -> list[str]:
    return [f"{path} document {i}" for i in range(len(docs))] if len(docs) > 1 else [str(path)]


def _records(path: Path) -> Iterator[tuple[Record, Place]]:
    """The records of one file with where each object is (``pods.json item 3``)."""
    data = _read(path)
    if _is_json(path, data):
        try:
            doc = decode_document(data)
        except msgspec.DecodeError:
            pass
        else:
            del data  # the records are made from the Structs; the file's bytes can go
            yield from document_records(doc, str(path))
            return
    docs, strict = _plain_documents(path, data)
    del data
    for doc, source in zip(docs, _sources(path, docs), strict=True):
        yield from records_of_plain(doc, source, strict=strict)


def load_objects(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Every object in ``paths`` as plain dicts, each with its ``kind`` set (from its List where it
    has none), for tools and tests that need the JSON itself (to serve it from a fake API).

    Raises:
        SnapshotError: unreadable or undecodable file, or a document that is not an object
            (the message names the file).
    """
    out: list[dict[str, Any]] = []
    for path in iter_snapshot_files(paths):
        data = _read(path)
        docs: list[Any] = []
        if _is_json(path, data):
            try:
                docs = [msgspec.json.decode(data)]
            except RecursionError:
                raise SnapshotError(f"{path}: invalid JSON: {TOO_DEEP}") from None
            except msgspec.DecodeError:
                pass
        if not docs:
            docs = _plain_documents(path, data)[0]
        for doc, source in zip(docs, _sources(path, docs), strict=True):
            items = doc if isinstance(doc, list) else [doc]
            for j, item in enumerate(items):
                try:
                    for obj, kind, _ in flatten_objects(
                        item, f"{source} item {j}" if isinstance(doc, list) else source
                    ):
                        out.append({**obj, "kind": obj.get("kind") or kind} if kind else dict(obj))
                except ObjectError as e:
                    raise SnapshotError(str(e)) from None
    return out


def load_snapshot(
    paths: Sequence[str | Path], now: float | None = None, *, warn: Callable[[str], object] | None = None
) -> ClusterSnapshot:
    """Load a :class:`ClusterSnapshot` from snapshot files or directories, refusing an incomplete
    or ambiguous one.

    Pods bound to a node the snapshot does not hold are left out, as the live source and
    cluster-autoscaler's cluster snapshot leave them out (such a pod holds nothing on a node
    scaler could remove); ``warn`` receives one line saying how many and on which nodes
    (:func:`skipped_pods_line`).

    Args:
        paths: files or directories.
        now: evaluation time (Unix seconds); ``None`` takes the metrics timestamp.
        warn: called with each warning line (no trailing newline).

    The snapshot carries revision numbers of its own (a new source each load:
    :mod:`scaler.model.revisions`).

    Raises:
        SnapshotError: any bad file or object (the message names the file and the object); an
            object of a kind a snapshot does not use; the same object twice (names both places);
            no Pod at all; a pod without ``spec``.
    """
    with no_cycle_collector():  # millions of acyclic records: see scaler.model.gcpause
        records = _load_records(paths)
        named = ", ".join(map(str, paths))
        _check_complete(records, named)
        skipped = _skip_dangling_pods(records)
        if skipped and warn is not None:
            warn(skipped_pods_line(skipped))
        _check_metrics_times(records, named)
        try:
            snap = records.snapshot(now)  # inside the pause: the records go to the oldest generation
        except SnapshotError as e:
            raise SnapshotError(f"{named}: {e}") from None
    return replace(snap, revisions=RevisionCounter().stamp(snap))  # a source of one snapshot


def _load_records(paths: Sequence[str | Path]) -> RecordSet:
    records = RecordSet(places=True)
    for path in iter_snapshot_files(paths):
        try:
            for rec, place in _records(path):
                records.add(rec, place)
        except ObjectError as e:
            raise SnapshotError(f"{path}: {e}") from None
    return records


def _check_complete(records: RecordSet, named: str) -> None:
    """Refuse a snapshot without Pods."""
    if not records.by_kind.get("Pod"):
        raise SnapshotError(
            f"{named}: the snapshot has no Pod objects; every cluster runs pods (kube-system at least): "
            "include them (kubectl get pods -A -o json)"
        )


def _skip_dangling_pods(records: RecordSet) -> Counter[str]:
    """Remove from ``records`` the pods bound to a node they do not hold; returns how many were
    removed per node name."""
    pods: dict[tuple[str, str], Pod] = records.by_kind.get("Pod", {})  # type: ignore[assignment]
    nodes = records.by_kind.get("Node", {})
    dangling = [key for key, pod in pods.items() if pod.node_name and ("", pod.node_name) not in nodes]
    skipped: Counter[str] = Counter()
    for key in dangling:
        skipped[pods.pop(key).node_name] += 1
    if dangling:
        records.pod_layout = None
    return skipped


def skipped_pods_line(skipped: Counter[str]) -> str:
    """The warning for pods skipped because their node is not in the snapshot: how many, and
    on which nodes (each with its count), every name whole."""
    total = sum(skipped.values())
    where = ", ".join(f"{node} ({n})" for node, n in sorted(skipped.items()))
    pods = "pod" if total == 1 else "pods"
    nodes = "node" if len(skipped) == 1 else "nodes"
    return (
        f"skipped {total} {pods} bound to {nodes} not in the snapshot, as the live source and "
        f"cluster-autoscaler skip them: {where}"
    )


def _check_metrics_times(records: RecordSet, named: str) -> None:
    """Refuse a metrics reading stamped more than :data:`METRICS_AHEAD_SECONDS` after the median
    reading, naming it (the newest reading sets the evaluation time when ``--now`` is not given,
    and one from 2030 would make every other node's metrics stale)."""
    node_metrics: list[NodeMetrics] = records.values("NodeMetrics")
    pod_metrics: list[PodMetrics] = records.values("PodMetrics")
    reference = [m.timestamp for m in node_metrics] or [m.timestamp for m in pod_metrics]
    if not reference:
        return
    median = statistics.median_low(reference)
    readings: tuple[tuple[str, list[NodeMetrics] | list[PodMetrics]], ...] = (
        ("NodeMetrics", node_metrics),
        ("PodMetrics", pod_metrics),
    )
    for kind, items in readings:
        if not items:
            continue
        stamps = [m.timestamp for m in items]
        newest = items[stamps.index(max(stamps))]
        ahead = newest.timestamp - median
        if ahead > METRICS_AHEAD_SECONDS:
            name = newest.name if isinstance(newest, NodeMetrics) else f"{newest.namespace}/{newest.name}"
            raise SnapshotError(
                f"{named}: {kind} {name} is stamped {format_time(newest.timestamp)}, "
                f"{format_duration(ahead)} after the other metrics ({format_time(median)}): "
                "fix or drop it (it would become the evaluation time and make the other readings stale)"
            )
