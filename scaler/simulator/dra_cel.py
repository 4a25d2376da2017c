"""CEL device selectors of Dynamic Resource Allocation, evaluated with the ``cel`` library.

A DeviceClass or a claim's request selects devices with CEL expressions over one variable,
``device``: ``device.driver`` (a string), ``device.attributes[domain][id]`` (int, bool, string
or semantic version) and ``device.capacity[domain][id]`` (a Kubernetes quantity), where an
attribute or capacity written without a domain belongs to the driver's
(``k8s.io/dynamic-resource-allocation/cel/compile.go``). Looking up a domain the device lacks
gives an empty map, so ``has(device.attributes["x"].y)`` is false; a missing id is an error.

Expressions are compiled once (:func:`compile_selector`, cached) by the ``common-expression-language``
package (Rust ``cel`` bindings: about 10 µs an evaluation) and evaluated against a context built
once per device. Kubernetes' own CEL libraries that device selectors use are supplied as
functions: quantities (``quantity``, ``isQuantity``, ``compareTo``, ``isGreaterThan``,
``isLessThan``, ``add``, ``sub``, ``asInteger``, ``asApproximateFloat``, ``isInteger``,
``sign``), semantic versions (``semver``, ``isSemver``, ``major``, ``minor``, ``patch`` and the
comparisons) and the string and regex extensions (``lowerAscii``, ``upperAscii``, ``trim``,
``replace``, ``split``, ``join``, ``indexOf``, ``lastIndexOf``, ``substring``, ``charAt``,
``find``, ``findAll``). A selector that calls any other function (``cel.bind``, ``math.*``,
``sets.*``, …) or does not compile is *undecidable*: :attr:`CompiledSelector.problem` says why,
and the simulation never moves a pod whose claim needs it. So is an evaluation that fails
(:class:`CelError`), as it fails the scheduler's allocation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import cel

from scaler.errors import ScalerError
from scaler.model.dra import Device, VersionValue
from scaler.model.quantity import QuantityError, parse_quantity

__all__ = ["CelError", "CompiledSelector", "compile_selector", "device_matches"]

_BUILTINS = frozenset(
    {
        "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "_+_", "_-_", "_*_", "_/_", "_%_", "!_", "-_",
        "_&&_", "_||_", "_?_:_", "_[_]", "@in", "@not_strictly_false", "size", "contains",
        "startsWith", "endsWith", "matches", "int", "uint", "double", "string", "bytes", "bool",
        "dyn", "type", "duration", "timestamp",
    }
)  # fmt: skip
"""Functions and operators the ``cel`` library evaluates itself as cel-go does."""

_QUANTITY = "k8s.quantity"
_SEMVER = "k8s.semver"


class CelError(ScalerError):
    """A selector failed on a device (a runtime error: a missing attribute, a type mismatch, a
    division by zero, a bad version); the message says what."""


# -- Kubernetes' CEL libraries ------------------------------------------------------------------


def _q(value: Fraction) -> dict[str, str]:
    return {_QUANTITY: f"{value.numerator}/{value.denominator}"}


def _as_q(value: Any) -> Fraction:
    if isinstance(value, dict) and _QUANTITY in value:
        n, _, d = str(value[_QUANTITY]).partition("/")
        return Fraction(int(n), int(d))
    raise TypeError(f"not a quantity: {value!r}")


_SEMVER_RE = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*)?"
)


def _semver(text: str) -> dict[str, str]:
    """A semantic version (semver 2.0, strict, as ``blang/semver`` ``Parse``), build metadata
    dropped (it takes no part in comparisons or equality)."""
    m = _SEMVER_RE.fullmatch(text)
    if m is None:
        raise ValueError(f"invalid semantic version {text!r}")
    core = f"{m[1]}.{m[2]}.{m[3]}"
    return {_SEMVER: f"{core}-{m[4]}" if m[4] else core}


def _parts(value: Any) -> tuple[tuple[int, int, int], tuple[str, ...]]:
    if not (isinstance(value, dict) and _SEMVER in value):
        raise TypeError(f"not a semantic version: {value!r}")
    core, _, pre = str(value[_SEMVER]).partition("-")
    a, b, c = (int(x) for x in core.split("."))
    return (a, b, c), tuple(pre.split(".")) if pre else ()


def _pre_key(ids: tuple[str, ...]) -> tuple[Any, ...]:
    # semver 2.0 §11: no pre-release ranks higher; numeric identifiers below alphanumeric ones.
    if not ids:
        return (1,)
    return (0, *((0, int(i), "") if i.isdigit() else (1, 0, i) for i in ids), (-1, 0, ""))


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, dict) and _SEMVER in a:
        (ca, pa), (cb, pb) = _parts(a), _parts(b)
        ka, kb = (ca, _pre_key(pa)), (cb, _pre_key(pb))
    else:
        ka, kb = _as_q(a), _as_q(b)  # type: ignore[assignment]
    return (ka > kb) - (ka < kb)


def _arith(a: Any, b: Any, sign: int) -> dict[str, str]:
    other = Fraction(b) if isinstance(b, int) and not isinstance(b, bool) else _as_q(b)
    return _q(_as_q(a) + sign * other)


def _quantity_fn(text: str) -> dict[str, str]:
    try:
        return _q(parse_quantity(text))
    except QuantityError as e:
        raise ValueError(str(e)) from None


def _is(parse: Any) -> Any:
    def check(text: str) -> bool:
        try:
            parse(text)
        except (ValueError, QuantityError):
            return False
        return True

    return check


def _index_of(s: Any, sub: Any, start: int = 0) -> int:
    if isinstance(s, str):
        return s.find(sub, start)
    return list(s).index(sub) if sub in s else -1


def _last_index_of(s: Any, sub: Any) -> int:
    if isinstance(s, str):
        return s.rfind(sub)
    items = list(s)
    return len(items) - 1 - items[::-1].index(sub) if sub in items else -1


def _as_integer(q: Any) -> int:
    v = _as_q(q)
    if v.denominator != 1 or not -(2**63) <= v < 2**63:
        raise ValueError("cannot convert value to integer")
    return int(v)


_FUNCTIONS: dict[str, Any] = {
    "quantity": _quantity_fn,
    "isQuantity": _is(parse_quantity),
    "semver": _semver,
    "isSemver": _is(_semver),
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "add": lambda a, b: _arith(a, b, 1),
    "sub": lambda a, b: _arith(a, b, -1),
    "asInteger": _as_integer,
    "asApproximateFloat": lambda q: float(_as_q(q)),
    "isInteger": lambda q: _as_q(q).denominator == 1 and -(2**63) <= _as_q(q) < 2**63,
    "sign": lambda q: (_as_q(q) > 0) - (_as_q(q) < 0),
    "major": lambda v: _parts(v)[0][0],
    "minor": lambda v: _parts(v)[0][1],
    "patch": lambda v: _parts(v)[0][2],
    "lowerAscii": lambda s: "".join(c.lower() if c.isascii() else c for c in s),
    "upperAscii": lambda s: "".join(c.upper() if c.isascii() else c for c in s),
    "trim": lambda s: s.strip(),
    "replace": lambda s, old, new, n=-1: s.replace(old, new, n),
    "split": lambda s, sep, n=-1: s.split(sep, n - 1 if n > 0 else -1) if n != 0 else [],
    "join": lambda items, sep="": sep.join(items),
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "substring": lambda s, a, b=None: s[a:b] if b is not None else s[a:],
    "charAt": lambda s, i: s[i] if i < len(s) else "",
    "find": lambda s, pattern: m[0] if (m := re.search(pattern, s)) else "",
    "findAll": lambda s, pattern, n=-1: [m[0] for m in re.finditer(pattern, s)][: None if n < 0 else n],
}
_KNOWN = _BUILTINS | frozenset(_FUNCTIONS)

# device.attributes["domain"] / device.capacity['domain']: the domains an expression looks up.
_LOOKUP = re.compile(r"\b(attributes|capacity)\s*\[\s*(?:\"((?:[^\"\\]|\\.)*)\"|'((?:[^'\\]|\\.)*)')\s*\]")
_MAP_WORD = re.compile(r"\b(attributes|capacity)\b")


@dataclass(frozen=True, slots=True)
class CompiledSelector:
    """A compiled selector. ``problem`` says why it cannot be evaluated (``""``: it can).
    ``domains`` are the attribute and capacity domains it looks up by name; ``whole_maps`` is
    set when it also reads the maps themselves (``in``, macros), where an absent domain must stay
    absent."""

    expression: str
    program: Any = None
    problem: str = ""
    domains: frozenset[str] = frozenset()
    whole_maps: bool = False


@lru_cache(maxsize=4096)
def compile_selector(expression: str) -> CompiledSelector:
    """Compile ``expression`` once (cached by its text).

    Returns:
        The compiled selector; its ``problem`` names what makes it undecidable (a syntax error, a
        function scaler does not evaluate).
    """
    try:
        program = cel.compile(expression)
        unknown = sorted(set(program.functions()) - _KNOWN)
    except Exception as e:  # the library raises ValueError and others
        return CompiledSelector(expression, problem=f"CEL expression does not compile: {_one_line(e)}")
    if unknown:
        names = ", ".join(unknown)
        return CompiledSelector(expression, problem=f"CEL function {names} is not evaluated by scaler")
    lookups = _LOOKUP.findall(expression)
    domains = frozenset(a or b for _, a, b in lookups)
    whole = len(_MAP_WORD.findall(expression)) > len(lookups)
    return CompiledSelector(expression, program, "", domains, whole)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:200]


def _value(v: Any, where: str) -> Any:
    if isinstance(v, VersionValue):
        try:
            return _semver(v.text)
        except ValueError as e:
            raise CelError(f"attribute {where}: {e}") from None
    return v


class _DeviceContexts:
    """The evaluation contexts of one device: its attributes and capacity as CEL maps, per set
    of absent domains to show as empty maps; and the results per expression."""

    __slots__ = ("base", "by_domains", "device", "driver", "results")

    def __init__(self, driver: str, device: Device) -> None:
        self.driver = driver
        self.device = device
        self.by_domains: dict[frozenset[str], Any] = {}
        self.results: dict[str, bool | CelError] = {}
        attributes: dict[str, dict[str, Any]] = {}
        for name, v in device.attributes.items():
            domain, _, ident = name.rpartition("/")
            attributes.setdefault(domain or driver, {})[ident] = (name, v)
        capacity: dict[str, dict[str, Any]] = {}
        for name, q in device.capacity.items():
            domain, _, ident = name.rpartition("/")
            capacity.setdefault(domain or driver, {})[ident] = _q(q)
        self.base: tuple[dict[str, Any], dict[str, Any]] | CelError
        try:
            attrs = {d: {k: _value(v, n) for k, (n, v) in m.items()} for d, m in attributes.items()}
            self.base = (attrs, capacity)
        except CelError as e:
            self.base = e

    def context(self, missing: frozenset[str]) -> Any:
        ctx = self.by_domains.get(missing)
        if ctx is None:
            assert not isinstance(self.base, CelError)
            attrs, caps = self.base
            attrs = {**attrs, **{d: {} for d in missing if d not in attrs}}
            caps = {**caps, **{d: {} for d in missing if d not in caps}}
            device = {"driver": self.driver, "attributes": attrs, "capacity": caps}
            ctx = self.by_domains[missing] = cel.Context({"device": device}, _FUNCTIONS)
        return ctx


_CONTEXTS: dict[int, _DeviceContexts] = {}
_MAX_CONTEXTS = 200_000


def device_matches(selector: CompiledSelector, driver: str, device: Device) -> bool:
    """Whether ``device`` of ``driver`` satisfies ``selector`` (cached per device and expression).

    Raises:
        CelError: the selector is undecidable (``selector.problem``), fails on this device, or
            does not give a boolean (the scheduler's allocation fails the same way).
    """
    if selector.problem:
        raise CelError(selector.problem)
    entry = _CONTEXTS.get(id(device))
    if entry is None or entry.device is not device or entry.driver != driver:
        if len(_CONTEXTS) >= _MAX_CONTEXTS:
            _CONTEXTS.clear()
        entry = _CONTEXTS[id(device)] = _DeviceContexts(driver, device)
    hit = entry.results.get(selector.expression)
    if hit is None:
        hit = entry.results[selector.expression] = _evaluate(selector, entry)
    if isinstance(hit, CelError):
        raise hit
    return hit


def _evaluate(selector: CompiledSelector, entry: _DeviceContexts) -> bool | CelError:
    if isinstance(entry.base, CelError):
        return entry.base
    missing = frozenset() if selector.whole_maps else selector.domains
    try:
        result = selector.program.execute(entry.context(missing))
    except KeyError as e:
        return CelError(f"CEL runtime error: no such key {_one_line(e)}")
    except Exception as e:  # runtime errors: TypeError, ZeroDivisionError, RuntimeError…
        return CelError(f"CEL runtime error: {_one_line(e) or type(e).__name__}")
    if not isinstance(result, bool):
        return CelError(f"CEL result is not a boolean: {result!r}")
    return result
