"""``scaler replay``: traces, policies, the simulated cluster, and the replay of a few hours.

The clusters here are small (a handful of nodes, a few hours of 5-minute steps) so that the
whole file runs in seconds; the month-long Bitbrains replay is measured by hand (README).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import tarfile
from collections.abc import Sequence
from pathlib import Path

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaler.cmdline import UsageError, bundled_example
from scaler.config import ScalerConfig
from scaler.engine import evaluate
from scaler.model.profiles import HOURS, WorkloadProfile
from scaler.model.records import NodeMetrics, Pod, PodMetrics
from scaler.model.snapshot import ClusterSnapshot
from scaler.prices import PriceError, bundled_prices, load_prices
from scaler.replay import cli as replay_cli
from scaler.replay.bundled import BUNDLED_NAME, KNOWN_SNAPSHOTS, derive_bundled_map, known_map
from scaler.replay.inputs import MappingError, build_grid, load_trace_map, map_pods, usage_table
from scaler.replay.policies import DEFAULT_POLICIES, PolicyError, parse_policies
from scaler.replay.simulate import ReplayInput, run_policies, run_policy
from scaler.replay.traces import Series, Trace, TraceError, load_trace, resample
from scaler.replay.world import LABEL_INSTANCE_TYPE, World
from scaler.sources.files import load_snapshot
from scaler.utilization import unknown_usage
from tests.builders import GI, MI, make_controller, make_node, make_pod, owner_ref

T0 = 1_700_000_000.0  # a Tuesday, 22:13:20 UTC; the replay grid starts here
STEP = 300.0
BITBRAINS_TAR = Path(__file__).resolve().parents[2] / "shared/data/raw/bitbrains-rnd-2013/rnd-2013-7.tar.gz"
DAY1 = str(bundled_example())  # the bundled example the test traces name pods of


# ---- a small cluster ------------------------------------------------------------------------------

def _node(name: str, **kw: object) -> object:
    return make_node(
        name, cpu_m=4000, mem=16 * GI, pool="pool-a", labels={LABEL_INSTANCE_TYPE: "e2-standard-4"}, **kw
    )


def small_cluster(extra_pods: Sequence[Pod] = ()) -> ClusterSnapshot:
    """Four 4-CPU nodes: n1 and n2 run ``web`` (2 replicas each), n3 runs ``batch`` (1 replica),
    n4 only its DaemonSet pod. Every node has a DaemonSet pod."""
    nodes = [_node(f"n{i}", creation_ts=T0 - 86400) for i in range(1, 5)]
    pods: list[Pod] = []
    for i in range(1, 5):
        pods.append(
            make_pod(
                f"ds-n{i}", node=f"n{i}", cpu_m=100, mem=128 * MI, owner_kind="DaemonSet", owner_name="ds"
            )
        )
    for k, node in enumerate(["n1", "n1", "n2", "n2"]):
        pods.append(
            make_pod(
                f"web-abc-{k}", node=node, cpu_m=1000, mem=2 * GI, owner_name="web-abc", labels={"app": "web"}
            )
        )
    pods.append(
        make_pod("batch-x-0", node="n3", cpu_m=1000, mem=2 * GI, owner_name="batch-x", labels={"app": "b"})
    )
    pods.extend(extra_pods)
    pods = [msgspec.structs.replace(p, creation_ts=T0 - 86400) for p in pods]
    controllers = [
        make_controller("ReplicaSet", "web-abc", replicas=4, owner=owner_ref("Deployment", "web")),
        make_controller("Deployment", "web", replicas=4),
        make_controller("ReplicaSet", "batch-x", replicas=1, owner=owner_ref("Deployment", "batch")),
        make_controller("Deployment", "batch", replicas=1),
        make_controller("DaemonSet", "ds"),
    ]
    node_metrics = [NodeMetrics(n.name, T0, 30, 300, 1 * GI) for n in nodes]
    pod_metrics = [PodMetrics(p.namespace, p.name, T0, 30, 10, 50 * MI) for p in pods]
    return ClusterSnapshot.create(
        T0, nodes, pods, controllers=controllers, node_metrics=node_metrics, pod_metrics=pod_metrics
    )


def constant_trace(values: dict[str, list[tuple[float, float]]], steps: int) -> Trace:
    """A long-format trace: series name → per-step (cpu millicores, memory bytes)."""
    times = T0 + STEP * np.arange(steps, dtype=np.float64)
    series = {}
    for name, vals in values.items():
        cpu = np.array([v[0] for v in vals], dtype=np.float64)
        mem = np.array([v[1] for v in vals], dtype=np.float64)
        series[name] = Series(times[: len(vals)].copy(), cpu, mem)
    return Trace("long", "test", series)


def replay_input(snapshot: ClusterSnapshot, trace: Trace, steps: int, **kw: object) -> ReplayInput:
    pod_series = map_pods(snapshot, trace)
    used = set(pod_series.values())
    grid = build_grid(trace, used, T0, T0 + steps * STEP, STEP)
    return ReplayInput(
        snapshot, usage_table(trace, used, grid), pod_series, STEP, prices=bundled_prices(), **kw
    )  # type: ignore[arg-type]


def idle_trace(steps: int) -> Trace:
    return constant_trace(
        {"default/web": [(50.0, 256 * MI)] * steps, "default/batch": [(50.0, 256 * MI)] * steps}, steps
    )


# ---- traces ----------------------------------------------------------------------------------------


def test_long_csv_reads_unix_and_rfc3339_sums_duplicates_and_sorts(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text(
        "timestamp,namespace,pod_or_workload,cpu_cores,memory_bytes,extra\n"
        "1700000300,shop,web,0.5,100,x\n"
        "2023-11-14T22:13:20Z,shop,web,0.25,1000,x\n"
        "1700000300,shop,web,0.5,100,x\n"
    )
    tr = load_trace(f)
    assert tr.kind == "long"
    s = tr.series["shop/web"]
    assert s.times.tolist() == [T0, T0 + 300]
    assert s.cpu_millicores.tolist() == [250.0, 1000.0]  # duplicates (containers) are added up
    assert s.memory_bytes.tolist() == [1000.0, 200.0]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("1700000000,shop,web,abc,1", "t.csv:3: cpu_cores 'abc' is not a number"),
        ("yesterday,shop,web,1,1", "t.csv:3: timestamp 'yesterday' is not Unix seconds or RFC 3339"),
        ("1700000000,,web,1,1", "t.csv:3: empty namespace"),
        ("1700000000,shop,web,1,-5", "t.csv:3: memory_bytes '-5' must be a finite number >= 0"),
        ("1700000000,shop,web", "t.csv:3: expected 5 fields, got 3"),
    ],
)
def test_malformed_long_row_names_file_and_line(tmp_path: Path, row: str, message: str) -> None:
    f = tmp_path / "t.csv"
    f.write_text(
        f"timestamp,namespace,pod_or_workload,cpu_cores,memory_bytes\n1700000000,shop,web,1,1\n{row}\n"
    )
    with pytest.raises(TraceError) as e:
        load_trace(f)
    assert message in str(e.value)


def test_long_csv_missing_column_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("timestamp,namespace,pod,cpu_cores,memory_bytes\n1,a,b,1,1\n")
    with pytest.raises(TraceError, match=r"t.csv:1: missing column\(s\) pod_or_workload"):
        load_trace(f)


def test_long_parquet_matches_csv(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table(
        {
            "timestamp": [T0, T0 + 300],
            "namespace": ["shop", "shop"],
            "pod_or_workload": ["web", "web"],
            "cpu_cores": [0.5, 1.5],
            "memory_bytes": [1e9, 2e9],
        }
    )
    pq.write_table(table, tmp_path / "t.parquet")
    s = load_trace(tmp_path / "t.parquet").series["shop/web"]
    assert s.cpu_millicores.tolist() == [500.0, 1500.0]
    bad = pa.table({**{c: table.column(c) for c in table.column_names}, "cpu_cores": [0.5, float("nan")]})
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(TraceError, match=r"bad.parquet:3: cpu_cores"):
        load_trace(tmp_path / "bad.parquet")


BB_HEADER = (
    "Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\tCPU usage [MHZ];\tCPU usage [%];\t"
    "Memory capacity provisioned [KB];\tMemory usage [KB];\tDisk read throughput [KB/s];\t"
    "Disk write throughput [KB/s];\tNetwork received throughput [KB/s];\tNetwork transmitted throughput [KB/s]\n"
)


def _bb_row(t: int, cores: int, cap: float, use: float, mem_kb: float) -> str:
    return f"{t};\t{cores};\t{cap};\t{use};\t{use / cap * 100 if cap else 0.0};\t8000000.0;\t{mem_kb};\t0;\t0;\t0;\t0\n"


def test_bitbrains_archive_seconds_quirk_cores_and_duplicates(tmp_path: Path) -> None:
    archive = tmp_path / "rnd.tar.gz"
    files = {
        "2013-7/1.csv": BB_HEADER
        + _bb_row(1372629804, 2, 5200.0, 1300.0, 1024.0)
        # a duplicate timestamp: the last row wins
        + _bb_row(1372630104, 2, 5200.0, 2600.0, 2048.0)
        + _bb_row(1372630104, 2, 5200.0, 5200.0, 4096.0),
        "2013-7/2.csv": BB_HEADER + _bb_row(1372629804, 0, 0.0, 0.0, 1.0),  # 0 cores: skipped
    }
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    tr = load_trace(archive)
    assert tr.kind == "bitbrains" and set(tr.series) == {"1"} and tr.skipped_rows == 1
    s = tr.series["1"]
    assert s.times.tolist() == [1372629804.0, 1372630104.0]  # "[ms]" holds seconds
    # 1300 MHz of 2 cores at 2600 MHz each: 0.5 core.
    assert s.cpu_millicores.tolist() == [500.0, 2000.0]
    assert s.memory_bytes.tolist() == [1024.0 * 1024, 4096.0 * 1024]


def test_bitbrains_malformed_row_names_file_and_line(tmp_path: Path) -> None:
    d = tmp_path / "vms"
    d.mkdir()
    (d / "7.csv").write_text(
        BB_HEADER + _bb_row(1372629804, 2, 5200.0, 1300.0, 1024.0) + "1372630104;\t2;\tx\n"
    )
    with pytest.raises(TraceError, match=r"7.csv:3: expected at least 7"):
        load_trace(d)
    (d / "7.csv").write_text(BB_HEADER + "1372630104;\t2;\tfast;\t1;\t1;\t1;\t1;\t0;\t0;\t0;\t0\n")
    with pytest.raises(TraceError, match=r"7.csv:2: not a number: 'fast'"):
        load_trace(d)


_BB_JUNK = st.sampled_from(["", " ", "x", "1e400", "nan", "-inf", "-1", "5e-324", "1e308"])
_BB_NUMBER = st.one_of(
    st.sampled_from(["0", "0.0", "-0.0", "1", "2", "4", "\t4", " 12 ", "1.6703488E7", "2600.0"]),
    st.integers(0, 2_000_000_000).map(str),
    st.floats(min_value=0, max_value=1e12).map(repr),
)
_BB_ROW = st.lists(
    st.one_of(_BB_NUMBER, _BB_NUMBER, _BB_NUMBER, _BB_NUMBER, _BB_JUNK), min_size=7, max_size=11
).map(";\t".join)
_BB_LINE = st.one_of(
    _BB_ROW,
    _BB_ROW,
    _BB_ROW,
    st.lists(_BB_NUMBER, min_size=0, max_size=6).map(";".join),
    st.sampled_from(["", "  ", BB_HEADER.rstrip("\n")]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_BB_LINE, min_size=0, max_size=6), st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_bitbrains_columnar_reader_equals_the_row_reader(lines: list[str], newline: str, ended: bool) -> None:
    """The columnar reader (pyarrow) gives exactly the row reader's series and skipped rows
    whenever it accepts a file, and hands the file to the row reader otherwise, so that errors
    still name the line and every accepted value is the same to the bit."""
    from scaler.replay import traces

    text = newline.join(lines) + (newline if ended else "")
    fast = traces._parse_bitbrains_columnar(text.encode())
    try:
        slow: tuple[Series, int] | None = traces._parse_bitbrains(text, "t.csv")
    except TraceError:
        slow = None
    if fast is None:
        return  # the row reader decides (and names the line)
    assert slow is not None, f"the columnar reader accepted what the row reader refuses: {text!r}"
    assert fast[1] == slow[1]
    for name in ("times", "cpu_millicores", "memory_bytes"):
        a, b = getattr(fast[0], name), getattr(slow[0], name)
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), name


def test_bitbrains_columnar_reader_takes_the_real_trace_and_the_row_reader_its_errors() -> None:
    """A well-formed file goes the columnar way (not the row reader's); the malformed ones of
    the test above go row by row."""
    from scaler.replay import traces

    good = BB_HEADER + _bb_row(1372629804, 2, 5200.0, 1300.0, 1024.0) + _bb_row(1372630104, 0, 0.0, 0.0, 1.0)
    fast = traces._parse_bitbrains_columnar(good.encode())
    assert fast is not None and fast[1] == 1 and fast[0].cpu_millicores.tolist() == [500.0]
    assert traces._parse_bitbrains_columnar((good + "1372630104;\t2;\tx\n").encode()) is None


def test_resample_holds_the_last_sample_and_the_first_before_it() -> None:
    s = Series(np.array([100.0, 200.0]), np.array([1.0, 2.0]), np.array([10.0, 20.0]))
    cpu, mem = resample(s, np.array([50.0, 100.0, 150.0, 200.0, 999.0]))
    assert cpu.tolist() == [1.0, 1.0, 1.0, 2.0, 2.0]
    assert mem.tolist() == [10.0, 10.0, 10.0, 20.0, 20.0]


# ---- mapping, policies, prices --------------------------------------------------------------------


def test_pods_follow_pod_then_workload_series_and_annotations() -> None:
    annotated = make_pod(
        "odd-0", node="n4", owner_name="odd", annotations={"scaler.io/replay-series": "default/batch"}
    )
    snap = small_cluster([annotated])
    tr = constant_trace(
        {"default/web": [(1, 1)], "default/batch": [(1, 1)], "default/web-abc-0": [(2, 2)]}, 1
    )
    m = map_pods(snap, tr)
    assert m["default/web-abc-0"] == "default/web-abc-0"  # the pod's own series wins
    assert m["default/web-abc-1"] == "default/web"  # else its Deployment's
    assert m["default/batch-x-0"] == "default/batch"
    assert m["default/odd-0"] == "default/batch"
    assert "default/ds-n1" not in m
    with pytest.raises(MappingError, match="no pod of the snapshot follows"):
        map_pods(snap, constant_trace({"other/x": [(1, 1)]}, 1))


def test_trace_map_file(tmp_path: Path) -> None:
    f = tmp_path / "map.csv"
    f.write_text("namespace,pod,series\nshop,web-1,42\n\n")
    assert load_trace_map(f) == {"shop/web-1": "42"}
    f.write_text("namespace,pod,series\nshop,,42\n")
    with pytest.raises(MappingError, match=r"map.csv:2: namespace, pod and series"):
        load_trace_map(f)


def test_builtin_policies() -> None:
    ps = {p.name: p for p in parse_policies([",".join(DEFAULT_POLICIES)])}
    assert list(ps) == list(DEFAULT_POLICIES)
    ca = ps["ca-requests"].config
    assert ca.utilization_source == "requests" and ca.scale_down_utilization_threshold == 0.5
    assert ca.filter_plugins == ()
    assert ps["ca-usage"].usage_window == 0 and ps["ca-usage"].config.target_cpu_usage == 0.45
    assert ps["scaler"].usage_window is None and ps["scaler"].config.usage_aggregation == "p95"
    assert ps["scaler-portrait"].portrait and not ps["scaler"].portrait
    assert "ResourceBalanceOnPortrait" in ps["scaler-portrait"].config.score_plugins


def test_every_builtin_policy_is_explained_and_seed_is_the_former_name_of_ca_usage() -> None:
    from scaler.replay.policies import BUILTIN_POLICIES, POLICY_HELP

    assert list(POLICY_HELP) == list(BUILTIN_POLICIES)
    (former,) = parse_policies(["seed"])
    assert former.name == "ca-usage" and former.flags == parse_policies(["ca-usage"])[0].flags
    assert "modified cluster-autoscaler" in former.description and "seed" not in former.description
    with pytest.raises(PolicyError, match=r"policy 'ca-usage' is listed twice \(seed is its former name\)"):
        parse_policies(["seed,ca-usage"])


def test_user_policies_with_commas_and_errors() -> None:
    ps = parse_policies(
        ["scaler,tight=--target-cpu-usage=0.3;--filter-plugins=TargetUsage,MostHeadroom", "none"]
    )
    assert [p.name for p in ps] == ["scaler", "tight", "none"]
    assert ps[1].config.target_cpu_usage == 0.3
    assert ps[1].config.filter_plugins == ("TargetUsage", "MostHeadroom")
    assert not ps[2].scale_down
    base = parse_policies(["x=--usage-window=2m"], {"scale-down-unneeded-time": "20m"})[0]
    assert base.usage_window == 120 and base.config.scale_down_unneeded_time == 1200
    with pytest.raises(PolicyError, match=r"policy 'bad'.*no-such-flag"):
        parse_policies(["bad=--no-such-flag=1"])
    with pytest.raises(PolicyError, match=r"policy 'bad'.*target-cpu-usage"):
        parse_policies(["bad=--target-cpu-usage=7"])
    with pytest.raises(PolicyError, match="unknown policy 'sead'"):
        parse_policies(["sead"])
    with pytest.raises(PolicyError, match="listed twice"):
        parse_policies(["seed,seed"])
    with pytest.raises(PolicyError, match="built-in"):
        parse_policies(["seed=--target-cpu-usage=0.3"])


def test_prices_bundled_and_overridden(tmp_path: Path) -> None:
    p = bundled_prices()
    assert p["n1-standard-8"] == pytest.approx(0.38) and p["n2-highmem-4"] == pytest.approx(0.262028)
    f = tmp_path / "p.yaml"
    f.write_text("prices:\n  n1-standard-8: 0.1\n  my-type: 1.5\n")
    merged = load_prices(f)
    assert merged["n1-standard-8"] == 0.1 and merged["my-type"] == 1.5 and merged["e2-standard-4"] > 0
    f.write_text("n1-standard-8: cheap\n")
    with pytest.raises(PriceError, match=r"p.yaml: price of 'n1-standard-8'"):
        load_prices(f)


def test_shipped_maps_cover_the_snapshots_trace_pods() -> None:
    m = known_map(BUNDLED_NAME)
    assert len(m) == 410
    snap = load_snapshot([bundled_example()])
    keys = {p.key for p in snap.pods}
    assert set(m) <= keys
    assert len(set(m.values())) == 410
    for name in KNOWN_SNAPSHOTS:
        assert known_map(name)
    assert known_map("something-else") == {}


@pytest.mark.skipif(not BITBRAINS_TAR.exists(), reason="the Bitbrains trace (../shared/data) is not here")
def test_bundled_map_is_rederived_and_verified_from_the_trace() -> None:
    assert derive_bundled_map(BITBRAINS_TAR, bundled_example()) == known_map(BUNDLED_NAME)


# ---- the world ------------------------------------------------------------------------------------


def test_world_usage_overhead_and_snapshot_metrics() -> None:
    snap = small_cluster()
    tr = constant_trace({"default/web": [(500.0, GI), (700.0, GI)], "default/batch": [(100.0, GI)] * 2}, 2)
    inp = replay_input(snap, tr, 2)
    w = World(inp.snapshot, inp.usage, inp.pod_series, parse_policies(["scaler"])[0].config)
    # n1: overhead 300m - 3 pods x 10m = 270m, plus its DaemonSet pod (10m), plus 2 web pods.
    names, cpu, _ = w.node_usage()
    assert names == ["n1", "n2", "n3", "n4"]
    assert cpu.tolist() == [270 + 10 + 1000, 270 + 10 + 1000, 280 + 10 + 100, 290 + 10]
    w.advance(1)
    s = w.snapshot()
    assert s.now == T0 + STEP and s.node_metrics["n1"].cpu_millicores == 270 + 10 + 1400
    assert s.node_metrics["n1"].timestamp == s.now


def test_world_moves_pod_start_times_with_the_snapshot() -> None:
    """A snapshot taken long after the trace is moved back to the replay's start, pod start times
    included: its pods are in their nodes' metrics, not all of them forever "not yet in them"."""
    year = 365 * 86400.0
    base = small_cluster()
    pods = [msgspec.structs.replace(p, start_ts=T0 + year - 3600) for p in base.pods]
    node_metrics = [msgspec.structs.replace(m, timestamp=T0 + year) for m in base.node_metrics.values()]
    snap = ClusterSnapshot.create(
        T0 + year, base.nodes, pods, controllers=base.controllers.values(), node_metrics=node_metrics,
        pod_metrics=[msgspec.structs.replace(m, timestamp=T0 + year) for m in base.pod_metrics.values()],
    )  # fmt: skip
    inp = replay_input(snap, idle_trace(2), 2)
    w = World(inp.snapshot, inp.usage, inp.pod_series, parse_policies(["scaler"])[0].config)
    ev = evaluate(w.snapshot(), ScalerConfig())
    assert [r.utilization.pods_not_in_metrics for r in ev.nodes] == [0, 0, 0, 0]
    assert all(p.start_ts is not None and p.start_ts < w.now for p in w.pods.values())


def test_scheduler_places_evicted_pods_least_allocated_and_scale_up_adds_a_node() -> None:
    snap = small_cluster()
    tr = idle_trace(3)
    inp = replay_input(snap, tr, 3)
    w = World(
        inp.snapshot, inp.usage, inp.pod_series, parse_policies(["scaler"])[0].config, provision_delay=120
    )
    web0 = next(p for p in w.pods.values() if p.name == "web-abc-0")
    w.mark_to_be_deleted("n1", w.now, "scaler")
    assert w.evict(web0).ok and web0.uid in w.pending
    w.schedule_pending()
    # n4 is the least allocated (only its DaemonSet pod); n1 is tainted.
    assert w.pods[web0.uid].node_name == "n4" and not w.pending
    # A pod too big for any free room waits for a new node of its pool.
    big = make_pod("big-0", node="", cpu_m=3500, mem=GI, owner_name="batch-x", phase="Pending")
    w.pods[big.uid] = big
    w.pending[big.uid] = w.now
    w.schedule_pending()
    assert big.uid in w.pending
    assert w.scale_up() == 1 and w.scale_up() == 0  # the node being provisioned covers it
    w.advance(1)  # 5 minutes later: the node joined (after 2 minutes) and the pod runs there
    assert not w.pending and w.stats.nodes_added == 1
    new = w.pods[big.uid].node_name
    assert new.startswith("n-r") or new.endswith("r001")
    assert w.nodes[new].creation_ts == T0 + 120
    assert any(p.is_daemonset and p.node_name == new for p in w.pods.values())
    # A pod no node of any pool could hold is unschedulable: no scale-up.
    huge = make_pod("huge-0", node="", cpu_m=64000, mem=GI, owner_name="batch-x", phase="Pending")
    w.pods[huge.uid] = huge
    w.pending[huge.uid] = w.now
    assert w.scale_up() == 0 and "default/huge-0" in w.stats.unschedulable_pods


def test_scheduler_plugins_add_the_policy_filters_and_fall_back_to_requests() -> None:
    # n4 is the least requested node but busy: 3 of its 4 cores are used by the node itself.
    snap = small_cluster()
    snap = dataclasses.replace(
        snap, node_metrics={**snap.node_metrics, "n4": NodeMetrics("n4", T0, 30, 3000, GI)}
    )
    inp = replay_input(snap, idle_trace(2), 2)
    by_requests = parse_policies(["scaler"])[0]
    with_plugins = parse_policies(["s=--scheduler-plugins"])[0]
    assert not by_requests.scheduler_plugins and with_plugins.scheduler_plugins
    landed = {}
    for policy in (by_requests, with_plugins):
        w = World(
            inp.snapshot, inp.usage, inp.pod_series, policy.config, scheduler_plugins=policy.scheduler_plugins
        )
        web0 = next(p for p in w.pods.values() if p.name == "web-abc-0")
        w.mark_to_be_deleted("n1", w.now, "scaler")
        w.evict(web0)
        w.schedule_pending()
        # 2.5 cores: above 45% of any node, so TargetUsage refuses it everywhere.
        big = make_pod("big-0", node="", cpu_m=2500, mem=GI, owner_name="batch-x", phase="Pending")
        w.pods[big.uid] = big
        w.pending[big.uid] = w.now
        w.schedule_pending()
        landed[policy.name] = (w.pods[web0.uid].node_name, w.pods[big.uid].node_name)
    # By requests, the web pod lands on n4 (least allocated), then the big one on n3. With
    # TargetUsage in the scheduler, the web pod avoids the busy n4 (n3 is the least allocated
    # of the rest); the big pod, refused by TargetUsage everywhere, is placed by the built-in
    # filters (least allocated: n4) rather than left pending.
    assert landed["scaler"] == ("n4", "n3")
    assert landed["s"] == ("n3", "n4")
    with pytest.raises(PolicyError, match="--scheduler-plugins"):
        parse_policies(["s=--scheduler-plugins=maybe"])


def test_scheduler_plugins_see_the_attached_workload_profiles() -> None:
    # n4 is the least requested node but uses 3.1 of its 4 cores. With profiles, the portrait
    # filter (target 1.0) floors n4's current hour by that usage and refuses the web pod there;
    # without them it checks requests only, and the pod goes to n4 by LeastAllocated.
    snap = small_cluster()
    snap = dataclasses.replace(
        snap, node_metrics={**snap.node_metrics, "n4": NodeMetrics("n4", T0, 30, 3100, GI)}
    )
    inp = replay_input(snap, idle_trace(2), 2)
    policy = parse_policies(
        ["p=--filter-plugins=PodFitsResourceOnPortrait;--portrait-target-cpu-usage=1.0;--scheduler-plugins"]
    )[0]
    zero = tuple(0.0 for _ in range(HOURS))
    none = tuple(0 for _ in range(HOURS))
    unrelated = WorkloadProfile("other/Deployment/x", zero, zero, zero, zero, zero, zero, none, none)
    seen: list[float] = []

    def attach(s: ClusterSnapshot) -> ClusterSnapshot:
        seen.append(s.now)
        return dataclasses.replace(s, workload_profiles={unrelated.key: unrelated})

    landed = []
    for hook in (None, attach):
        w = World(inp.snapshot, inp.usage, inp.pod_series, policy.config, scheduler_plugins=True, attach=hook)
        web0 = next(p for p in w.pods.values() if p.name == "web-abc-0")
        w.mark_to_be_deleted("n1", w.now, "scaler")
        w.evict(web0)
        w.schedule_pending()
        landed.append(w.pods[web0.uid].node_name)
    assert landed == ["n4", "n3"] and seen == [T0]


# ---- replays ----------------------------------------------------------------------------------------


def test_replay_removes_idle_nodes_after_the_unneeded_time_and_counts_node_hours() -> None:
    steps = 36  # 3 hours
    inp = replay_input(small_cluster(), idle_trace(steps), steps)
    by = {r.name: r for r in run_policies(inp, parse_policies(["ca-requests,seed,scaler,none"]), processes=1)}
    none = by["none"]
    assert none.node_hours == pytest.approx(4 * 3.0) and none.nodes_removed == 0
    assert none.cost == pytest.approx(4 * 3.0 * bundled_prices()["e2-standard-4"])
    scaler = by["scaler"]
    # Unneeded from step 0, deletable once 10 minutes have passed: at step 2.
    assert scaler.nodes[:3] == [4, 4, scaler.nodes[2]] and scaler.nodes[2] < 4
    assert scaler.nodes_removed >= 1 and scaler.node_hours < none.node_hours
    assert scaler.overload_node_minutes == 0 and scaler.unplaceable_pods == 0
    assert scaler.events == {"ScaleDown": 2 * scaler.nodes_removed}  # "marked" and "removed" per node
    # n4 (empty) and n3 (its batch pod moves) go at step 2; n1 and n2 cannot take each other's
    # web pods by requests. The evicted pod runs again: nothing was lost.
    assert scaler.nodes[2:] == [2] * (steps - 2)
    assert scaler.pods_evicted == 1 and scaler.pods_deleted == 0
    assert scaler.node_hours == pytest.approx(4 * 2 / 12 + 2 * 34 / 12)
    # cluster-autoscaler by requests: the same two (n3 is 27.5% requested, n1 and n2 52.5%).
    assert by["ca-requests"].nodes == scaler.nodes


def overload_input() -> ReplayInput:
    """12 steps of :func:`small_cluster`: batch uses 3.9 cores (n3 allocatable 4), above 100%
    with the DaemonSet pod and overhead, for 3 steps (4-6); web's memory reaches 8 GiB per pod
    (n1, n2: 2 pods: > 95% of 16 GiB) for 2 (8-9)."""
    steps = 12
    batch = [(50.0, MI)] * 4 + [(3900.0, MI)] * 3 + [(50.0, MI)] * 5
    web = [(50.0, MI)] * 8 + [(50.0, 8 * GI)] * 2 + [(50.0, MI)] * 2
    return replay_input(
        small_cluster(), constant_trace({"default/web": web, "default/batch": batch}, steps), steps
    )


def test_overload_minutes_count_nodes_above_cpu_or_memory() -> None:
    none = run_policy(overload_input(), parse_policies(["none"])[0])
    assert none.overload_cpu_node_minutes == 3 * 5
    assert none.overload_memory_node_minutes == 2 * 2 * 5
    assert none.overload_node_minutes == (3 + 4) * 5
    assert none.overloaded == [0, 0, 0, 0, 1, 1, 1, 0, 2, 2, 0, 0]


def test_cpu_is_capped_at_the_pod_limit_and_memory_above_the_limit_is_an_oom_kill() -> None:
    """A pod's usage is its demand capped at its limits: CPU above the limit is throttled (a
    risk figure, not node load), memory above it OOM-kills the pod once per step, and the pod
    goes on following its series."""
    steps = 4
    base = small_cluster()
    pods = [
        msgspec.structs.replace(p, cpu_limit_millicores=1000, memory_limit_bytes=2 * GI)
        if p.name.startswith("web")
        else p
        for p in base.pods
    ]
    fresh = ClusterSnapshot.create(base.now, base.nodes, pods)
    snap = dataclasses.replace(base, pods=fresh.pods, pods_by_node=fresh.pods_by_node)
    # web demands 3.9 cores per pod (limit 1) for two steps; 3 GiB (limit 2) in the last step.
    web = [(3900.0, GI), (3900.0, GI), (500.0, GI), (500.0, 3 * GI)]
    inp = replay_input(
        snap, constant_trace({"default/web": web, "default/batch": [(50.0, MI)] * steps}, steps), steps
    )
    w = World(
        inp.snapshot, inp.usage, inp.pod_series, parse_policies(["none"])[0].config, with_pod_metrics=True
    )
    names, cpu, mem = w.node_usage()
    assert cpu[names.index("n1")] == 270 + 10 + 2 * 1000, "two web pods capped at 1 core each"
    assert w.limit_effects() == (4 * 2900.0, 0), "four web pods, 2.9 cores each above the limit"
    assert w.snapshot().pod_metrics[("default", "web-abc-0")].cpu_millicores == 1000
    w.advance(3)
    names, cpu, mem = w.node_usage()
    assert mem[names.index("n1")] == 1 * GI - 3 * 50 * MI + 50 * MI + 2 * 2 * GI, "memory held at the limit"
    assert w.limit_effects() == (0.0, 4), "each of the four web pods is OOM-killed"
    none = run_policy(inp, parse_policies(["none"])[0])
    assert none.throttled_cpu_core_minutes == 2 * 4 * 2.9 * STEP / 60
    assert none.oom_kills == 4
    assert none.overload_cpu_node_minutes == 0, "3.9 cores of demand per pod, but 1 core of use"


def test_seed_window_is_the_newest_sample_and_scaler_aggregates() -> None:
    # The web nodes (n1, n2) spike every 4th step (2 x 1.8 cores: 97% of a node). Between spikes
    # seed, which judges the newest sample alone, finds n1's web pods a place on n2 and n3 under
    # TargetUsage for three steps in a row and drains n1; at the next spike the node that took
    # a third web pod runs above 100% CPU. scaler's p95 over the 10-minute window keeps seeing
    # the spike, so n1 is never unneeded for 10 minutes; only the empty n4 goes.
    steps = 16
    web = [(1800.0, MI) if k % 4 == 0 else (10.0, MI) for k in range(steps)]
    tr = constant_trace({"default/web": web, "default/batch": [(10.0, MI)] * steps}, steps)
    inp = replay_input(small_cluster(), tr, steps)
    by = {r.name: r for r in run_policies(inp, parse_policies(["ca-usage,scaler,none"]), processes=1)}
    seed, scaler, none = by["ca-usage"], by["scaler"], by["none"]
    assert seed.nodes_removed == 2 and seed.pods_evicted == 2 and seed.nodes[3:] == [2] * (steps - 3)
    assert scaler.nodes_removed == 1 and scaler.pods_evicted == 0
    assert none.overload_node_minutes == scaler.overload_node_minutes == 0
    assert seed.overload_cpu_node_minutes == 3 * 5  # the spikes at steps 4, 8 and 12


def test_pending_pod_at_start_triggers_a_scale_up_after_the_provision_delay() -> None:
    pending = make_pod("batch-x-1", node="", cpu_m=3500, mem=GI, owner_name="batch-x", phase="Pending")
    filler = make_pod("web-abc-9", node="n4", cpu_m=1000, mem=GI, owner_name="web-abc")
    steps = 6
    inp = replay_input(small_cluster([pending, filler]), idle_trace(steps), steps, provision_delay=600.0)
    r = run_policy(inp, parse_policies(["none"])[0])
    assert r.nodes_added == 1 and r.unplaceable_pods == 1
    # Requested at step 0, billed from then, joined 10 minutes later; pending until step 2.
    assert r.nodes == [5] * steps
    assert r.pending_pod_minutes == pytest.approx(10.0)


# ---- the command ---------------------------------------------------------------------------------


def _bundled_trace(tmp_path: Path, hours: int = 1) -> Path:
    """A long-format trace for three workloads of the bundled snapshot (per-replica usage)."""
    rows = ["timestamp,namespace,pod_or_workload,cpu_cores,memory_bytes"]
    for k in range(hours * 12):
        t = 1_793_577_600 + k * 300  # 2026-11-02T00:00Z
        rows.append(f"{t},catalog,catalog-svc001,{0.05 + 0.01 * k},{300 * MI}")
        rows.append(f"{t},checkout,checkout-svc008,0.02,{200 * MI}")
        rows.append(f"{t},internal-tools,internal-svc007,0.01,{100 * MI}")
    f = tmp_path / "trace.csv"
    f.write_text("\n".join(rows) + "\n")
    return f


def _run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scaler")
    sub = parser.add_subparsers(dest="command")
    replay_cli.add_parser(sub)
    workers = [] if "--workers" in argv or "--processes" in argv else ["--workers", "1"]  # no Ray start
    return replay_cli.run(parser.parse_args(["replay", *argv, *workers]))


def test_cli_json_on_the_bundled_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _bundled_trace(tmp_path)
    out = tmp_path / "r.json"
    code = _run_cli(
        ["--snapshot", DAY1, "--trace", str(trace), "--policies", "seed,scaler", "-o", "json", "--out", str(out), "-q"]
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert report["kind"] == "ReplayReport" and report["steps"] == 12
    assert [p["name"] for p in report["policies"]] == ["ca-usage", "scaler"]  # seed: its former name
    assert report["trace"]["podsFollowingTrace"] >= 3
    base = report["baseline"]
    assert base["nodeHours"] == pytest.approx(94 * 1.0)
    assert base["costUsd"] == pytest.approx(91 * 0.38 + 3 * 0.262028, rel=1e-3)
    for p in report["policies"]:
        assert p["nodeHours"] <= base["nodeHours"] and len(p["timeline"]["nodes"]) == 12
    assert "scaler replay" in capsys.readouterr().out  # the table is printed too


def test_cli_bad_input_is_one_line_naming_the_value(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "timestamp,namespace,pod_or_workload,cpu_cores,memory_bytes\n1,catalog,x,1,1\n2,catalog,x,one,1\n"
    )
    with pytest.raises(UsageError, match=r"bad.csv:3: cpu_cores 'one' is not a number"):
        _run_cli(["--snapshot", DAY1, "--trace", str(bad), "-q"])
    trace = _bundled_trace(tmp_path)
    with pytest.raises(UsageError, match="unknown policy 'nope'"):
        _run_cli(["--snapshot", DAY1, "--trace", str(trace), "--policies", "nope", "-q"])
    with pytest.raises(UsageError, match="--step: not a duration: 'soon'"):
        _run_cli(["--snapshot", DAY1, "--trace", str(trace), "--step", "soon", "-q"])
    with pytest.raises(UsageError, match="--output html needs --out"):
        _run_cli(["--snapshot", DAY1, "--trace", str(trace), "-o", "html", "-q"])
    with pytest.raises(UsageError, match="policy 'x': unknown filter plugin 'Nope'"):
        _run_cli(["--snapshot", DAY1, "--trace", str(trace), "--policies", "x=--filter-plugins=Nope", "-q"])
    with pytest.raises(UsageError, match="no such file"):
        _run_cli(["--snapshot", DAY1, "--trace", str(tmp_path / "missing.csv"), "-q"])


def test_incremental_profiles_equal_a_full_rebuild() -> None:
    # Three days of noisy usage, profiles over one day rebuilt every hour (and once off the
    # hour): recomputing only the hours the window moved over gives the full rebuild's figures.
    from scaler.replay.simulate import _Profiles

    steps = 3 * 288
    rng = np.random.default_rng(7)
    cpu, mem = rng.uniform(10, 900, steps), rng.uniform(1e8, 3e9, steps)
    web = [(float(x), float(y)) for x, y in zip(cpu, mem, strict=True)]
    batch = [(float(x), 5e8) for x in rng.uniform(0, 2000, steps - 30)]  # starts 30 steps late
    tr = constant_trace({"default/web": web, "default/batch": []}, steps)
    tr.series["default/batch"] = Series(
        T0 + STEP * np.arange(30, steps, dtype=np.float64),
        np.array([c for c, _ in batch]),
        np.array([m for _, m in batch]),
    )
    inp = replay_input(small_cluster(), tr, steps)
    cfg = parse_policies(["scaler"])[0].config
    worlds = [World(inp.snapshot, inp.usage, inp.pod_series, cfg) for _ in range(2)]
    fast = _Profiles(worlds[0], 1.0, 3600.0)
    full = _Profiles(worlds[1], 1.0, 3600.0, incremental=False)
    compared = 0
    for k in range(0, steps, 7):
        for w in worlds:
            w.advance(k)
        a = fast.attach(worlds[0].snapshot()).workload_profiles
        b = full.attach(worlds[1].snapshot()).workload_profiles
        assert a.keys() == b.keys()
        for key in a:
            for f in ("cpu_mean", "cpu_std", "cpu_peak", "memory_mean", "memory_std", "memory_peak"):
                assert getattr(a[key], f) == pytest.approx(getattr(b[key], f), rel=1e-12, abs=1e-9), (
                    k,
                    key,
                    f,
                )
            assert a[key].cpu_samples == b[key].cpu_samples
        compared += bool(a)
    assert compared > 20
    assert "default/Deployment/web" in a and "default/DaemonSet/ds" in a


def test_the_replay_worlds_pods_carry_every_field_the_live_decision_reads() -> None:
    """The actuator's verify lists the node's pods (``pods_on_node``) and parses them as it parses
    the API server's answer: every field it reads (expendable priority, DaemonSet owner, mirror
    annotation, terminal phase) and the pod's other metadata survive the round trip."""
    from scaler.actuation.actuator import _workload_pods
    from scaler.model.decode import parse_pod
    from scaler.model.records import QoSClass

    extra = [
        make_pod("low-prio", node="n4", priority=-20, owner_name="low", labels={"tier": "bg"},
                 qos_class=QoSClass.BEST_EFFORT, restart_policy="OnFailure", termination_grace_seconds=5,
                 start_ts=T0 - 600.5, deletion_ts=T0 - 1.25),
        make_pod("high-prio", node="n4", priority=1_000_000, owner_name="high"),
        make_pod("mirror", node="n4", owner_kind=None, annotations={"kubernetes.io/config.mirror": "x"}),
        make_pod("done", node="n4", owner_kind="Job", owner_name="j", phase="Succeeded"),
        make_pod("ds-annotated", node="n4", owner_kind=None, annotations={"cluster-autoscaler.kubernetes.io/daemonset-pod": "true"}),
    ]  # fmt: skip
    snap = small_cluster(extra)
    inp = replay_input(snap, idle_trace(2), 2)
    w = World(inp.snapshot, inp.usage, inp.pod_series, parse_policies(["scaler"])[0].config)
    objs = w.pods_on_node("n4")
    records = {p.key: p for p in w.pods.values() if p.node_name == "n4"}
    assert len(objs) == len(records) == 6
    for obj in objs:
        got = parse_pod(obj)
        want = records[got.key]
        for field in ("namespace", "name", "uid", "node_name", "labels", "annotations", "controller",
                      "phase", "priority", "qos_class", "restart_policy", "termination_grace_seconds",
                      "creation_ts", "deletion_ts", "start_ts"):  # fmt: skip
            assert getattr(got, field) == getattr(want, field), (got.key, field)
        assert (got.is_daemonset, got.is_mirror, got.is_terminal) == (want.is_daemonset, want.is_mirror, want.is_terminal)
    # The verify step: with the default cutoff (-10), only the high-priority pod blocks deletion.
    assert _workload_pods(objs, -10) == ["default/high-prio"]
    assert sorted(_workload_pods(objs, -30)) == ["default/high-prio", "default/low-prio"]


def test_prometheus_series_map_by_pod_then_by_the_workloads_mean() -> None:
    """Series of an export from Prometheus name pods. A pod with its own series from the start
    follows it; a pod replaced during the window (its series starts late) or without one follows
    its workload's mean over the pods that had a sample then, gone pods included (resolved by
    name); a pod of no workload with a series keeps its PodMetrics, and each is counted."""
    from scaler.replay.inputs import map_pods_by_pod_or_workload, with_workload_means

    steps = 10
    times = T0 + STEP * np.arange(steps, dtype=np.float64)

    def series(cpu: float, lo: int, hi: int) -> Series:
        return Series(times[lo:hi].copy(), np.full(hi - lo, cpu), np.full(hi - lo, float(GI)))

    trace = Trace(
        "long",
        "export.parquet",
        {
            "default/web-abc-0": series(100.0, 0, steps),
            "default/web-abc-1": series(300.0, 5, steps),  # replaced at step 5
            "default/web-abc-q8x7z": series(500.0, 0, 5),  # the pod it replaced, gone now
            "default/orphan-x1y2z": series(7.0, 0, steps),  # no workload the snapshot knows
        },
        meta={"source": "prometheus"},
    )
    snap = small_cluster()
    full, workloads = with_workload_means(trace, snap)
    assert workloads == {"default/web"}
    web = full.series["default/web"]
    assert web.times.tolist() == times.tolist()
    assert web.cpu_millicores.tolist() == [300.0] * 5 + [200.0] * 5  # (100 + 500) / 2, then (100 + 300) / 2
    match = map_pods_by_pod_or_workload(snap, full, workloads, T0, STEP)
    assert match.pod_series == {
        "default/web-abc-0": "default/web-abc-0",
        "default/web-abc-1": "default/web",
        "default/web-abc-2": "default/web",
        "default/web-abc-3": "default/web",
    }
    assert (match.by_pod, match.by_workload, match.without_series) == (1, 3, 5)  # batch and 4 DaemonSet pods


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(
        st.tuples(
            st.integers(1_700_000_000, 1_700_003_000),
            st.sampled_from(["shop", "db", "a-b"]),
            st.sampled_from(["web", "web-7d9c6b5f4-x2x9z", "db-0", " padded "]),
            st.floats(0, 64, allow_nan=False),
            st.floats(0, 2**40, allow_nan=False),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_columnar_long_format_reads_as_the_row_reader(tmp_path: Path, rows: list[tuple[int, str, str, float, float]]) -> None:
    """The columnar reader (pyarrow, CSV and Parquet) gives exactly the row reader's trace:
    the same series, times, and sums of duplicate rows (added in the same order)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from scaler.replay.traces import _load_long_csv_rows

    f = tmp_path / "p.csv"
    f.write_text("timestamp,namespace,pod_or_workload,cpu_cores,memory_bytes\n"
                 + "".join(f"{t},{ns},{pod},{c!r},{m!r}\n" for t, ns, pod, c, m in rows))  # fmt: skip
    want = _load_long_csv_rows(f)
    cols = list(zip(*rows, strict=True))
    pq.write_table(
        pa.table(dict(zip(("timestamp", "namespace", "pod_or_workload", "cpu_cores", "memory_bytes"), map(list, cols), strict=True))),
        tmp_path / "p.parquet",
    )  # fmt: skip
    for got in (load_trace(f), load_trace(tmp_path / "p.parquet")):
        assert sorted(got.series) == sorted(want.series)
        for name, s in want.series.items():
            g = got.series[name]
            assert g.times.tolist() == s.times.tolist()
            assert g.cpu_millicores.tolist() == s.cpu_millicores.tolist()
            assert g.memory_bytes.tolist() == s.memory_bytes.tolist()


# ---- in-place resize and containers nobody measures, as pods move ------------------------------------


def _resized_batch() -> Pod:
    """``batch-x-0`` as read from a snapshot while its resize from 1000m down to 400m is in
    progress: the container still runs with 1000m, so kube-scheduler counts 1000m."""
    from scaler.model.decode import parse_pod

    obj = {
        "kind": "Pod",
        "metadata": {"name": "batch-x-0", "namespace": "default", "uid": "uid-batch",
                     "labels": {"app": "b"},
                     "ownerReferences": [{"kind": "ReplicaSet", "name": "batch-x", "controller": True}]},
        "spec": {"nodeName": "n3", "containers": [{"name": "c", "resources": {"requests": {"cpu": "400m", "memory": "2Gi"}}}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "PodResizeInProgress", "status": "True"}],
            "containerStatuses": [{"name": "c", "state": {"running": {}}, "allocatedResources": {"cpu": "400m", "memory": "2Gi"},
                                   "resources": {"requests": {"cpu": "1000m", "memory": "2Gi"}}}],
        },
    }  # fmt: skip
    return msgspec.structs.replace(parse_pod(obj), creation_ts=T0 - 86400)


def test_a_replacement_takes_its_spec_requests_without_resize_status() -> None:
    """The world reads a pod being resized as the snapshot gives it (1000m counted, 400m in
    its spec); once evicted, its replacement asks for what its spec asks (the stand-in for its
    workload's template) and carries no resize status."""
    base = small_cluster()
    pods = [p if p.name != "batch-x-0" else _resized_batch() for p in base.pods]
    snap = dataclasses.replace(base, pods=()).create(
        T0, base.nodes, pods, controllers=base.controllers.values(), node_metrics=base.node_metrics.values(),
        pod_metrics=base.pod_metrics.values(),
    )  # fmt: skip
    inp = replay_input(snap, idle_trace(2), 2)
    w = World(inp.snapshot, inp.usage, inp.pod_series, parse_policies(["scaler"])[0].config, with_pod_metrics=True)
    batch = next(p for p in w.snapshot().pods if p.name == "batch-x-0")
    assert batch.requests.cpu_millicores == 1000 and batch.spec_requests is not None
    assert batch.spec_requests.cpu_millicores == 400
    assert w.evict(batch).ok
    replacement = w.pods[batch.uid]
    assert replacement.requests.cpu_millicores == 400 and replacement.spec_requests is None
    w.schedule_pending()
    placed = next(p for p in w.snapshot().pods if p.name == "batch-x-0")
    assert placed.node_name and placed.requests.cpu_millicores == 400 and placed.spec_requests is None


def test_a_container_nobody_measures_stays_unmeasured_in_the_replay() -> None:
    """``batch-x-0`` runs ``c`` and ``shipper`` (no request); its snapshot PodMetrics report
    ``c`` only. Every snapshot the world gives lacks ``shipper`` too, so n3 stays
    ``MetricsUnavailable`` step after step (as the dry-run of the snapshot says), never judged
    with the shipper using nothing; its replacement is measured the same way."""
    base = small_cluster()
    pods = [
        p if p.name != "batch-x-0" else msgspec.structs.replace(
            p, containers=("c", "shipper"), container_requests=(("c", 1000, 2 * GI), ("shipper", 0, 0))
        )
        for p in base.pods
    ]  # fmt: skip
    readings = [
        m if m.name != "batch-x-0" else msgspec.structs.replace(m, containers=("c",)) for m in base.pod_metrics.values()
    ]
    snap = ClusterSnapshot.create(
        T0, base.nodes, pods, controllers=base.controllers.values(), node_metrics=base.node_metrics.values(),
        pod_metrics=readings,
    )  # fmt: skip
    cfg = ScalerConfig()
    lacks = "pod default/batch-x-0: its PodMetrics lack container 'shipper', which has no cpu request"
    assert unknown_usage(next(p for p in snap.pods if p.name == "batch-x-0"), snap, cfg).startswith(lacks)
    inp = replay_input(snap, idle_trace(3), 3)
    w = World(inp.snapshot, inp.usage, inp.pod_series, parse_policies(["scaler"])[0].config, with_pod_metrics=True)
    for step in (1, 2):
        w.advance(step)
        s = w.snapshot()
        assert ("default", "batch-x-0") not in s.pod_metrics
        assert s.partial_pod_metrics[("default", "batch-x-0")][1] == ("shipper",)
        batch = next(p for p in s.pods if p.name == "batch-x-0")
        assert unknown_usage(batch, s, cfg).startswith(lacks)
        moved = [m.key for r in evaluate(s, cfg).nodes for m, _ in r.moves]
        assert "default/batch-x-0" not in moved
    batch = next(p for p in w.pods.values() if p.name == "batch-x-0")
    w.evict(batch)
    w.schedule_pending()
    assert ("default", "batch-x-0") in w.snapshot().partial_pod_metrics


def _scale_up_one_node(extra_pods: list[Pod]) -> World:
    """A world of :func:`small_cluster` (with ``extra_pods``) that added one node for a pod too
    big for the free room (as in
    ``test_scheduler_places_evicted_pods_least_allocated_and_scale_up_adds_a_node``), five
    minutes on."""
    inp = replay_input(small_cluster(extra_pods), idle_trace(3), 3)
    w = World(inp.snapshot, inp.usage, inp.pod_series, parse_policies(["scaler"])[0].config, provision_delay=120)
    w.mark_to_be_deleted("n1", w.now, "scaler")
    assert w.evict(next(p for p in w.pods.values() if p.name == "web-abc-0")).ok
    w.schedule_pending()  # to n4, whose room is then too small for the big pod
    big = make_pod("big-0", node="", cpu_m=3500, mem=GI, owner_name="batch-x", phase="Pending")
    w.pods[big.uid] = big
    w.pending[big.uid] = w.now
    w.schedule_pending()
    assert w.scale_up() == 1
    w.advance(1)
    assert w.stats.nodes_added == 1
    return w


def test_a_new_nodes_daemonset_pod_never_takes_a_name_a_pod_holds() -> None:
    def agent(name: str, node: str) -> Pod:
        return make_pod(name, node=node, cpu_m=10, mem=MI, owner_kind="DaemonSet", owner_name="agent")

    first = _scale_up_one_node([agent("agent-x7k2p", "n1")])
    new = next(n for n in first.nodes if n not in {"n1", "n2", "n3", "n4"})
    taken = next(p.name for p in first.pods.values() if p.name.startswith("agent-") and p.node_name == new)
    # The same world, but a pod on another node already holds the name the new one would get.
    w = _scale_up_one_node([agent("agent-x7k2p", "n1"), agent(taken, "n3")])
    keys = [(p.namespace, p.name) for p in w.pods.values()]
    assert len(keys) == len(set(keys))
    renamed = next(p.name for p in w.pods.values() if p.name.startswith("agent-") and p.node_name == new)
    assert renamed != taken
