"""Decode API JSON bytes straight into records: snapshot files, LIST pages, WATCH events and the
metrics LISTs all go through here.

A List (a file, a LIST page, a metrics LIST) is decoded by msgspec in one pass into typed Structs
(:mod:`scaler.model.wire`) holding only the fields scaler reads; then each Struct is turned into a
record (:func:`scaler.model.parse.to_record`) and dropped, so no tree of dicts ever exists and the
input's bytes can be released before the records are made. When the one pass fails (a List whose
items have no ``kind`` and whose kind was not guessed, a nested List, a malformed item), the List
is decoded again as an outline whose items stay :class:`msgspec.Raw` slices of the input, and
each item is decoded on its own; an item that still does not decode is decoded as plain values,
only to word the error (:func:`validation_message`): ``Pod shop/web-0: field
'spec.priority' must be an integer, got 'high'``.

Files are strict: a malformed object is an error. The live source decodes LIST pages and WATCH
events leniently instead: an item that does not decode becomes an
:class:`~scaler.model.unreadable.Unreadable` (its identity, and a Pod's node, read from what
could be read of it) and the rest of the page is kept (:func:`decode_list` with ``lenient``,
:func:`decode_watch_event`). JSON nested deeper than the decoders' recursion limit (no API
object is; a hostile file or proxy may be) is ``msgspec.DecodeError`` ("nested too deeply"), never
a ``RecursionError``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import Raw, Struct, field

from scaler.model import wire, wire_kinds
from scaler.model.parse import ObjectError, Record, ident, pod_metrics_records, to_record
from scaler.model.records import Node, Pod
from scaler.model.unreadable import Unreadable

__all__ = [
    "LIST_ITEM_KIND",
    "TOO_DEEP",
    "DecodedList",
    "Document",
    "Place",
    "UnsupportedKind",
    "WatchEvent",
    "decode_document",
    "decode_list",
    "decode_object",
    "decode_watch_event",
    "document_records",
    "flatten_objects",
    "namespace_name",
    "parse_node",
    "parse_object",
    "parse_pod",
    "place_text",
    "records_of_plain",
    "unreadable_object",
    "unsupported",
    "validation_message",
]

TOO_DEEP = "JSON nested too deeply (deeper than the decoder's recursion limit)"
"""The error of a document nested deeper than msgspec's and the standard library's recursion
limit (about 1,000 levels; Kubernetes objects nest a few dozen)."""

LIST_ITEM_KIND = {"NodeMetricsList": "NodeMetrics", "PodMetricsList": "PodMetrics"}
"""The kind of the items of a ``*List`` whose name is not simply the item kind plus ``List``."""


class _ListMetaW(Struct, frozen=True, gc=False):
    resourceVersion: str = ""
    continue_: str = field(default="", name="continue")


class _DocW(Struct, frozen=True, gc=False):
    """A document's outline: its kind and, for a List, its items left undecoded."""

    kind: Any = None
    items: list[Raw] | None = None
    metadata: _ListMetaW = _ListMetaW()


class _HeadMetaW(Struct, frozen=True, gc=False):
    name: Any = ""
    namespace: Any = ""
    resourceVersion: str = ""


class _HeadW(Struct, frozen=True, gc=False):
    """An object's kind and identity only (everything else skipped)."""

    kind: Any = None
    metadata: _HeadMetaW = _HeadMetaW()


class _EventW(Struct, frozen=True, gc=False):
    type: str
    object: Raw


class _StatusW(Struct, frozen=True, gc=False):
    code: Any = None
    reason: Any = ""
    message: Any = ""


class _BadW(Struct, frozen=True, gc=False):
    """What can still be read of an object that did not decode: its identity and a Pod's node,
    every value of any type (checked by :func:`unreadable_object`)."""

    metadata: Any = None
    spec: Any = None


_TYPED = {kind: msgspec.json.Decoder(t) for kind, t in wire_kinds.KIND_TYPES.items()}
_ANY = msgspec.json.Decoder(wire_kinds.ANY_KIND)
_DOC = msgspec.json.Decoder(_DocW | list[Raw])
_LIST = msgspec.json.Decoder(_DocW)
_HEAD = msgspec.json.Decoder(_HeadW)
_EVENT = msgspec.json.Decoder(_EventW)
_STATUS = msgspec.json.Decoder(_StatusW)
_BAD = msgspec.json.Decoder(_BadW)


def _list_kind(kind: Any) -> str | None:
    """The item kind of a List kind (``PodList`` -> ``Pod``; ``List`` and ``None`` -> ``None``)."""
    if not isinstance(kind, str) or kind == "List":
        return None
    return LIST_ITEM_KIND.get(kind) or (kind[:-4] if kind.endswith("List") else None)


def _is_list(doc: Any) -> bool:
    if not isinstance(doc, Mapping) or "items" not in doc:
        return False
    kind = doc.get("kind")
    return kind is None or str(kind).endswith("List")


class UnsupportedKind(ObjectError):
    """An object of a kind the snapshot does not use (or without ``kind``)."""


def unsupported(kind: Any, namespace: Any, name: Any) -> UnsupportedKind:
    """The error for an object of an unsupported ``kind`` (names the kind and the object)."""
    key = f"{namespace}/{name}" if namespace else f"{name}"
    return UnsupportedKind(
        f"unsupported object kind {kind!r} ({key}); a snapshot holds {', '.join(sorted(wire_kinds.KIND_TYPES))}"
    )


def namespace_name(obj: Any) -> tuple[Any, Any]:
    """(``metadata.namespace``, ``metadata.name``) of a plain object, ``""`` where missing."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return "", ""
    return meta.get("namespace") or "", meta.get("name") or ""


_EXPECTED = {
    "int": "an integer",
    "str": "a string",
    "str | null": "a string",
    "object": "an object",
    "array": "a list",
    "bool": "a boolean",
    "float": "a number",
    "str | int | float": "a quantity (a string or a number)",
}
_NOT_FOUND = object()


def _at(obj: Any, path: str) -> Any:
    """The value at a msgspec path (``$.spec.containers[0].ports``) in a plain object."""
    for part in re.findall(r"\.([^.\[]+)|\[(\d+)\]|\[\.\.\.\]", path):
        key, index = part
        try:
            obj = obj[key] if key else obj[int(index)] if index else _NOT_FOUND
        except (KeyError, IndexError, TypeError):
            return _NOT_FOUND
        if obj is _NOT_FOUND:
            return obj
    return obj


def validation_message(error: msgspec.ValidationError, obj: Any, kind: str | None = None) -> ObjectError:
    """Word a msgspec type error on ``obj`` (the same object, as plain Python values) like the
    converters do: ``Pod shop/web-0: field 'spec.priority' must be an integer, got 'high'``.

    Args:
        error: what msgspec raised decoding or converting ``obj``; its path starts at ``obj``.
        obj: the object as plain values (``dict``/``list``/scalars).
        kind: the kind to name when ``obj`` has none (a metrics List's items).

    Returns:
        An :class:`ObjectError` (an :class:`UnsupportedKind` when ``kind`` itself is the problem).
    """
    text, _, path = str(error).rpartition(" - at `")
    path = path.rstrip("`")
    if not text:
        text, path = str(error), "$"
    ns, name = namespace_name(obj)
    raw_kind = obj.get("kind") if isinstance(obj, Mapping) else None
    if path == "$.kind" or text == "Object missing required field `kind`":
        return unsupported(raw_kind, ns, name)
    where = ident(str(raw_kind or kind or "object"), str(ns), str(name))
    field = path[2:] if path.startswith("$.") else path
    missing = re.fullmatch(r"Object missing required field `(.+)`", text)
    if missing:
        return ObjectError(f"{where}: missing required field {'.'.join(filter(None, (field, missing[1])))!r}")
    holds = field.endswith("[...]")  # a map's value (msgspec does not say which key)
    if holds:
        path, field = path[:-5], field[:-5]
    value = _at(obj, path)
    shown = "" if value is _NOT_FOUND else f", got {value!r}"
    expected = re.fullmatch(r"Expected `(.+?)( \| null)?`(, got `.+`)?", text)
    if expected:
        noun = _EXPECTED.get(expected[1], f"of type {expected[1]}")
        return ObjectError(
            f"{where}: field {field!r} must {'map each key to' if holds else 'be'} {noun}{shown}"
        )
    if text.startswith("Invalid enum value"):
        return ObjectError(f"{where}: unknown {field.rpartition('.')[2]} {value!r} (field {field!r})")
    return ObjectError(f"{where}: field {field!r}: {text}")


def parse_object(obj: Mapping[str, Any], kind: str | None = None, *, strict: bool = True) -> Record:
    """Convert one API object given as plain values (a ``dict`` from YAML or a test) into its
    record, through the same Structs and converters as decoded JSON.

    Args:
        obj: the object; its ``kind`` says which record, else ``kind``.
        kind: the kind of an object without one (a metrics List's items).
        strict: ``False`` lets strings stand for numbers and booleans (``"3"``, ``"true"``), as a
            YAML file whose scalars were all read as strings needs.

    Raises:
        UnsupportedKind: no kind, or a kind not in :data:`scaler.model.wire_kinds.KIND_TYPES`.
        ObjectError: a field of the wrong type or a bad value (names the object and the field).
    """
    if not isinstance(obj, Mapping):
        raise ObjectError(f"expected a Kubernetes object, got {type(obj).__name__}")
    raw_kind = obj.get("kind") or kind
    if not isinstance(raw_kind, str) or raw_kind not in wire_kinds.KIND_TYPES:
        raise unsupported(raw_kind, *namespace_name(obj))
    try:
        w = msgspec.convert(obj, wire_kinds.KIND_TYPES[raw_kind], strict=strict)
    except msgspec.ValidationError as e:
        raise validation_message(e, obj, raw_kind) from None
    return to_record(w)


def _parse_as(obj: Mapping[str, Any], kind: str, record: type[Any]) -> Any:
    rec = parse_object(obj, kind)
    if not isinstance(rec, record):
        raise ObjectError(f"expected a {kind}, got {type(rec).__name__} {obj.get('kind')!r}")
    return rec


def parse_pod(obj: Mapping[str, Any]) -> Pod:
    """:func:`parse_object` for a v1 Pod (``kind`` may be missing).

    Raises:
        ObjectError: as :func:`parse_object`, or the object is not a Pod.
    """
    pod: Pod = _parse_as(obj, "Pod", Pod)
    return pod


def parse_node(obj: Mapping[str, Any]) -> Node:
    """:func:`parse_object` for a v1 Node (``kind`` may be missing).

    Raises:
        ObjectError: as :func:`parse_object`, or the object is not a Node.
    """
    node: Node = _parse_as(obj, "Node", Node)
    return node


def decode_object(data: bytes | memoryview | Raw, kind: str | None = None) -> Record:
    """Decode one API object from JSON into its record.

    Args:
        data: the object's JSON.
        kind: the kind of an object that has no ``kind`` field (a List's items); an object's own
            ``kind`` wins.

    Raises:
        UnsupportedKind: no kind, or one a snapshot does not use.
        ObjectError: malformed JSON, a field of the wrong type, or a bad value (names the object
            and the field).
    """
    dec = _ANY if kind is None else _TYPED.get(kind)
    try:
        if dec is None:
            raise msgspec.ValidationError("Invalid value - at `$.kind`")
        w = dec.decode(data)
    except msgspec.ValidationError as e:
        try:
            obj = msgspec.json.decode(data)
        except msgspec.DecodeError as d:
            raise ObjectError(f"malformed {kind or 'object'}: {d}") from None
        own = obj.get("kind") if isinstance(obj, dict) else None
        if kind is not None and own and own != kind:
            return parse_object(obj)  # its own kind wins
        if dec is None:
            raise unsupported(own or kind, *namespace_name(obj)) from None
        raise validation_message(e, obj, kind) from None
    except msgspec.DecodeError as e:
        raise ObjectError(f"malformed {kind or 'object'}: {e}") from None
    return to_record(w)


def flatten_objects(doc: Any, source: str) -> Iterator[tuple[Mapping[str, Any], str | None, str]]:
    """The objects of one document given as plain values (a List, a ``*List``, nested Lists, or a
    single object), each with the kind its List gives it (``None`` for a generic List) and where
    it is (``source item 3``).

    Raises:
        ObjectError: the document or an item is not an object (names ``source``).
    """
    if doc is None:
        return
    if not isinstance(doc, Mapping):
        raise ObjectError(f"{source}: expected a Kubernetes object or List, got {type(doc).__name__}")
    if not _is_list(doc):
        yield doc, None, source
        return
    items = doc.get("items")
    if items is None:
        return
    if not isinstance(items, list):
        raise ObjectError(f"{source}: 'items' must be a list")
    default = _list_kind(doc.get("kind"))
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ObjectError(
                f"{source} item {i}: expected a Kubernetes object or List, got {type(item).__name__}"
            )
        if _is_list(item):
            yield from flatten_objects(item, f"{source} item {i}")
        else:
            yield item, default, f"{source} item {i}"


def records_of_plain(doc: Any, source: str, *, strict: bool = True) -> Iterator[tuple[Record, str]]:
    """The records of one document given as plain values, with where each object is.

    Args:
        doc: the document (see :func:`flatten_objects`).
        source: how to name the document (a file, ``file document 2``).
        strict: see :func:`parse_object`.

    Raises:
        ObjectError: as :func:`flatten_objects` and :func:`parse_object`.
    """
    for obj, kind, place in flatten_objects(doc, source):
        yield parse_object(obj, kind, strict=strict), place


Place = str | tuple[str, int]
"""Where an object is: a document (``pods.json``) or a List item (``("pods.json", 3)``)."""


def place_text(place: Place) -> str:
    """A :data:`Place` as messages name it: ``pods.json item 3``."""
    return place if isinstance(place, str) else f"{place[0]} item {place[1]}"


def _list_decoder(item: Any) -> msgspec.json.Decoder[Any]:
    """A decoder of a List whose items are all ``item`` (a Struct type or a tagged union)."""
    items: Any = list[item] | None
    fields = [("kind", Any, None), ("items", items, None), ("metadata", _ListMetaW, _ListMetaW())]
    return msgspec.json.Decoder(msgspec.defstruct("ListW", fields, gc=False))


_LIST_OF: dict[str | None, msgspec.json.Decoder[Any]] = {
    None: _list_decoder(wire_kinds.ANY_KIND),
    **{kind: _list_decoder(t) for kind, t in wire_kinds.KIND_TYPES.items()},
}
_KIND_HINT = re.compile(rb'"kind"\s*:\s*"(\w+List)"')


def _list_hint(data: bytes | memoryview) -> str | None:
    """The item kind of a typed List (``PodMetricsList`` -> ``PodMetrics``) when the start and
    the end of the document agree on one, else ``None``: a guess of the decoder to try first."""
    found = {m[1].decode() for m in _KIND_HINT.finditer(bytes(data[:512]) + b" " + bytes(data[-512:]))}
    kind = _list_kind(found.pop()) if len(found) == 1 else None
    return kind if kind in _TYPED else None


@dataclass(slots=True)
class Document:
    """A decoded JSON document (:func:`decode_document`): its objects as Structs (``items``), or,
    when they did not decode in one pass, as undecoded slices (``raw_items``) of a List whose
    items have the kind ``default_kind`` unless they say otherwise; or one object (``single``)."""

    items: list[wire.ObjectW | None] | None = None
    raw_items: list[Raw] | None = None
    default_kind: str | None = None
    single: Record | None = None


def decode_document(data: bytes | memoryview) -> Document:
    """Decode one JSON document (a file's content): a List or ``*List`` in one msgspec pass into
    typed Structs when every item decodes, else into an outline (items left as raw slices, decoded
    one by one by :func:`document_records`); a single object straight into its record; a
    top-level array as plain values. The caller may drop ``data`` afterwards: in the one-pass
    case nothing refers to it any more.

    Raises:
        msgspec.DecodeError: the bytes are not JSON, or are nested too deeply (:data:`TOO_DEEP`).
        ObjectError: a single object that is malformed or of an unsupported kind.
    """
    try:
        return _decode_document(data)
    except RecursionError:
        raise msgspec.DecodeError(TOO_DEEP) from None


def _decode_document(data: bytes | memoryview) -> Document:
    try:
        doc = _LIST_OF[_list_hint(data)].decode(data)
        if doc.items is not None and (doc.kind is None or str(doc.kind).endswith("List")):
            return Document(items=doc.items)
    except msgspec.ValidationError:
        pass  # a typed List without item kinds, a nested List, a bad item: the outline below
    outline = _DOC.decode(data)
    if isinstance(outline, list):
        return Document(raw_items=outline)
    if outline.items is None or not (outline.kind is None or str(outline.kind).endswith("List")):
        return Document(single=decode_object(data))
    return Document(raw_items=outline.items, default_kind=_list_kind(outline.kind))


def document_records(doc: Document, source: str) -> Iterator[tuple[Record, Place]]:
    """The records of a :func:`decode_document` result with where each object is; each Struct is
    released as soon as its record is made.

    Raises:
        ObjectError: as :func:`decode_object`, or an item is not an object (names ``source``).
    """
    if doc.single is not None:
        yield doc.single, source
    if doc.items is not None:
        items = doc.items
        if items and all(type(w) is wire.PodMetricsW for w in items):  # pod-metrics.json: one loop
            yield from ((rec, (source, i)) for i, rec in enumerate(pod_metrics_records(items)))  # type: ignore[arg-type]
            return
        for i in range(len(items)):
            w, items[i] = items[i], None  # each Struct is dropped once converted
            yield to_record(w), (source, i)  # type: ignore[arg-type]
    for i, raw in enumerate(doc.raw_items or ()):
        try:
            rec = decode_object(raw, doc.default_kind)
        except ObjectError:
            item = msgspec.json.decode(raw)
            if not isinstance(item, Mapping):
                raise ObjectError(
                    f"{source} item {i}: expected a Kubernetes object or List, got {type(item).__name__}"
                ) from None
            if _is_list(item):
                yield from records_of_plain(item, f"{source} item {i}")
                continue
            raise
        yield rec, (source, i)


@dataclass(frozen=True, slots=True)
class DecodedList:
    """One LIST page: its records, the ``continue`` token (``""`` on the last page) and the
    List's ``resourceVersion``."""

    records: list[Any]
    continue_token: str
    resource_version: str


def decode_list(data: bytes, kind: str, *, lenient: bool = False) -> DecodedList:
    """Decode one LIST answer of ``kind`` objects (items without ``kind``, as the API serves them).

    Args:
        data: the answer's body.
        kind: the kind of the items.
        lenient: an item that does not decode becomes an :class:`Unreadable` among the records
            (:func:`unreadable_object`) instead of failing the page (the live source).

    Raises:
        msgspec.DecodeError: not JSON, or nested too deeply (:data:`TOO_DEEP`).
        msgspec.ValidationError: not a List (an object with an ``items`` list).
        ObjectError: as :func:`decode_object` for an item (not ``lenient``).
    """
    try:
        try:
            doc = _LIST_OF[kind].decode(data)
            items: list[Any] = doc.items or []
            if kind == "PodMetrics":  # the largest LIST of every loop: one loop of its own
                records: list[Any] = pod_metrics_records(items)
            else:
                records = []
                for i in range(len(items)):
                    w, items[i] = items[i], None  # each Struct is dropped once converted
                    records.append(to_record(w))
        except (msgspec.ValidationError, ObjectError):  # a malformed item, or not a List: item by item
            doc = _LIST.decode(data)
            records = [_decode_item(raw, kind, lenient) for raw in doc.items or ()]
    except RecursionError:
        raise msgspec.DecodeError(TOO_DEEP) from None
    if doc.items is None and not (isinstance(doc.kind, str) and doc.kind.endswith("List")):
        raise msgspec.ValidationError("Object missing required field `items`")
    return DecodedList(records, doc.metadata.continue_, doc.metadata.resourceVersion)


def _decode_item(raw: Raw, kind: str, lenient: bool) -> Record | Unreadable:
    """One item of a List of ``kind``: its record, or (``lenient``) an :class:`Unreadable`."""
    try:
        return decode_object(raw, kind)
    except ObjectError as e:
        if not lenient:
            raise
        return unreadable_object(raw, kind, str(e))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def unreadable_object(data: bytes | memoryview | Raw, kind: str, message: str) -> Unreadable:
    """What can still be read of an object of ``kind`` that did not decode (``message``: why):
    its name, namespace and uid, a Node's labels, a Pod's ``spec.nodeName``. A value of the
    wrong type is left out (``""``); a Pod whose node cannot be read is ``node_known=False``."""
    try:
        bad = _BAD.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        bad = _BadW()
    meta = bad.metadata if isinstance(bad.metadata, dict) else {}
    spec = bad.spec if isinstance(bad.spec, dict) else {}
    name = _text(meta.get("name"))
    labels = meta.get("labels")
    node_name = spec.get("nodeName") if kind == "Pod" else name
    return Unreadable(
        kind,
        _text(meta.get("namespace")),
        name,
        " ".join(message.split()),
        uid=_text(meta.get("uid")),
        node=_text(node_name),
        node_known=bool(name) and (node_name is None or isinstance(node_name, str)),
        labels={k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}
        if kind == "Node" and isinstance(labels, dict)
        else {},
    )


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One WATCH event: its ``type``, the object's namespace, name and resourceVersion, and for
    ``ADDED``/``MODIFIED`` its record (or ``error``, why the object could not be read, and
    ``unreadable``, what could be read of it); for ``ERROR`` the Status ``code`` and the message
    (``410 Expired: too old resource version``)."""

    type: str
    namespace: str = ""
    name: str = ""
    resource_version: str = ""
    record: Record | None = None
    code: int | None = None
    message: str = ""
    error: str = ""
    unreadable: Unreadable | None = None


def decode_watch_event(line: bytes, kind: str) -> WatchEvent:
    """Decode one line of a WATCH stream of ``kind`` objects.

    ``ADDED``/``MODIFIED`` objects are decoded into records (a malformed one gets ``error``, the
    message :func:`decode_object` raised, instead); ``DELETED`` and ``BOOKMARK`` only to their
    identity and resourceVersion; ``ERROR`` to the Status' code and message.

    Raises:
        msgspec.DecodeError, msgspec.ValidationError: the line is not a watch event (or is
            nested too deeply, :data:`TOO_DEEP`).
    """
    try:
        ev = _EVENT.decode(line)
    except RecursionError:
        raise msgspec.DecodeError(TOO_DEEP) from None
    if ev.type == "ERROR":
        st = _STATUS.decode(ev.object)
        return WatchEvent(
            ev.type,
            code=st.code if isinstance(st.code, int) else None,
            message=f"{st.code} {st.reason or ''}: {' '.join(str(st.message or '').split())}",
        )
    head = _HEAD.decode(ev.object)
    meta = head.metadata
    if not isinstance(meta.name, str) or not isinstance(meta.namespace, str):
        raise msgspec.ValidationError("watch event object without a string metadata.name")
    record: Record | None = None
    error = ""
    unreadable = None
    if ev.type in ("ADDED", "MODIFIED"):
        try:
            record = decode_object(ev.object, kind)
        except ObjectError as e:
            error = str(e)
            unreadable = unreadable_object(ev.object, kind, error)
    return WatchEvent(
        ev.type, meta.namespace, meta.name, meta.resourceVersion, record, error=error, unreadable=unreadable
    )
