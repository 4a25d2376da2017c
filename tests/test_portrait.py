"""The resource-portrait plugins (seed 001): PodFitsResourceOnPortrait (24-hour fit plus the
requests/oversell hard limit) and ResourceBalanceOnPortrait (the Gaussian balance score,
min-max normalised and weighted)."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import pytest
from builders import GI, make_node, make_pod

from plugins.portrait import (
    PodFitsResourceOnPortrait,
    ResourceBalanceOnPortrait,
    gaussian_balance_score,
    probability_between,
)
from scaler.config import ScalerConfig
from scaler.engine import evaluate
from scaler.model.profiles import HOURS, WorkloadProfile
from scaler.model.records import NodeMetrics, Pod
from scaler.model.snapshot import ClusterSnapshot
from scaler.reasons import NodeStatus
from scaler.simulator.registry import load_filters, load_scorers
from scaler.simulator.state import ClusterState, FilterPlugin, ScorePlugin

DAY = 86400.0
MIDNIGHT = 1_800_000_000.0 - (1_800_000_000.0 % DAY)
NOW = MIDNIGHT + 3 * 3600 + 600  # 03:10 UTC: the current hour is 3
CFG = ScalerConfig()  # targets: cpu 0.45, memory 0.75; oversell 1


def with_profiles(snap: ClusterSnapshot, profiles: Mapping[str, WorkloadProfile]) -> ClusterSnapshot:
    return replace(snap, workload_profiles=dict(profiles))


def hourly(
    key: str,
    cpu_peak: Mapping[int, float] | float,
    mem_peak: Mapping[int, float] | float = 0.0,
    cpu_mean: Mapping[int, float] | float | None = None,
    cpu_std: Mapping[int, float] | float = 0.0,
    mem_mean: Mapping[int, float] | float | None = None,
    mem_std: Mapping[int, float] | float = 0.0,
    hours: Sequence[int] = range(HOURS),
) -> WorkloadProfile:
    """A profile sampled at ``hours``; a mapping gives per-hour values (others: 0 or the
    default), a number the same value every sampled hour. Means default to the peaks."""

    def row(v: Mapping[int, float] | float, default: float = 0.0) -> tuple[float, ...]:
        if isinstance(v, Mapping):
            return tuple(float(v.get(h, default)) if h in hours else 0.0 for h in range(HOURS))
        return tuple(float(v) if h in hours else 0.0 for h in range(HOURS))

    counts = tuple(12 if h in hours else 0 for h in range(HOURS))
    return WorkloadProfile(
        key=key,
        cpu_mean=row(cpu_peak if cpu_mean is None else cpu_mean),
        cpu_std=row(cpu_std),
        cpu_peak=row(cpu_peak),
        memory_mean=row(mem_peak if mem_mean is None else mem_mean),
        memory_std=row(mem_std),
        memory_peak=row(mem_peak),
        cpu_samples=counts,
        memory_samples=counts,
    )


def rs_pod(name: str, node: str, workload: str, cpu_m: int = 10, mem: int = 10) -> Pod:
    """A pod of ReplicaSet ``workload`` in ``default`` (workload key default/ReplicaSet/NAME)."""
    return make_pod(name, node=node, cpu_m=cpu_m, mem=mem, owner_kind="ReplicaSet", owner_name=workload)


def key(workload: str) -> str:
    return f"default/ReplicaSet/{workload}"


def build_state(
    pods: Sequence[Pod],
    profiles: Mapping[str, WorkloadProfile] | None,
    usage: Mapping[str, tuple[int, int]] | None = None,
    cpu_alloc: int = 1000,
    mem_alloc: int = 10_000,
    nodes: Sequence[str] = ("dst", "src"),
) -> ClusterState:
    snap = ClusterSnapshot.create(
        now=NOW, nodes=[make_node(n, cpu_m=cpu_alloc, mem=mem_alloc) for n in nodes], pods=pods
    )
    s: ClusterSnapshot = snap if profiles is None else with_profiles(snap, profiles)
    return ClusterState(s, usage=dict(usage or {}))


def verdict(
    plugin: PodFitsResourceOnPortrait, pod: Pod, state: ClusterState, node: str = "dst"
) -> str | None:
    """The filter's verdict, checked to agree with filter_nodes."""
    one = plugin.filter(pod, state.nodes[node], state)
    codes, reasons = plugin.filter_nodes(pod, state.positions([node]), state)
    vec = None if codes[0] == 0 else reasons[codes[0] - 1]
    assert vec == one
    return one


FIT = PodFitsResourceOnPortrait(CFG)
CPU_PEAK = "cpu portrait peak above target 45% in some hour"
MEM_PEAK = "memory portrait peak above target 75% in some hour"


def test_plugins_are_registered_and_satisfy_the_protocols() -> None:
    cfg = ScalerConfig(
        filter_plugins=("PodFitsResourceOnPortrait",), score_plugins=("ResourceBalanceOnPortrait",)
    )
    assert any(f.name == "PodFitsResourceOnPortrait" for f in load_filters(cfg))
    assert [s.name for s in load_scorers(cfg)] == ["ResourceBalanceOnPortrait"]
    assert isinstance(FIT, FilterPlugin)
    assert isinstance(ResourceBalanceOnPortrait(CFG), ScorePlugin)


class TestHardLimit:
    """Requests after adding the pod: cpu <= allocatable × oversell, memory <= allocatable."""

    def test_without_profiles_only_requests_count(self) -> None:
        resident = rs_pod("r", "dst", "res", cpu_m=900, mem=9000)
        state = build_state([resident], None, usage={"dst": (999, 9999)})
        assert verdict(FIT, rs_pod("m", "src", "mov", cpu_m=100, mem=1000), state) is None
        assert verdict(FIT, rs_pod("m", "src", "mov", cpu_m=101, mem=0), state) == (
            "cpu requests above 100% of allocatable (oversell rate)"
        )
        assert (
            verdict(FIT, rs_pod("m", "src", "mov", cpu_m=0, mem=1001), state)
            == "memory requests above allocatable"
        )

    def test_oversell_rate_scales_cpu_only(self) -> None:
        fit = PodFitsResourceOnPortrait(ScalerConfig(oversell_rate=0.5))
        state = build_state([rs_pod("r", "dst", "res", cpu_m=400, mem=9000)], {})
        assert verdict(fit, rs_pod("m", "src", "mov", cpu_m=100, mem=0), state) is None  # 500 = 0.5 × 1000
        assert verdict(fit, rs_pod("m", "src", "mov", cpu_m=101, mem=0), state) == (
            "cpu requests above 50% of allocatable (oversell rate)"
        )
        # Memory is never oversold nor undersold: allocatable is the limit.
        assert verdict(fit, rs_pod("m", "src", "mov", cpu_m=0, mem=1000), state) is None

    def test_hard_limit_comes_before_the_portrait(self) -> None:
        profiles = {key("res"): hourly(key("res"), 900.0, 0.0)}
        state = build_state([rs_pod("r", "dst", "res", cpu_m=950)], profiles)
        assert verdict(FIT, rs_pod("m", "src", "mov", cpu_m=100), state) == (
            "cpu requests above 100% of allocatable (oversell rate)"
        )

    def test_oversell_rate_above_one_is_rejected(self) -> None:
        with pytest.raises(ValueError):
            ScalerConfig(oversell_rate=1.5)

    def test_no_allocatable(self) -> None:
        state = build_state([], {}, cpu_alloc=0)
        assert verdict(FIT, rs_pod("m", "src", "mov"), state) == "node has no allocatable cpu"


class TestPortraitFit:
    """Hourly peaks (sum over the node's pods plus the pod) <= target × allocatable, every hour."""

    def profiles(self, mover_hour: int, mover_peak: float) -> dict[str, WorkloadProfile]:
        return {
            key("res"): hourly(key("res"), {h: 300.0 if h == 10 else 100.0 for h in range(HOURS)}, 1000.0),
            key("mov"): hourly(
                key("mov"), {h: mover_peak if h == mover_hour else 50.0 for h in range(HOURS)}, 1000.0
            ),
        }

    def state(self, mover_hour: int, mover_peak: float) -> ClusterState:
        return build_state([rs_pod("r", "dst", "res")], self.profiles(mover_hour, mover_peak))

    def test_exactly_at_the_target_in_the_peak_hour_passes(self) -> None:
        # hour 10: 300 + 150 = 450 = 0.45 × 1000
        assert verdict(FIT, rs_pod("m", "src", "mov"), self.state(10, 150.0)) is None

    def test_one_millicore_over_in_one_hour_fails(self) -> None:
        assert verdict(FIT, rs_pod("m", "src", "mov"), self.state(10, 150.001)) == CPU_PEAK

    def test_peaks_at_different_hours_fit_together(self) -> None:
        # Sum of the two peaks (300 + 200) is over 450, but they never coincide:
        # hour 10 is 300 + 50, hour 11 is 100 + 200.
        assert verdict(FIT, rs_pod("m", "src", "mov"), self.state(11, 200.0)) is None
        # The same peak at the resident's peak hour does not fit.
        assert verdict(FIT, rs_pod("m", "src", "mov"), self.state(10, 200.0)) == CPU_PEAK

    def test_portrait_targets_are_their_own_flags(self) -> None:
        # The soft limit follows --portrait-target-*-usage, not TargetUsage's targets.
        cfg = ScalerConfig(target_cpu_usage=0.9, portrait_target_cpu_usage=0.3)
        fit = PodFitsResourceOnPortrait(cfg)
        assert verdict(fit, rs_pod("m", "src", "mov"), self.state(10, 1.0)) == (
            "cpu portrait peak above target 30% in some hour"
        )
        fit = PodFitsResourceOnPortrait(ScalerConfig(target_cpu_usage=0.3, portrait_target_cpu_usage=1.0))
        assert verdict(fit, rs_pod("m", "src", "mov"), self.state(10, 700.0)) is None  # 300 + 700
        assert verdict(fit, rs_pod("m", "src", "mov"), self.state(10, 700.5)) is not None

    @pytest.mark.parametrize("hour", [0, 23])
    def test_every_hour_is_checked_including_the_day_boundaries(self, hour: int) -> None:
        assert verdict(FIT, rs_pod("m", "src", "mov"), self.state(hour, 350.0)) is None  # 100 + 350
        assert verdict(FIT, rs_pod("m", "src", "mov"), self.state(hour, 350.5)) == CPU_PEAK

    def test_memory_boundary_is_inclusive(self) -> None:
        profiles = {
            key("res"): hourly(key("res"), 0.0, 5000.0),
            key("mov"): hourly(key("mov"), 0.0, {7: 2500.0}),
        }
        state = build_state([rs_pod("r", "dst", "res")], profiles)
        assert verdict(FIT, rs_pod("m", "src", "mov"), state) is None  # 7500 = 0.75 × 10000
        profiles[key("mov")] = hourly(key("mov"), 0.0, {7: 2501.0})
        state = build_state([rs_pod("r", "dst", "res")], profiles)
        assert verdict(FIT, rs_pod("m", "src", "mov"), state) == MEM_PEAK

    def test_the_real_use_counts_not_the_request(self) -> None:
        # Requests say it fits easily (and TargetUsage would say so at night); the portrait
        # says the destination is busy at 14:00.
        profiles = {key("res"): hourly(key("res"), {h: 400.0 if 9 <= h < 18 else 50.0 for h in range(HOURS)})}
        state = build_state([rs_pod("r", "dst", "res", cpu_m=100)], profiles, usage={"dst": (50, 0)})
        assert verdict(FIT, rs_pod("m", "src", "mov", cpu_m=60), state) == CPU_PEAK
        assert verdict(FIT, rs_pod("m", "src", "mov", cpu_m=50), state) is None

    def test_unprofiled_pods_count_their_requests_every_hour(self) -> None:
        profiles = {key("res"): hourly(key("res"), 300.0)}
        state = build_state([rs_pod("r", "dst", "res"), rs_pod("u", "dst", "unknown", cpu_m=100)], profiles)
        assert verdict(FIT, rs_pod("m", "src", "other", cpu_m=50), state) is None  # 300 + 100 + 50
        assert verdict(FIT, rs_pod("m", "src", "other", cpu_m=51), state) == CPU_PEAK

    def test_unsampled_hours_take_the_busiest_sampled_hour(self) -> None:
        # The mover was only seen at hours 1 and 2 (peak 200 at 2); hour 10 is unknown, taken as 200.
        profiles = {
            key("res"): hourly(key("res"), {h: 300.0 if h == 10 else 0.0 for h in range(HOURS)}),
            key("mov"): hourly(key("mov"), {1: 100.0, 2: 200.0}, hours=(1, 2)),
        }
        state = build_state([rs_pod("r", "dst", "res")], profiles)
        assert verdict(FIT, rs_pod("m", "src", "mov"), state) == CPU_PEAK  # 300 + 200 at hour 10
        profiles[key("mov")] = hourly(key("mov"), {1: 100.0, 2: 150.0}, hours=(1, 2))
        state = build_state([rs_pod("r", "dst", "res")], profiles)
        assert verdict(FIT, rs_pod("m", "src", "mov"), state) is None

    def test_current_usage_floors_the_current_hour(self) -> None:
        # Profiles say 100 all day, but the node uses 420 right now (hour 3): 420 + 40 > 450.
        profiles = {
            key("res"): hourly(key("res"), 100.0),
            key("mov"): hourly(key("mov"), {3: 40.0, 4: 340.0}),
        }
        state = build_state([rs_pod("r", "dst", "res")], profiles, usage={"dst": (420, 0)})
        assert verdict(FIT, rs_pod("m", "src", "mov"), state) == CPU_PEAK
        # Other hours are not floored: at hour 4, 100 + 340 = 440 fits; only hour 3 decides.
        state = build_state([rs_pod("r", "dst", "res")], profiles, usage={"dst": (410, 0)})
        assert verdict(FIT, rs_pod("m", "src", "mov"), state) is None

    def test_current_usage_floors_every_hour_when_a_pod_is_unprofiled(self) -> None:
        # A BestEffort-like pod without profile requests nothing; the node's usage (400) is the
        # only hint of what it uses, so it floors every hour.
        profiles = {key("res"): hourly(key("res"), 100.0), key("mov"): hourly(key("mov"), {12: 60.0})}
        pods = [rs_pod("r", "dst", "res"), rs_pod("u", "dst", "unknown", cpu_m=0)]
        state = build_state(pods, profiles, usage={"dst": (400, 0)})
        assert verdict(FIT, rs_pod("m", "src", "mov"), state) == CPU_PEAK  # 400 + 60 at hour 12
        state = build_state(pods[:1], profiles, usage={"dst": (400, 0)})
        assert verdict(FIT, rs_pod("m", "src", "mov"), state) is None  # 100 + 60 at hour 12

    def test_moved_pods_count(self) -> None:
        profiles = {key("res"): hourly(key("res"), 100.0), key("mov"): hourly(key("mov"), {5: 200.0})}
        pods = [rs_pod("r", "dst", "res"), rs_pod("m1", "src", "mov"), rs_pod("m2", "src", "mov")]
        state = build_state(pods, profiles)
        m1, m2 = pods[1], pods[2]
        assert verdict(FIT, m1, state) is None  # 300 at hour 5
        mark = state.checkpoint()
        state.unschedule(m1, "src")
        state.place(m1, "dst")
        assert verdict(FIT, m2, state) == CPU_PEAK  # 500 at hour 5
        state.revert(mark)
        assert verdict(FIT, m2, state) is None

    def test_moved_pods_are_tracked_through_reverts(self) -> None:
        # Same number of moved pods before and after a revert, different pods: the cache must
        # see the difference.
        profiles = {key("res"): hourly(key("res"), 100.0), key("small"): hourly(key("small"), 50.0),
                    key("big"): hourly(key("big"), 300.0), key("probe"): hourly(key("probe"), 100.0)}  # fmt: skip
        small, big = rs_pod("s", "src", "small"), rs_pod("b", "src", "big")
        probe = rs_pod("p", "src", "probe")
        state = build_state([rs_pod("r", "dst", "res"), small, big, probe], profiles)
        mark = state.checkpoint()
        state.place(small, "dst")
        assert verdict(FIT, probe, state) is None  # 100 + 50 + 100
        state.revert(mark)
        state.place(big, "dst")
        assert verdict(FIT, probe, state) == CPU_PEAK  # 100 + 300 + 100
        state.revert(mark)
        assert verdict(FIT, probe, state) is None  # 100 + 100


class TestGaussianPeak:
    """--portrait-peak=gaussian: the node's hourly peak is the quantile of N(Σ mean, Σ std²),
    at most the sum of the peaks."""

    def state(self, res_peak: float, mov_peak: float) -> ClusterState:
        # hour 10: resident mean 200 std 30, mover mean 150 std 40: node N(350, 50²).
        profiles = {
            key("res"): hourly(key("res"), {10: res_peak}, cpu_mean={10: 200.0}, cpu_std={10: 30.0}),
            key("mov"): hourly(key("mov"), {10: mov_peak}, cpu_mean={10: 150.0}, cpu_std={10: 40.0}),
        }
        return build_state([rs_pod("r", "dst", "res")], profiles)

    def fit(self, target: float, quantile: float = 0.99) -> PodFitsResourceOnPortrait:
        cfg = ScalerConfig(
            portrait_peak="gaussian", portrait_quantile=quantile, portrait_target_cpu_usage=target
        )
        return PodFitsResourceOnPortrait(cfg)

    def test_the_quantile_of_the_summed_gaussian(self) -> None:
        mover = rs_pod("m", "src", "mov")
        state = self.state(400.0, 300.0)  # peaks add to 700: the sum refuses any target below 0.7
        z = 2.3263478740408408  # Φ⁻¹(0.99): 350 + 50 z = 466.3
        assert verdict(self.fit(0.466), mover, state) is not None
        assert verdict(self.fit(0.467), mover, state) is None
        assert 350 + 50 * z == pytest.approx(466.317, abs=1e-3)
        assert verdict(PodFitsResourceOnPortrait(ScalerConfig(portrait_target_cpu_usage=0.467)), mover, state)
        # A lower quantile: 350 + 1.2816 x 50 = 414.1.
        assert verdict(self.fit(0.45, quantile=0.9), mover, state) is None
        assert verdict(self.fit(0.414, quantile=0.9), mover, state) is not None

    def test_never_above_the_sum_of_peaks(self) -> None:
        # Peaks 210 + 160 = 370 are below 466: the sum wins.
        state = self.state(210.0, 160.0)
        assert verdict(self.fit(0.37), rs_pod("m", "src", "mov"), state) is None
        assert verdict(self.fit(0.369), rs_pod("m", "src", "mov"), state) is not None

    def test_quantile_must_be_above_one_half(self) -> None:
        with pytest.raises(ValueError):
            ScalerConfig(portrait_peak="gaussian", portrait_quantile=0.5)


@pytest.mark.parametrize("seed", range(5))
def test_filter_nodes_agrees_with_filter_node_by_node(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"n{i:02d}" for i in range(12)]
    workloads = [f"w{i}" for i in range(6)]
    profiles = {
        key(w): hourly(
            key(w),
            {h: rng.uniform(0, 250) for h in range(HOURS)},
            {h: rng.uniform(0, 3000) for h in range(HOURS)},
            cpu_mean={h: rng.uniform(0, 120) for h in range(HOURS)},
            cpu_std={h: rng.uniform(0, 60) for h in range(HOURS)},
            mem_mean={h: rng.uniform(0, 1500) for h in range(HOURS)},
            mem_std={h: rng.uniform(0, 700) for h in range(HOURS)},
            hours=rng.sample(range(HOURS), rng.randint(1, HOURS)),
        )
        for w in workloads[:4]  # w4 and w5 have no profile
    }
    pods = [
        rs_pod(
            f"p{i}",
            rng.choice(names),
            rng.choice(workloads),
            cpu_m=rng.randint(0, 300),
            mem=rng.randint(0, 3000),
        )
        for i in range(30)
    ]
    usage = {n: (rng.randint(0, 500), rng.randint(0, 6000)) for n in names if rng.random() < 0.7}
    state = build_state(pods, profiles, usage=usage, nodes=names)
    fit = PodFitsResourceOnPortrait(
        ScalerConfig(oversell_rate=rng.choice([0.6, 0.9, 1.0]), portrait_peak=rng.choice(["sum", "gaussian"]))
    )
    movers = [
        rs_pod(f"m{i}", "elsewhere", rng.choice(workloads), rng.randint(0, 200), rng.randint(0, 2000))
        for i in range(8)
    ]
    for i, m in enumerate(movers):
        positions = state.positions(names)
        codes, reasons = fit.filter_nodes(m, positions, state)
        for j, n in enumerate(names):
            one = fit.filter(m, state.nodes[n], state)
            assert (None if codes[j] == 0 else reasons[codes[j] - 1]) == one
        ok = [n for j, n in enumerate(names) if codes[j] == 0]
        if ok and i % 2 == 0:
            state.place(m, ok[0])  # later pods see it


# --- the score ----------------------------------------------------------------------------------


def phi(z: float) -> float:
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


class TestGaussianScore:
    def test_seed_formula_below_and_above_the_target(self) -> None:
        # mean 0.30 < T 0.45, std 0.10: 0.5 + P(0.30 < x < 0.45) = Φ(1.5)
        assert gaussian_balance_score(0.30, 0.10, 0.45) == pytest.approx(0.5 + (phi(1.5) - 0.5))
        assert gaussian_balance_score(0.30, 0.10, 0.45) == pytest.approx(0.9331928, abs=1e-7)
        # mean 0.60 > T, std 0.10: 0.5 − P(0.45 < x < 0.60) = 0.5 − (0.5 − Φ(−1.5)) = Φ(−1.5)
        assert gaussian_balance_score(0.60, 0.10, 0.45) == pytest.approx(0.5 - (0.5 - phi(-1.5)))
        assert gaussian_balance_score(0.45, 0.10, 0.45) == 0.5

    def test_probability_between(self) -> None:
        assert probability_between(0.0, 1.0, -1.0, 1.0) == pytest.approx(0.682689492)
        assert probability_between(0.0, 1.0, 1.0, -1.0) == 0.0
        assert probability_between(0.5, 0.0, 0.5, 0.9) == 0.5  # the σ → 0⁺ limit

    def test_below_target_always_beats_above(self) -> None:
        for std in (0.0, 0.01, 0.2, 5.0):
            assert gaussian_balance_score(0.449, std, 0.45) >= 0.5 >= gaussian_balance_score(0.451, std, 0.45)

    def test_monotone_decreasing_in_the_mean(self) -> None:
        means = np.linspace(0.0, 1.2, 61)
        for std in (0.0, 0.02, 0.1, 0.3):
            scores = [gaussian_balance_score(float(m), std, 0.45) for m in means]
            assert all(a >= b for a, b in itertools.pairwise(scores))
        scores = [gaussian_balance_score(float(m), 0.1, 0.45) for m in means]
        assert all(a > b for a, b in itertools.pairwise(scores))

    def test_zero_std_is_a_step(self) -> None:
        assert gaussian_balance_score(0.2, 0.0, 0.45) == 1.0
        assert gaussian_balance_score(0.45, 0.0, 0.45) == 0.5
        assert gaussian_balance_score(0.7, 0.0, 0.45) == 0.0


BAL = ResourceBalanceOnPortrait(CFG)


class TestBalanceScore:
    def test_busiest_hour_mean_and_its_std(self) -> None:
        # Hour 9 has the largest mean (300), with std 40; hour 20 has a larger std but lower mean.
        profiles = {
            key("res"): hourly(
                key("res"),
                0.0,
                0.0,
                cpu_mean={9: 300.0, 20: 100.0},
                cpu_std={9: 40.0, 20: 200.0},
                mem_mean={},
            ),
            key("mov"): hourly(key("mov"), 0.0, 0.0, cpu_mean={9: 30.0}, cpu_std={9: 30.0}, mem_mean={}),
        }
        state = build_state([rs_pod("r", "dst", "res")], profiles)
        cpu, mem = BAL.raw_scores(rs_pod("m", "src", "mov"), state.nodes["dst"], state)
        std = math.sqrt(40.0**2 + 30.0**2) / 1000  # variances add
        assert cpu == pytest.approx(gaussian_balance_score(0.33, std, 0.45))
        assert mem == 1.0  # memory mean 0 everywhere: the seed's initial mean = std = 0
        assert BAL.score(rs_pod("m", "src", "mov"), state.nodes["dst"], state) == pytest.approx(cpu + mem)

    def three_nodes(self) -> tuple[ClusterState, Pod]:
        # Node loads (cpu mean, all hours): a 100, b 300, c 500 (of 1000); std 50 each.
        profiles = {key(w): hourly(key(w), 0.0, 0.0, cpu_mean=v, cpu_std=50.0, mem_mean=v * 10, mem_std=2000.0) for w, v in
                    (("a", 100.0), ("b", 300.0), ("c", 500.0), ("mov", 10.0))}  # fmt: skip
        pods = [rs_pod("pa", "a", "a"), rs_pod("pb", "b", "b"), rs_pod("pc", "c", "c")]
        return build_state(pods, profiles, nodes=("a", "b", "c")), rs_pod("m", "src", "mov")

    def test_min_max_normalisation_and_weights(self) -> None:
        state, pod = self.three_nodes()
        nodes = [state.nodes[n] for n in "abc"]
        raw = np.array([BAL.raw_scores(pod, n, state) for n in nodes])
        final = BAL.score_nodes(pod, nodes, state)
        norm = (raw - raw.min(axis=0)) / (raw.max(axis=0) - raw.min(axis=0))
        assert final == pytest.approx(list(norm.sum(axis=1)))
        assert final[0] == pytest.approx(2.0) and final[2] == pytest.approx(0.0)
        cpu_only = ResourceBalanceOnPortrait(
            ScalerConfig(portrait_cpu_weight=3.0, portrait_memory_weight=0.0)
        )
        assert cpu_only.score_nodes(pod, nodes, state) == pytest.approx(list(3.0 * norm[:, 0]))

    def test_the_emptier_node_wins(self) -> None:
        state, pod = self.three_nodes()
        final = BAL.score_nodes(pod, [state.nodes[n] for n in "cab"], state)
        assert final[1] > final[2] > final[0]
        assert BAL.score(pod, state.nodes["a"], state) > BAL.score(pod, state.nodes["b"], state)

    def test_equal_scores_normalise_to_one(self) -> None:
        state, pod = self.three_nodes()
        assert BAL.score_nodes(pod, [state.nodes["a"]], state) == [2.0]
        assert BAL.score_nodes(pod, [], state) == []

    def test_without_profiles_the_score_is_neutral(self) -> None:
        state = build_state([rs_pod("r", "dst", "res", cpu_m=900)], None, nodes=("dst", "src"))
        pod = rs_pod("m", "x", "mov")
        assert BAL.score(pod, state.nodes["dst"], state) == 0.0
        assert BAL.score_nodes(pod, [state.nodes["dst"], state.nodes["src"]], state) == [0.0, 0.0]


# --- in an evaluation ---------------------------------------------------------------------------


def test_portrait_filter_keeps_a_node_whose_pods_would_overload_the_daytime() -> None:
    """At 03:10 the destination is quiet (TargetUsage alone lets the move happen); its portrait
    shows a 14:00 peak that the moved pod would push over the target."""
    gi = GI
    nodes = [make_node("busy-by-day", cpu_m=4000, mem=16 * gi), make_node("idle", cpu_m=4000, mem=16 * gi)]
    pods = [
        rs_pod("day-1", "busy-by-day", "day", cpu_m=500, mem=gi),
        rs_pod("night-1", "idle", "night", cpu_m=500, mem=gi),
    ]
    metrics = [
        NodeMetrics("busy-by-day", NOW - 30, 30, 300, 2 * gi),
        NodeMetrics("idle", NOW - 30, 30, 200, gi),
    ]
    snap = ClusterSnapshot.create(now=NOW, nodes=nodes, pods=pods, node_metrics=metrics)
    profiles = {
        key("day"): hourly(
            key("day"), {h: 1700.0 if 9 <= h < 18 else 300.0 for h in range(HOURS)}, float(gi)
        ),
        key("night"): hourly(key("night"), 200.0, float(gi)),
    }
    snap = with_profiles(snap, profiles)
    seed_only = {r.node.name: r for r in evaluate(snap, ScalerConfig()).nodes}
    assert seed_only["idle"].status is NodeStatus.REMOVABLE_DRAIN
    cfg = ScalerConfig(
        filter_plugins=("TargetUsage", "PodFitsResourceOnPortrait"),
        score_plugins=("ResourceBalanceOnPortrait",),
    )
    portrait = {r.node.name: r for r in evaluate(snap, cfg).nodes}
    assert portrait["idle"].status is NodeStatus.UNREMOVABLE
    assert "portrait" in portrait["idle"].detail
    # Without history the portrait plugins add nothing to TargetUsage.
    no_history = {r.node.name: r for r in evaluate(with_profiles(snap, {}), cfg).nodes}
    assert no_history["idle"].status is NodeStatus.REMOVABLE_DRAIN
