"""The pods' usage history as ring buffers (PodUsageHistory) keeps, loop after loop, the samples
a plain per-pod tuple of samples keeps: within each pod's window, a reading appended only when
newer than the pod's newest sample, pods off the recorded nodes forgotten; whether the readings
come as PodMetrics records or as columns (PodMetricsColumns, rows kept per node revision), and
across the growth of the buffers' capacity; and each pod's aggregate read from the buffers is the
one of its samples."""

from __future__ import annotations

import dataclasses

import numpy as np
from builders import GI, make_node, make_pod
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.model.pod_usage import PodMetricsColumns
from scaler.model.records import Pod, PodMetrics
from scaler.model.revisions import RevisionCounter
from scaler.model.snapshot import ClusterSnapshot
from scaler.planner import UsageSample
from scaler.usage_history import Aggregation, PodUsageHistory, aggregate_usage, record_pod_usage

T0 = 1_800_000_000.0
NODES = [make_node(f"n{k}", pool=f"pool-{k % 2}") for k in range(3)]
Key = tuple[str, str]


def _reference(
    history: dict[Key, tuple[UsageSample, ...]],
    snap: ClusterSnapshot,
    window: float,
    nodes: set[str] | None,
    pool_windows: dict[str, float],
) -> dict[Key, tuple[UsageSample, ...]]:
    out: dict[Key, tuple[UsageSample, ...]] = {}
    for node_name, pods in snap.pods_by_node.items():
        if nodes is not None and node_name not in nodes:
            continue
        node = snap.node_by_name[node_name]
        horizon = snap.now - pool_windows.get(node.node_group, window)
        for p in pods:
            key = (p.namespace, p.name)
            kept = tuple(s for s in history.get(key, ()) if s.timestamp >= horizon)
            m = snap.pod_metrics.get(key)
            if m is not None and (not kept or kept[-1].timestamp < m.timestamp):
                kept += (UsageSample(m.timestamp, m.cpu_millicores, m.memory_bytes),)
            if kept:
                out[key] = kept
    return out


STEPS = st.lists(
    st.tuples(
        st.lists(st.sampled_from(["", "n0", "n1", "n2"]), min_size=6, max_size=6),  # each pod's node
        st.lists(st.booleans(), min_size=6, max_size=6),  # has a reading
        st.integers(0, 3),  # metrics age, in steps of 60 s
        st.one_of(st.none(), st.sets(st.sampled_from(["n0", "n1", "n2"]))),  # nodes recorded
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=80, deadline=None)
@given(steps=STEPS, window=st.sampled_from([60.0, 300.0, 900.0]), columns=st.booleans())
def test_the_ring_buffers_keep_what_a_tuple_per_pod_keeps(
    steps: list[tuple[list[str], list[bool], int, set[str] | None]], window: float, columns: bool
) -> None:
    pool_windows = {"pool-1": 2 * window}
    counter = RevisionCounter()
    history: PodUsageHistory | None = None
    expected: dict[Key, tuple[UsageSample, ...]] = {}
    layout = object()
    rows = {("default", f"p{i}"): i for i in range(6)}
    for step, (where, has, age, nodes) in enumerate(steps):
        now = T0 + 120 * step
        ts = now - 60 * age
        pods: list[Pod] = [make_pod(f"p{i}", node=n) for i, n in enumerate(where)]
        cpu = np.array([(37 * step + 11 * i) % 101 for i in range(6)], dtype=np.int64)  # rises and falls
        mem = np.array([GI + (7 * step + i) % 5 for i in range(6)], dtype=np.int64)
        readings = [PodMetrics("default", f"p{i}", ts, 30.0, int(cpu[i]), int(mem[i])) for i in range(6) if has[i]]
        snap = ClusterSnapshot.create(now=now, nodes=NODES, pods=pods, pod_metrics=readings)
        if columns:  # the same readings as columns, with revision numbers
            present = {k: r for k, r in rows.items() if has[r]}
            snap = dataclasses.replace(
                snap,
                pod_metrics=PodMetricsColumns(present if all(has) else dict(present), cpu, mem, ts, 30.0,
                                              layout if all(has) else present),
            )  # fmt: skip
            snap = dataclasses.replace(snap, revisions=counter.follow(snap))
        expected = _reference(expected, snap, window, nodes, pool_windows)
        got = record_pod_usage(history if history is not None else {}, snap, window, nodes, pool_windows)
        assert isinstance(got, PodUsageHistory)
        history = got
        assert dict(history) == expected
        assert len(history) == len(expected) and all(k in history for k in expected)
        for key, samples in expected.items():  # the maxima read from the arrays, wrapped or not
            for method in Aggregation:
                assert history.aggregate(key, method) == aggregate_usage(samples, method)


@settings(max_examples=60, deadline=None)
@given(
    usage=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 10 * GI)), min_size=1, max_size=30),
    window=st.sampled_from([120.0, 300.0, 600.0, 3000.0]),
)
def test_a_pods_aggregate_read_from_its_ring_buffer_is_that_of_its_samples(
    usage: list[tuple[int, int]], window: float
) -> None:
    """One pod sampled every 120 s: its window's samples wrap around the buffer's end as the
    head moves, and the maxima read from the arrays count the samples on both sides of it."""
    history: PodUsageHistory | dict[Key, tuple[UsageSample, ...]] = {}
    for step, (cpu, mem) in enumerate(usage):
        now = T0 + 120 * step
        snap = ClusterSnapshot.create(
            now=now,
            nodes=NODES,
            pods=[make_pod("p0", node="n0")],
            pod_metrics=[PodMetrics("default", "p0", now, 30.0, cpu, mem)],
        )
        history = record_pod_usage(history, snap, window, None, {})
        assert isinstance(history, PodUsageHistory)
        samples = history[("default", "p0")]
        for method in Aggregation:
            assert history.aggregate(("default", "p0"), method) == aggregate_usage(samples, method)
