"""Exact parsing of Kubernetes resource quantities.

A quantity is ``<sign><digits>[.<digits>]<suffix>`` where the suffix is a binary SI suffix
(``Ki Mi Gi Ti Pi Ei``), a decimal SI suffix (``n u m "" k M G T P E``) or a decimal exponent
(``e3``, ``E-2``). The grammar follows ``k8s.io/apimachinery/pkg/api/resource/quantity.go``.
Values are kept as :class:`fractions.Fraction`, so nothing is lost to floating point, and are
rounded *up* to whole units like ``Quantity.MilliValue()`` and ``Quantity.Value()`` do.

A cluster repeats the same few quantity strings (``100m``, ``128Mi``) across thousands of pods,
so results for strings are memoized (a bounded LRU table); other inputs are parsed each time.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

from scaler.errors import InputError

__all__ = [
    "MAX_QUANTITY",
    "QuantityError",
    "check_total",
    "parse_bytes",
    "parse_count",
    "parse_millicores",
    "parse_quantity",
]


class QuantityError(InputError, ValueError):
    """Raised when a string is not a valid Kubernetes quantity; the message names the value."""


MAX_QUANTITY = 2**63 - 1
"""The largest whole number of units (millicores, bytes, a count) a quantity, or a sum of them
within one object (a pod's containers, a PodMetrics' containers), may hold: int64's maximum,
as ``Quantity.MilliValue()`` and ``Value()`` return int64 and the simulation's tables hold
int64. ``8Ei`` of memory (2^63 bytes) and ``10P`` of CPU (10^19 millicores) are beyond it."""


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)
# Exponents beyond this are refused rather than building astronomically large integers.
_MAX_EXPONENT = 64


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a Kubernetes quantity into an exact rational number of base units.

    Args:
        value: a quantity string such as ``"250m"``, ``"1.5Gi"`` or ``"1e3"``; ints are
            accepted as they are, and floats only when they are finite (YAML may load ``0.5``).

    Returns:
        The exact value in base units (cores for CPU, bytes for memory).

    Raises:
        QuantityError: the value is not a valid quantity (message names the value).
    """
    # Memoize strings only: 1, 1.0 and True hash alike but must not share an answer.
    if type(value) is str:
        return _parse_quantity_str(value)
    return _parse_quantity(value)


@lru_cache(maxsize=8192)
def _parse_quantity_str(value: str) -> Fraction:
    return _parse_quantity(value)


def _parse_quantity(value: str | int | float) -> Fraction:
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"invalid quantity {value!r}")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"invalid quantity {value!r}")
    m = _QUANTITY.match(value.strip())
    if not m or value != value.strip():
        raise QuantityError(f"invalid quantity {value!r}")
    try:
        number = Fraction(m["num"])
    except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits())
        raise QuantityError(f"invalid quantity {value!r}: too many digits") from None
    if m["bin"]:
        number *= _BINARY[m["bin"]]
    elif m["exp"]:
        exponent = int(m["exp"][1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(f"invalid quantity {value!r}: exponent out of range")
        number *= Fraction(10) ** exponent
    else:
        number *= _DECIMAL[m["dec"] or ""]
    return -number if m["sign"] == "-" else number


def _ceil_nonnegative(value: str | int | float, scale: int, what: str) -> int:
    if type(value) is str:
        return _ceil_str(value, scale, what)
    return _ceil(value, scale, what)


@lru_cache(maxsize=8192)
def _ceil_str(value: str, scale: int, what: str) -> int:
    return _ceil(value, scale, what)


_INTEGER = re.compile(r"([0-9]{1,18})(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)")
# Suffix -> (multiplier, divisor) as integers, for the exact integer path of _ceil.
_INT_SCALE = {
    **{k: (v, 1) for k, v in _BINARY.items()},
    **{k: (v.numerator, v.denominator) for k, v in _DECIMAL.items()},
}


_UNIT = {"cpu": "millicores", "byte": "bytes", "count": ""}


def _ceil(value: str | int | float, scale: int, what: str) -> int:
    if type(value) is str:
        m = _INTEGER.fullmatch(value)
        if m is not None:  # plain digits and a suffix: exact in integers, no Fraction needed
            mul, div = _INT_SCALE[m[2]]
            n = -(-int(m[1]) * mul * scale // div)
            return n if n <= MAX_QUANTITY else _too_large(value, what)
    q = parse_quantity(value)
    if q < 0:
        raise QuantityError(f"negative {what} quantity {value!r}")
    n = math.ceil(q * scale)
    return n if n <= MAX_QUANTITY else _too_large(value, what)


def _too_large(value: str | int | float, what: str) -> int:
    unit = _UNIT.get(what, "")
    raise QuantityError(
        f"{what} quantity {value!r} is too large: more than 2^63-1{' ' + unit if unit else ''}"
    )


def check_total(total: int, what: str, unit: str = "") -> int:
    """``total`` (a sum of parsed quantities, in millicores, bytes or a count) when it is at most
    :data:`MAX_QUANTITY`.

    Raises:
        QuantityError: the sum is larger (message: ``<what> sum to more than 2^63-1 <unit>``).
    """
    if total > MAX_QUANTITY:
        raise QuantityError(f"{what} sum to more than 2^63-1{' ' + unit if unit else ''}")
    return total


def parse_millicores(value: str | int | float) -> int:
    """Parse a CPU quantity into whole millicores, rounding up like ``MilliValue()``.

    Raises:
        QuantityError: malformed or negative quantity.
    """
    return _ceil_nonnegative(value, 1000, "cpu")


def parse_bytes(value: str | int | float) -> int:
    """Parse a memory or storage quantity into whole bytes, rounding up like ``Value()``.

    Raises:
        QuantityError: malformed or negative quantity.
    """
    return _ceil_nonnegative(value, 1, "byte")


def parse_count(value: str | int | float) -> int:
    """Parse a countable quantity (pods, ``nvidia.com/gpu``, hugepages) into a whole number.

    Raises:
        QuantityError: malformed or negative quantity.
    """
    return _ceil_nonnegative(value, 1, "count")
