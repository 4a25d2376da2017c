"""A workload's 24-hour resource portrait (seed 001 §4.6): the record and its hour buckets.

Seed 001 ("基于资源画像的调度策略实现") schedules on *application resource portraits*: for every
hour of the day (UTC), what one instance of an application really uses. :class:`WorkloadProfile`
is that record, :func:`hour_of_day` the bucket of a sample. They live in the model because a
:class:`~scaler.model.snapshot.ClusterSnapshot` carries the profiles; building them from usage
samples is :mod:`scaler.history.profiles`' job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DAY_SECONDS", "HOURS", "WorkloadProfile", "hour_of_day"]

HOURS = 24
"""Hours in a profile (hour of the day, UTC, 0–23)."""

DAY_SECONDS = 86400.0
"""Seconds in a day."""


def hour_of_day(ts: float) -> int:
    """The UTC hour of the day (0–23) of Unix time ``ts``: the profile bucket of a sample."""
    return int((ts % DAY_SECONDS) // 3600) % HOURS


def _check_hours(name: str, values: Sequence[object]) -> None:
    if len(values) != HOURS:
        raise ValueError(f"WorkloadProfile.{name} must have {HOURS} values, got {len(values)}")


@dataclass(frozen=True)
class WorkloadProfile:
    """One workload's 24-hour resource portrait, per replica.

    Source: the resource-portrait design (seed 001 §4.6).
    Every field holds 24 values, one per UTC hour of the day (index 0 is 00:00–00:59 UTC).
    CPU in millicores, memory in bytes.

    Attributes:
        key: the workload key (:func:`workload_key`), e.g. ``"shop/Deployment/web"``.
        cpu_mean, cpu_std, cpu_peak: mean, population standard deviation and maximum of the
            per-pod CPU samples in each hour.
        memory_mean, memory_std, memory_peak: the same for working-set memory.
        cpu_samples, memory_samples: number of samples behind each hour (0: no data; the other
            values of that hour are then 0).
    """

    key: str
    cpu_mean: tuple[float, ...]
    cpu_std: tuple[float, ...]
    cpu_peak: tuple[float, ...]
    memory_mean: tuple[float, ...]
    memory_std: tuple[float, ...]
    memory_peak: tuple[float, ...]
    cpu_samples: tuple[int, ...]
    memory_samples: tuple[int, ...]

    def __post_init__(self) -> None:
        """Check that every per-hour field has 24 values."""
        for name in (
            "cpu_mean",
            "cpu_std",
            "cpu_peak",
            "memory_mean",
            "memory_std",
            "memory_peak",
            "cpu_samples",
            "memory_samples",
        ):
            _check_hours(name, getattr(self, name))

    @property
    def sampled(self) -> bool:
        """True when at least one hour has a CPU or a memory sample."""
        return any(self.cpu_samples) or any(self.memory_samples)

    @staticmethod
    def flat(
        key: str,
        cpu_millicores: float,
        memory_bytes: float,
        cpu_std: float = 0.0,
        memory_std: float = 0.0,
        samples: int = 1,
    ) -> WorkloadProfile:
        """A profile with the same values every hour (peak = mean): handy for tests and for
        callers that only know one level."""
        h = HOURS
        return WorkloadProfile(
            key=key,
            cpu_mean=(float(cpu_millicores),) * h,
            cpu_std=(float(cpu_std),) * h,
            cpu_peak=(float(cpu_millicores),) * h,
            memory_mean=(float(memory_bytes),) * h,
            memory_std=(float(memory_std),) * h,
            memory_peak=(float(memory_bytes),) * h,
            cpu_samples=(samples,) * h,
            memory_samples=(samples,) * h,
        )
