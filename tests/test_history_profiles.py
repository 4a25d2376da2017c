"""Workload profiles (seed 001 resource portraits): hour bucketing, mean/std/peak, the history
window, per-replica averaging, workload keys and the pod → workload resolver of the
Prometheus path."""

from __future__ import annotations

import math

import numpy as np
import pytest
from builders import make_controller, make_node, make_pod, owner_ref

from scaler.history.profiles import build_profiles, build_profiles_from_arrays, workload_key
from scaler.history.prometheus import pod_workload_resolver
from scaler.model.profiles import HOURS, WorkloadProfile, hour_of_day
from scaler.model.snapshot import ClusterSnapshot

DAY = 86400.0
NOW = 1_800_000_000.0 - (1_800_000_000.0 % DAY)  # a UTC midnight
K = "shop/Deployment/web"


def at(day: int, hour: int, minute: int = 0) -> float:
    """Unix time ``day`` days before NOW (1 = yesterday) at ``hour:minute`` UTC."""
    return NOW - day * DAY + hour * 3600 + minute * 60


class TestHourBucketing:
    def test_hour_of_day_is_utc(self) -> None:
        assert hour_of_day(NOW) == 0
        assert hour_of_day(NOW + 3599.999) == 0
        assert hour_of_day(NOW + 3600) == 1
        assert hour_of_day(NOW - 1) == 23

    def test_samples_land_in_their_utc_hour(self) -> None:
        p = build_profiles([(K, at(1, 9, 0), 100, 10), (K, at(1, 9, 59), 300, 30), (K, at(1, 10), 7, 1)], NOW, 7)
        prof = p[K]
        assert prof.cpu_samples[9] == 2 and prof.cpu_mean[9] == 200
        assert prof.cpu_samples[10] == 1 and prof.cpu_mean[10] == 7
        assert sum(prof.cpu_samples) == 3
        assert all(prof.cpu_mean[h] == 0 and prof.cpu_samples[h] == 0 for h in range(HOURS) if h not in (9, 10))

    def test_same_hour_on_different_days_pools(self) -> None:
        samples = [(K, at(d, 14, 30), 100.0 * d, 1.0) for d in (1, 2, 3)]
        prof = build_profiles(samples, NOW, 7)[K]
        assert prof.cpu_samples[14] == 3
        assert prof.cpu_mean[14] == pytest.approx(200.0)
        assert prof.cpu_peak[14] == 300.0


class TestStatistics:
    def test_mean_std_peak_match_numpy(self) -> None:
        rng = np.random.default_rng(7)
        values = rng.uniform(0, 2000, size=40)
        mem = rng.uniform(1e8, 4e9, size=40)
        samples = [(K, at(1 + i % 5, 3, i % 60), float(v), float(m)) for i, (v, m) in enumerate(zip(values, mem, strict=True))]
        prof = build_profiles(samples, NOW, 7)[K]
        assert prof.cpu_mean[3] == pytest.approx(values.mean())
        assert prof.cpu_std[3] == pytest.approx(values.std(ddof=0))
        assert prof.cpu_peak[3] == values.max()
        assert prof.memory_mean[3] == pytest.approx(mem.mean())
        assert prof.memory_std[3] == pytest.approx(mem.std(ddof=0), rel=1e-9)
        assert prof.memory_peak[3] == mem.max()

    def test_single_sample_has_zero_std(self) -> None:
        prof = build_profiles([(K, at(1, 5), 250.0, 1e9)], NOW, 7)[K]
        assert (prof.cpu_mean[5], prof.cpu_std[5], prof.cpu_peak[5]) == (250.0, 0.0, 250.0)

    def test_large_memory_values_keep_a_small_std_exactly(self) -> None:
        # Two-pass variance: no cancellation with 64 GiB values differing by 2 bytes.
        base = 64 * 1024**3
        prof = build_profiles([(K, at(1, 1), 0.0, base), (K, at(2, 1), 0.0, base + 2)], NOW, 7)[K]
        assert prof.memory_std[1] == pytest.approx(1.0)

    def test_nan_is_missing_for_that_resource_only(self) -> None:
        prof = build_profiles([(K, at(1, 2), math.nan, 500.0), (K, at(1, 2, 5), 40.0, math.nan)], NOW, 7)[K]
        assert prof.cpu_samples[2] == 1 and prof.cpu_mean[2] == 40.0
        assert prof.memory_samples[2] == 1 and prof.memory_mean[2] == 500.0

    def test_workloads_are_kept_apart(self) -> None:
        p = build_profiles([(K, at(1, 0), 100, 1), ("shop/StatefulSet/db", at(1, 0), 900, 2)], NOW, 7)
        assert p[K].cpu_mean[0] == 100 and p["shop/StatefulSet/db"].cpu_mean[0] == 900


class TestPerReplica:
    def test_two_replicas_average_not_sum(self) -> None:
        # Two pods of one Deployment at the same instants: the profile is one replica's.
        samples = []
        for m in range(0, 60, 5):
            samples += [(K, at(1, 8, m), 100.0, 1000.0), (K, at(1, 8, m), 300.0, 3000.0)]
        prof = build_profiles(samples, NOW, 7)[K]
        assert prof.cpu_mean[8] == pytest.approx(200.0)
        assert prof.memory_mean[8] == pytest.approx(2000.0)
        # The spread between replicas is kept; the peak is the hottest replica.
        assert prof.cpu_std[8] == pytest.approx(100.0)
        assert prof.cpu_peak[8] == 300.0
        assert prof.cpu_samples[8] == 24

    def test_more_replicas_do_not_scale_the_profile(self) -> None:
        one = build_profiles([(K, at(1, 4), 100.0, 1.0)], NOW, 7)[K]
        five = build_profiles([(K, at(1, 4), 100.0, 1.0)] * 5, NOW, 7)[K]
        assert five.cpu_mean == one.cpu_mean and five.cpu_peak == one.cpu_peak


class TestWindow:
    def test_window_is_half_open(self) -> None:
        start = NOW - 2 * DAY
        samples = [
            (K, start - 0.001, 1.0, 1.0),  # just before: out
            (K, start, 10.0, 1.0),  # the start: in
            (K, NOW - 0.001, 100.0, 1.0),  # just before now: in
            (K, NOW, 1000.0, 1.0),  # now: out
        ]
        prof = build_profiles(samples, NOW, 2)[K]
        assert sum(prof.cpu_samples) == 2
        assert prof.cpu_peak[0] == 10.0
        assert prof.cpu_peak[23] == 100.0

    def test_fractional_days(self) -> None:
        p = build_profiles([(K, NOW - 13 * 3600, 5.0, 1.0), (K, NOW - 11 * 3600, 6.0, 1.0)], NOW, 0.5)
        assert sum(p[K].cpu_samples) == 1 and p[K].cpu_peak[13] == 6.0

    def test_workload_only_outside_the_window_has_no_profile(self) -> None:
        assert build_profiles([(K, NOW - 8 * DAY, 5.0, 1.0)], NOW, 7) == {}
        assert build_profiles([], NOW, 7) == {}

    @pytest.mark.parametrize("days", [0, -1, math.nan, math.inf])
    def test_bad_history_days(self, days: float) -> None:
        with pytest.raises(ValueError, match="history_days"):
            build_profiles([(K, NOW - 1, 1.0, 1.0)], NOW, days)

    def test_arrays_form_equals_tuples_form(self) -> None:
        rng = np.random.default_rng(3)
        n = 500
        keys = [f"ns/Deployment/w{i % 7}" for i in range(n)]
        ts = NOW - rng.uniform(-DAY, 8 * DAY, size=n)
        cpu, mem = rng.uniform(0, 1000, size=n), rng.uniform(0, 1e9, size=n)
        a = build_profiles_from_arrays(keys, ts, cpu, mem, NOW, 7)
        b = build_profiles(zip(keys, ts.tolist(), cpu.tolist(), mem.tolist(), strict=True), NOW, 7)
        assert a == b and len(a) == 7


def test_profile_needs_24_hours() -> None:
    with pytest.raises(ValueError, match="24"):
        WorkloadProfile("k", (0.0,), *(((0.0,) * HOURS,) * 5), (0,) * HOURS, (0,) * HOURS)  # type: ignore[arg-type]
    flat = WorkloadProfile.flat("k", 100, 200)
    assert flat.cpu_peak == (100.0,) * HOURS and flat.sampled


# --- workload keys ------------------------------------------------------------------------------


def snapshot_with_controllers() -> ClusterSnapshot:
    rs = make_controller("ReplicaSet", "web-7d9c6b5f4", "shop", owner=owner_ref("Deployment", "web"))
    lone_rs = make_controller("ReplicaSet", "lone", "shop")
    pods = [
        make_pod("web-7d9c6b5f4-x2x9z", "shop", owner_kind="ReplicaSet", owner_name="web-7d9c6b5f4"),
        make_pod("lone-abcde", "shop", owner_kind="ReplicaSet", owner_name="lone"),
        make_pod("db-0", "shop", owner_kind="StatefulSet", owner_name="db"),
        make_pod("agent-q8w7e", "kube-system", owner_kind="DaemonSet", owner_name="agent"),
        make_pod("debug", "shop", owner_kind=None),
    ]
    return ClusterSnapshot.create(now=NOW, nodes=[make_node("n1")], pods=pods, controllers=[rs, lone_rs])


class TestWorkloadKey:
    def test_replicaset_resolves_to_its_deployment(self) -> None:
        snap = snapshot_with_controllers()
        pod = next(p for p in snap.pods if p.name.startswith("web-"))
        assert workload_key(pod, snap) == "shop/Deployment/web"

    def test_replicaset_without_deployment_or_unknown_stays(self) -> None:
        snap = snapshot_with_controllers()
        lone = next(p for p in snap.pods if p.name.startswith("lone"))
        assert workload_key(lone, snap) == "shop/ReplicaSet/lone"
        orphan = make_pod("x-1", "shop", owner_kind="ReplicaSet", owner_name="gone")
        assert workload_key(orphan, snap) == "shop/ReplicaSet/gone"

    def test_other_kinds_and_bare_pods(self) -> None:
        snap = snapshot_with_controllers()
        keys = {p.name: workload_key(p, snap) for p in snap.pods}
        assert keys["db-0"] == "shop/StatefulSet/db"
        assert keys["agent-q8w7e"] == "kube-system/DaemonSet/agent"
        assert keys["debug"] == "shop/Pod/debug"


class TestResolver:
    def test_live_pods_by_record(self) -> None:
        r = pod_workload_resolver(snapshot_with_controllers())
        assert r("shop", "web-7d9c6b5f4-x2x9z") == "shop/Deployment/web"
        assert r("shop", "debug") == "shop/Pod/debug"

    def test_past_pods_by_name(self) -> None:
        r = pod_workload_resolver(snapshot_with_controllers())
        assert r("shop", "web-7d9c6b5f4-aaaaa") == "shop/Deployment/web"  # same revision
        assert r("shop", "web-5b6c7d8f9-bbbbb") == "shop/Deployment/web"  # an older revision
        assert r("shop", "db-4") == "shop/StatefulSet/db"
        assert r("kube-system", "agent-zzzzz") == "kube-system/DaemonSet/agent"
        assert r("shop", "lone-zzzzz") == "shop/ReplicaSet/lone"

    def test_unknown_pods_and_other_namespaces_do_not_resolve(self) -> None:
        r = pod_workload_resolver(snapshot_with_controllers())
        assert r("shop", "debug-2") is None  # a bare pod's name is not a pattern
        assert r("other", "web-7d9c6b5f4-aaaaa") is None
        assert r("shop", "webby-7d9c6b5f4-aaaaa") is None
        assert r("shop", "orphan-abcde") is None
