"""Read snapshot files: ``kubectl get … -o json|yaml`` output, Lists or single objects, any mix.

Directories are read recursively (``*.json``, ``*.yaml``, ``*.yml``, in name order); other files
there are skipped. A path given explicitly is read whatever its extension: JSON first, then YAML.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import yaml

from scaler.model.gcpause import no_cycle_collector
from scaler.model.snapshot import _ITEM_KIND, ClusterSnapshot, SnapshotError, build_snapshot, flatten_objects

__all__ = ["iter_snapshot_files", "load_objects", "load_snapshot"]

_SUFFIXES = (".json", ".yaml", ".yml")
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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


def _json_loads(text: str) -> Any:
    """Decode JSON with orjson (several times faster than the standard library); on any error,
    decode again with :func:`json.loads`, which accepts what the standard library accepts
    (``NaN``, huge integers, lone surrogates) and raises its usual, precise errors."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _decode(path: Path) -> list[Any]:
    fast = _decode_json_bytes(path)
    if fast is not None:
        return fast
    try:
        text = path.read_text(encoding="utf-8-sig")  # tolerate a byte-order mark (PowerShell)
    except (OSError, UnicodeDecodeError) as e:
        raise SnapshotError(f"{path}: cannot read: {e}") from None
    stripped = text.lstrip()
    if path.suffix.lower() == ".json" or stripped.startswith(("{", "[")):
        try:
            return [_json_loads(text)]
        except json.JSONDecodeError as e:
            if path.suffix.lower() == ".json":
                raise SnapshotError(
                    f"{path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}"
                ) from None
    try:
        return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise SnapshotError(f"{path}: invalid YAML{where}: {getattr(e, 'problem', e)}") from None


_BOM = b"\xef\xbb\xbf"
_SPACE = b" \t\r\n"


def _decode_json_bytes(path: Path) -> list[Any] | None:
    """The usual case of :func:`_decode`, a well-formed JSON file, decoded by orjson straight from
    its bytes (no text copy); ``None`` when that does not apply or fails (the general path then
    decodes the file and reports any error)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    start = 3 if data.startswith(_BOM) else 0
    if path.suffix.lower() != ".json":
        i = start
        while i < len(data) and data[i] in _SPACE:
            i += 1
        if data[i : i + 1] not in (b"{", b"["):
            return None
    try:
        return [orjson.loads(memoryview(data)[start:] if start else data)]
    except orjson.JSONDecodeError:
        return None


def _flatten_list(doc: Any, source: str) -> list[dict[str, Any]]:
    """:func:`flatten_objects` for a decoded kubectl List that this module owns: items that are
    plain objects are taken as they are (a metrics item gets its ``kind`` set in place) instead of
    copied; anything unusual goes through :func:`flatten_objects`."""
    if type(doc) is dict:
        kind = doc.get("kind")
        items = doc.get("items")
        if (
            type(items) is list
            and (kind is None or (type(kind) is str and kind.endswith("List")))
            and all(type(item) is dict and "items" not in item for item in items)
        ):
            default_kind = _ITEM_KIND.get(str(kind)) or (str(kind)[:-4] if kind and kind != "List" else None)
            if default_kind:
                for item in items:
                    if not item.get("kind"):
                        item["kind"] = default_kind
            return items
    return flatten_objects(doc, source)


def load_objects(paths: Sequence[str | Path]) -> Iterable[dict[str, Any]]:
    """Decode every object in ``paths``.

    Raises:
        SnapshotError: unreadable or undecodable file, or a document that is not an object
            (the message names the file).
    """
    out: list[dict[str, Any]] = []
    for path in iter_snapshot_files(paths):
        for i, doc in enumerate(_decode(path)):
            if isinstance(doc, list):
                for j, item in enumerate(doc):
                    out.extend(flatten_objects(item, f"{path} document {i} item {j}"))
            else:
                out.extend(_flatten_list(doc, str(path)))
    return out


def load_snapshot(paths: Sequence[str | Path], now: float | None = None) -> ClusterSnapshot:
    """Load a :class:`ClusterSnapshot` from snapshot files or directories.

    Args:
        paths: files or directories.
        now: evaluation time (Unix seconds); ``None`` takes the metrics timestamp.

    Raises:
        SnapshotError: any bad file or object; the message names the file or object.
    """
    with no_cycle_collector():  # millions of acyclic dicts and records: see scaler.model.gcpause
        objects = load_objects(paths)
        try:
            snapshot = build_snapshot(objects, now)
        except SnapshotError as e:
            raise SnapshotError(f"{', '.join(map(str, paths))}: {e}") from None
        finally:
            del objects  # free the decoded JSON before the collector resumes
    return snapshot
