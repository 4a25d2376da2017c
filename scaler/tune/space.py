"""The search space of ``scaler tune``: a YAML mapping of ``scaler run`` flags to a range or
choices.

Format (one entry per flag, flag names as on the command line, with or without ``--``)::

    scale-down-utilization-threshold: {low: 0.3, high: 0.8, step: 0.05}   # floats
    max-relief-evictions-per-loop: {low: 1, high: 10}                      # integers
    scale-down-unneeded-time: {low: 5m, high: 30m, step: 5m}               # durations
    usage-aggregation: {choices: [max, p95, ewma]}                         # any flag
    hot-node-relief: {choices: [false, true]}
    constraints: {max-overload-ratio: 0.5}                                  # optional

``constraints`` (optional) sets ``scaler tune``'s constraints as its flags do (the flags win):
``max-added-overload`` (node-minutes a trial may add to no scale-down's overload, >= 0) and
``max-overload-ratio`` (the trial's overload as a fraction of no scale-down's, >= 0).

A range's type is the flag's: float flags are sampled as floats (on the ``step`` grid when
given), integer flags as integers, duration flags as whole seconds (``low``/``high``/``step``
written as durations) and written back as durations (``10m``). ``log: true`` samples a float
or integer range on a log scale. The relief sub-flags (``hot-node-*``, ``max-relief-*``) are
sampled only in trials where ``--hot-node-relief`` is true (sampled, or set by ``--config``).

Every flag must be a key of the configuration file (:class:`scaler.config.ScalerConfig`) that
takes one value, so the point found is a configuration ``scaler run --config`` accepts as it is.

Raises :class:`SpaceError` (one line naming the file, the flag and the bad value) on an
unreadable file, unknown flag, empty range, or a bound or choice the flag does not accept.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml

from scaler.config import DURATION_KEYS, ConfigError, ScalerConfig
from scaler.errors import InputError
from scaler.model.times import parse_duration_seconds

__all__ = [
    "CONSTRAINTS",
    "RELIEF_PREFIXES",
    "Param",
    "Space",
    "SpaceError",
    "default_space_text",
    "format_duration",
    "load_space",
    "parse_space",
]

RELIEF_PREFIXES = ("hot-node-", "max-relief-")
"""Flags (other than ``hot-node-relief``) that matter only with hot-node relief on."""

_UNTUNABLE = {"nodes", "node_pools", "budgets", "filter_plugins", "score_plugins", "metrics_api_fallbacks"}

Value = bool | int | float | str


class SpaceError(InputError, ValueError):
    """A bad search space; the message is one line naming the file, the flag and the value."""


@dataclass(frozen=True, slots=True)
class Param:
    """One searched flag.

    Attributes:
        flag: the flag's name without ``--`` (``target-cpu-usage``).
        kind: ``float``, ``int``, ``duration`` (whole seconds) or ``choice``.
        low, high, step: the range (seconds for durations); ``step`` ``None`` = continuous.
        log: sample on a log scale.
        choices: the values of a ``choice``.
    """

    flag: str
    kind: str
    low: float = 0.0
    high: float = 0.0
    step: float | None = None
    log: bool = False
    choices: tuple[Value, ...] = ()

    @property
    def relief_only(self) -> bool:
        """True for the relief sub-flags, sampled only with hot-node relief on."""
        return self.flag.startswith(RELIEF_PREFIXES)

    def suggest(self, trial: Any) -> Value:
        """Sample a value from an Optuna ``trial`` (``suggest_float/int/categorical``); durations
        come back as duration strings (``10m``), floats rounded to 9 decimals."""
        if self.kind == "choice":
            return trial.suggest_categorical(self.flag, list(self.choices))  # type: ignore[no-any-return]
        if self.kind == "float":
            v = trial.suggest_float(self.flag, self.low, self.high, step=self.step, log=self.log)
            return round(float(v), 9)
        step = int(self.step) if self.step else 1
        v = trial.suggest_int(self.flag, int(self.low), int(self.high), step=step, log=self.log)
        return format_duration(float(v)) if self.kind == "duration" else int(v)

    def param_value(self, value: Value) -> Any:
        """``value`` as written in a trial's flags (durations as strings) back as the value
        :meth:`suggest` samples (durations as whole seconds), to enqueue a trial."""
        if self.kind == "duration":
            return int(parse_duration_seconds(str(value)))
        return value

    def describe(self) -> dict[str, Any]:
        """The parameter as written in ``frontier.json`` (durations as strings)."""
        if self.kind == "choice":
            return {"choices": list(self.choices)}
        fmt = format_duration if self.kind == "duration" else (lambda x: x)
        out: dict[str, Any] = {"low": fmt(self.low), "high": fmt(self.high)}
        if self.step:
            out["step"] = fmt(self.step)
        if self.log:
            out["log"] = True
        return out


@dataclass(frozen=True, slots=True)
class Space:
    """The parameters, in file order, where they came from, and the file's ``constraints``
    (``max-added-overload`` in node-minutes, ``max-overload-ratio``; absent when not set)."""

    params: tuple[Param, ...]
    source: str
    constraints: Mapping[str, float] = field(default_factory=dict)

    def suggest(self, trial: Any, base: Mapping[str, Any]) -> dict[str, Value]:
        """Sample every parameter for ``trial`` (relief sub-flags only when relief is on in the
        trial or in ``base``, the ``--config`` mapping); returns flag → value in space order."""
        flags: dict[str, Value] = {}
        relief_param = next((p for p in self.params if p.flag == "hot-node-relief"), None)
        if relief_param is not None:
            flags["hot-node-relief"] = relief_param.suggest(trial)
            relief = _truthy(flags["hot-node-relief"])
        else:
            relief = _truthy(base.get("hot-node-relief", base.get("hot_node_relief", False)))
        for p in self.params:
            if p.flag == "hot-node-relief" or (p.relief_only and not relief):
                continue
            flags[p.flag] = p.suggest(trial)
        return {p.flag: flags[p.flag] for p in self.params if p.flag in flags}

    def fixed(self, flags: Mapping[str, Value], where: str) -> dict[str, Any]:
        """A trial's ``flags`` (flag → value, as in ``frontier.json``) as the parameters to
        enqueue in the study, so the trial is replayed as it is.

        Raises:
            SpaceError: a flag that is not a parameter of the space, or a bad duration.
        """
        params = {p.flag: p for p in self.params}
        out = {}
        for flag, value in flags.items():
            if flag not in params:
                raise SpaceError(f"{where}: flag {flag!r} is not searched by {self.source}")
            try:
                out[flag] = params[flag].param_value(value)
            except ValueError:
                raise SpaceError(f"{where}: {flag}: not a duration: {value!r}") from None
        return out

    def describe(self) -> dict[str, Any]:
        """flag → range or choices, as in ``frontier.json``."""
        return {p.flag: p.describe() for p in self.params}


def _truthy(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.strip().lower() in ("true", "1", "yes"))


def format_duration(seconds: float) -> str:
    """Seconds as a duration string: ``1h``, ``10m``, ``90s``, ``1.5s``."""
    s = int(seconds)
    if s != seconds:
        return f"{seconds:g}s"
    if s and s % 3600 == 0:
        return f"{s // 3600}h"
    if s and s % 60 == 0:
        return f"{s // 60}m"
    return f"{s}s"


def default_space_text() -> str:
    """The bundled default space (``scaler/tune/default-space.yaml``)."""
    return resources.files("scaler.tune").joinpath("default-space.yaml").read_text(encoding="utf-8")


def load_space(path: str | None) -> Space:
    """Read ``--space FILE`` (``None``: the bundled default).

    Raises:
        SpaceError: see the module doc.
    """
    if path is None:
        return parse_space(default_space_text(), "the default space")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SpaceError(f"--space {path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    return parse_space(text, f"--space {path}")


def _kind(field: str) -> str | None:
    """The kind of a config field, or ``None`` when it cannot be searched."""
    if field in DURATION_KEYS:
        return "duration"
    ann = ScalerConfig.model_fields[field].annotation
    if get_origin(ann) is not None and str(get_origin(ann)).endswith("Literal"):
        return "choice"
    if ann is bool:
        return "choice"
    if ann is int:
        return "int"
    if ann is float:
        return "float"
    if ann is str:
        return "choice"
    args = get_args(ann)
    if args and all(isinstance(a, str) for a in args):
        return "choice"
    return None


def _number(where: str, key: str, v: Any, duration: bool) -> float:
    if duration:
        try:
            s = parse_duration_seconds(str(v)) if not isinstance(v, bool) else math.nan
        except ValueError:
            s = math.nan
        if math.isnan(s):
            raise SpaceError(f"{where}: {key}: not a duration: {v!r}")
        return s
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise SpaceError(f"{where}: {key}: not a finite number: {v!r}")
    return float(v)


def _check_value(where: str, flag: str, value: Any) -> None:
    try:
        ScalerConfig.from_mapping({flag: value})
    except ConfigError as e:
        raise SpaceError(f"{where}: {e}") from None


def _choice_param(where: str, flag: str, spec: Mapping[str, Any]) -> Param:
    """The parameter of ``flag`` given as ``{choices: [...]}`` in the space ``where``.

    Raises:
        SpaceError: other keys beside ``choices``, no choices, a choice that is not a single
            value or that the flag rejects, or a choice listed twice.
    """
    at = f"{where}: {flag}"
    choices = spec["choices"]
    if set(spec) != {"choices"}:
        raise SpaceError(f"{at}: give either choices or low/high, not both")
    if not isinstance(choices, list) or not choices:
        raise SpaceError(f"{at}: empty choices: {choices!r}")
    values: list[Value] = []
    for c in choices:
        if not isinstance(c, (bool, int, float, str)):
            raise SpaceError(f"{at}: choice {c!r} is not a single value")
        _check_value(where, flag, c)
        values.append(c)
    if len(set(map(repr, values))) != len(values):
        raise SpaceError(f"{at}: a choice is listed twice: {choices!r}")
    return Param(flag, "choice", choices=tuple(values))


def parse_space(text: str, where: str) -> Space:
    """Parse a space document (see the module doc); ``where`` names it in errors.

    Raises:
        SpaceError: see the module doc.
    """
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SpaceError(f"{where}: invalid YAML: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(doc, dict) or not doc:
        raise SpaceError(
            f"{where}: expected a mapping of flags to {{low, high[, step]}} or {{choices: [...]}}"
        )
    constraints = _constraints(where, doc.pop("constraints", {}))
    if not doc:
        raise SpaceError(f"{where}: no flag to search")
    fields = sorted(f.replace("_", "-") for f in ScalerConfig.model_fields)
    params: list[Param] = []
    for raw, spec in doc.items():
        flag = str(raw).removeprefix("--").strip()
        field = flag.replace("-", "_")
        if field not in ScalerConfig.model_fields or field in _UNTUNABLE:
            close = difflib.get_close_matches(flag, fields, n=1)
            hint = (
                f" (did you mean {close[0]}?)"
                if close and close[0].replace("-", "_") not in _UNTUNABLE
                else ""
            )
            what = "cannot be searched" if field in _UNTUNABLE else "unknown flag"
            raise SpaceError(f"{where}: {what} {raw!r}{hint}")
        kind = _kind(field)
        if kind is None:
            raise SpaceError(f"{where}: flag {flag!r} cannot be searched")
        at = f"{where}: {flag}"
        if not isinstance(spec, dict):
            raise SpaceError(f"{at}: expected {{low, high[, step]}} or {{choices: [...]}}, got {spec!r}")
        unknown = set(spec) - {"low", "high", "step", "log", "choices"}
        if unknown:
            raise SpaceError(
                f"{at}: unknown key {sorted(map(str, unknown))[0]!r} (use low, high, step, log or choices)"
            )
        if "choices" in spec:
            params.append(_choice_param(where, flag, spec))
            continue
        if kind == "choice":
            raise SpaceError(f"{at}: takes choices: [...], not a range")
        if "low" not in spec or "high" not in spec:
            raise SpaceError(f"{at}: a range needs low and high")
        duration = kind == "duration"
        low = _number(where, f"{flag}.low", spec["low"], duration)
        high = _number(where, f"{flag}.high", spec["high"], duration)
        if low > high:
            raise SpaceError(f"{at}: empty range: low {spec['low']!r} is above high {spec['high']!r}")
        step = None
        if spec.get("step") is not None:
            step = _number(where, f"{flag}.step", spec["step"], duration)
            if step <= 0:
                raise SpaceError(f"{at}: step must be positive, got {spec['step']!r}")
        log = spec.get("log", False)
        if not isinstance(log, bool):
            raise SpaceError(f"{at}: log must be true or false, got {log!r}")
        if log and (step is not None or low <= 0):
            raise SpaceError(f"{at}: a log range needs low > 0 and no step")
        whole = low == int(low) and high == int(high) and (step is None or step == int(step))
        if kind in ("int", "duration") and not whole:
            raise SpaceError(f"{at}: low, high and step must be whole {'seconds' if duration else 'numbers'}")
        for bound in (spec["low"], spec["high"]):
            _check_value(where, flag, bound)
        params.append(Param(flag, kind, low, high, step, log))
    return Space(tuple(params), where, constraints)


CONSTRAINTS = ("max-added-overload", "max-overload-ratio")
"""The keys of a space file's ``constraints``."""


def _constraints(where: str, spec: Any) -> dict[str, float]:
    """A space file's ``constraints`` mapping, checked.

    Raises:
        SpaceError: not a mapping, an unknown key, or a value that is not a number >= 0.
    """
    if not isinstance(spec, dict):
        raise SpaceError(
            f"{where}: constraints: expected a mapping of {' and '.join(CONSTRAINTS)}, got {spec!r}"
        )
    out: dict[str, float] = {}
    for key, value in spec.items():
        if key not in CONSTRAINTS:
            raise SpaceError(f"{where}: constraints: unknown key {key!r} (use {' or '.join(CONSTRAINTS)})")
        number = _number(where, f"constraints.{key}", value, False)
        if number < 0:
            raise SpaceError(f"{where}: constraints.{key} must be >= 0, got {value!r}")
        out[key] = number
    return out
