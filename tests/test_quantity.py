"""Kubernetes quantity parsing: grammar, exact values, rounding up, and rejection of bad input."""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from scaler.model.quantity import (
    MAX_QUANTITY,
    QuantityError,
    check_total,
    parse_bytes,
    parse_count,
    parse_millicores,
    parse_quantity,
)

WholeParser = Callable[[str | int | float], int]

MULTIPLIERS: dict[str, Fraction] = {
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
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


# --- grammar and exact values -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1Ki", Fraction(1024)),
        ("1Mi", Fraction(1048576)),
        ("1Gi", Fraction(1073741824)),
        ("1Ti", Fraction(1099511627776)),
        ("1Pi", Fraction(1125899906842624)),
        ("1Ei", Fraction(1152921504606846976)),
        ("1n", Fraction(1, 1000000000)),
        ("1u", Fraction(1, 1000000)),
        ("1m", Fraction(1, 1000)),
        ("1", Fraction(1)),
        ("1k", Fraction(1000)),
        ("1M", Fraction(1000000)),
        ("1G", Fraction(1000000000)),
        ("1T", Fraction(1000000000000)),
        ("1P", Fraction(1000000000000000)),
        ("1E", Fraction(1000000000000000000)),
    ],
)
def test_every_suffix_has_its_exact_multiplier(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", Fraction(0)),
        ("0.5", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("1.", Fraction(1)),
        ("1.5Gi", Fraction(1610612736)),
        ("0.5Ki", Fraction(512)),
        ("100m", Fraction(1, 10)),
        ("250m", Fraction(1, 4)),
        ("1500m", Fraction(3, 2)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1e+3", Fraction(1000)),
        ("1E-3", Fraction(1, 1000)),
        ("2.5e2", Fraction(250)),
        ("12e0", Fraction(12)),
        ("+5", Fraction(5)),
        ("+.5", Fraction(1, 2)),
        ("-5", Fraction(-5)),
        ("-1.5Gi", Fraction(-1610612736)),
        ("-0", Fraction(0)),
        ("0.1", Fraction(1, 10)),
        ("1083666664n", Fraction(1083666664, 10**9)),
        ("4649246Ki", Fraction(4649246 * 1024)),
        ("007", Fraction(7)),
    ],
)
def test_decimals_exponents_and_signs(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


def test_ints_and_finite_floats_are_taken_as_they_are() -> None:
    assert parse_quantity(3) == Fraction(3)
    assert parse_quantity(-2) == Fraction(-2)
    assert parse_quantity(0.5) == Fraction(1, 2)
    assert parse_quantity(0.1) == Fraction(1, 10)  # the decimal YAML wrote, not the binary float
    assert parse_quantity(2.0) == Fraction(2)


def test_result_is_an_exact_fraction() -> None:
    q = parse_quantity("1n")
    assert isinstance(q, Fraction)
    assert q * 10**9 == 1


@pytest.mark.parametrize(
    "text",
    [
        "",
        ".",
        "-",
        "+",
        "1.2.3",
        "Gi",
        "m",
        "1 Gi",
        " 1",
        "1 ",
        "1\n",
        "1KiB",
        "1K",
        "1gi",
        "1mi",
        "1Gb",
        "abc",
        "1ee3",
        "1e",
        "1E+",
        "1e3.5",
        "1e3Ki",
        "e3",
        "--1",
        "+-1",
        "1,5",
        "0x10",
        "1_000",
        "nan",
        "inf",
        "Infinity",
        "１",  # fullwidth digit one
        "٣",  # Arabic-Indic digit three
    ],
)
def test_malformed_strings_are_rejected_naming_the_value(text: str) -> None:
    with pytest.raises(QuantityError) as exc:
        parse_quantity(text)
    assert repr(text) in str(exc.value)


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), float("-inf"), True, False, None, [1], {"a": 1}, b"1"]
)
def test_non_finite_floats_bools_and_other_types_are_rejected(value: object) -> None:
    with pytest.raises(QuantityError) as exc:
        parse_quantity(value)  # type: ignore[arg-type]
    assert repr(value) in str(exc.value)


def test_exponent_beyond_limit_is_rejected() -> None:
    assert parse_quantity("1e64") == Fraction(10**64)
    assert parse_quantity("1e-64") == Fraction(1, 10**64)
    with pytest.raises(QuantityError, match=re.escape("'1e65'")):
        parse_quantity("1e65")
    with pytest.raises(QuantityError, match=re.escape("'1e-65'")):
        parse_quantity("1e-65")
    with pytest.raises(QuantityError):
        parse_quantity("1e999999999999999999999")


def test_more_digits_than_int_conversion_allows_is_a_quantity_error() -> None:
    # Python refuses int() of more than 4300 digits with a plain ValueError; that must not leak.
    with pytest.raises(QuantityError, match="too many digits"):
        parse_quantity("1" * 5000)
    with pytest.raises(QuantityError, match="too many digits"):
        parse_quantity("0." + "1" * 5000)


def test_quantity_error_is_a_value_error() -> None:
    assert issubclass(QuantityError, ValueError)


# --- whole units, rounding up -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "millicores"),
    [
        ("100m", 100),
        ("250m", 250),
        ("1", 1000),
        ("0.5", 500),
        (".5", 500),
        ("2.25", 2250),
        ("1.5m", 2),
        ("0.1m", 1),
        ("1n", 1),
        ("999999n", 1),
        ("1000000n", 1),
        ("1000001n", 2),
        ("1083666664n", 1084),
        ("1e3", 1000000),
        ("1E-3", 1),
        ("1k", 1000000),
        ("0", 0),
        ("-0", 0),
    ],
)
def test_millicores_round_up(text: str, millicores: int) -> None:
    assert parse_millicores(text) == millicores


def test_millicores_from_numbers() -> None:
    assert parse_millicores(2) == 2000
    assert parse_millicores(0.5) == 500
    assert parse_millicores(0.0001) == 1


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [
        ("1Gi", 1073741824),
        ("1.5Gi", 1610612736),
        ("128974848", 128974848),
        ("129e6", 129000000),
        ("129M", 129000000),
        ("123Mi", 128974848),
        ("0.1", 1),
        ("1m", 1),
        ("1001m", 2),
        ("0.5Ki", 512),
        ("0.0001Ki", 1),
        ("4649246Ki", 4760827904),
        ("0", 0),
    ],
)
def test_bytes_round_up(text: str, nbytes: int) -> None:
    assert parse_bytes(text) == nbytes


@pytest.mark.parametrize(
    ("text", "count"), [("110", 110), ("1", 1), ("0", 0), ("1k", 1000), ("0.5", 1), ("2Mi", 2097152)]
)
def test_counts_round_up(text: str, count: int) -> None:
    assert parse_count(text) == count


@pytest.mark.parametrize("parse", [parse_millicores, parse_bytes, parse_count])
@pytest.mark.parametrize("value", ["-1", "-100m", "-0.5Gi", "-1n", -1, -0.5])
def test_negative_resources_are_rejected(parse: WholeParser, value: str | int | float) -> None:
    with pytest.raises(QuantityError) as exc:
        parse(value)
    assert "negative" in str(exc.value)
    assert repr(value) in str(exc.value)


@pytest.mark.parametrize("parse", [parse_millicores, parse_bytes, parse_count])
def test_whole_unit_parsers_reject_malformed_input(parse: WholeParser) -> None:
    with pytest.raises(QuantityError, match=re.escape("'1.2.3'")):
        parse("1.2.3")


# --- properties ---------------------------------------------------------------------------------


@given(n=st.integers(min_value=-(10**30), max_value=10**30), suffix=st.sampled_from(sorted(MULTIPLIERS)))
def test_integer_times_suffix_is_exact(n: int, suffix: str) -> None:
    assert parse_quantity(f"{n}{suffix}") == n * MULTIPLIERS[suffix]


@given(n=st.integers(min_value=0, max_value=10**30), suffix=st.sampled_from(sorted(MULTIPLIERS)))
def test_plus_sign_and_leading_zeros_do_not_change_the_value(n: int, suffix: str) -> None:
    assert parse_quantity(f"+00{n}{suffix}") == n * MULTIPLIERS[suffix]


@given(m=st.integers(min_value=0, max_value=2**63 - 1))
def test_millicores_of_m_suffix_is_identity(m: int) -> None:
    assert parse_millicores(f"{m}m") == m


@given(b=st.integers(min_value=0, max_value=2**63 - 1))
def test_bytes_of_plain_integer_is_identity(b: int) -> None:
    assert parse_bytes(str(b)) == b
    assert parse_bytes(b) == b


@given(
    sign=st.sampled_from(["", "+", "-"]),
    whole=st.text(alphabet="0123456789", max_size=12),
    frac=st.text(alphabet="0123456789", max_size=12),
    dot=st.booleans(),
    exponent=st.none() | st.integers(min_value=-64, max_value=64),
)
def test_decimal_strings_match_fraction(
    sign: str, whole: str, frac: str, dot: bool, exponent: int | None
) -> None:
    number = f"{whole}.{frac}" if dot else whole
    if not whole and not (dot and frac):
        return  # no digits at all: not a number
    text = sign + number + ("" if exponent is None else f"e{exponent}")
    expected = Fraction(number + ("0" if number.endswith(".") else "")) * Fraction(10) ** (exponent or 0)
    if sign == "-":
        expected = -expected
    assert parse_quantity(text) == expected


@given(nanos=st.integers(min_value=0, max_value=10**24))
def test_millicores_of_nanocores_round_up(nanos: int) -> None:
    assert parse_millicores(f"{nanos}n") == -(-nanos // 10**6)
    assert parse_bytes(f"{nanos}n") == -(-nanos // 10**9)


@given(st.text())
@example("1" * 5000)
@example("1e99999999999999999999")
@example("\u0661")
@example("1\n")
@example("")
def test_arbitrary_text_only_ever_raises_quantity_error(text: str) -> None:
    try:
        q = parse_quantity(text)
    except QuantityError:
        return
    assert isinstance(q, Fraction)
    assert text == text.strip()


# --- the int64 bound ---------------------------------------------------------------------------


@given(
    st.integers(min_value=0, max_value=10**20),
    st.sampled_from(sorted(MULTIPLIERS)),
    st.sampled_from([(parse_millicores, 1000), (parse_bytes, 1), (parse_count, 1)]),
)
@example(8, "Ei", (parse_bytes, 1))
@example(4, "Ei", (parse_bytes, 1))
@example(10, "P", (parse_millicores, 1000))
@example(9223372036854775807, "", (parse_bytes, 1))
@example(9223372036854775808, "", (parse_bytes, 1))
def test_whole_units_beyond_int64_are_refused_naming_the_value(
    n: int, suffix: str, parser: tuple[WholeParser, int]
) -> None:
    """A quantity is its exact value rounded up when that fits int64 (what ``MilliValue()`` and
    the simulation's tables hold), else a one-line error naming the value, never an overflow."""
    parse, scale = parser
    text = f"{n}{suffix}"
    exact = -(-(n * MULTIPLIERS[suffix] * scale).numerator // (n * MULTIPLIERS[suffix] * scale).denominator)
    if exact <= MAX_QUANTITY:
        assert parse(text) == exact
        assert parse(n) == n * scale if suffix == "" else True
    else:
        with pytest.raises(QuantityError, match=re.escape(repr(text)) + ".*too large"):
            parse(text)


@given(st.integers(min_value=0, max_value=2**70))
def test_check_total_accepts_exactly_what_fits_int64(total: int) -> None:
    if total <= MAX_QUANTITY:
        assert check_total(total, "memory requests", "bytes") == total
    else:
        with pytest.raises(QuantityError, match="memory requests sum to more than 2\\^63-1 bytes"):
            check_total(total, "memory requests", "bytes")
