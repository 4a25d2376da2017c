"""Eviction metrics: validation, the registry, the built-ins, pod usage, and entry-point plugins."""

from __future__ import annotations

import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from builders import GI, make_pod

from plugins.examples.eviction_metric import EPHEMERAL_STORAGE_USAGE, ephemeral_storage_metric
from scaler.eviction.executor import EvictResult, execute
from scaler.eviction.metrics import (
    CPU_TOTAL_USAGE,
    ENTRY_POINT_GROUP,
    MEMORY_TOTAL_USAGE,
    EvictionConfigError,
    EvictionMetric,
    MetricRegistry,
    default_registry,
    load_metric_plugins,
    node_usage_from_metrics,
)
from scaler.eviction.podinfo import PodUsage, pod_usages
from scaler.eviction.sort import general_sorter, usage
from scaler.eviction.waterline import Waterlines, calculate_gaps
from scaler.model.records import NodeMetrics, Pod, PodMetrics, Volume


def zero(p: PodUsage) -> float | None:
    return 0.0


def metric(name: str = "m", prio: int = 5, **kw: Any) -> EvictionMetric:
    return EvictionMetric(name=name, action_priority=prio, usage_of=kw.pop("usage_of", zero), **kw)


# --- EvictionMetric validation ---------------------------------------------------------------


@pytest.mark.parametrize("prio", [0, 5, 10])
def test_priority_in_range_accepted(prio: int) -> None:
    assert metric(prio=prio).action_priority == prio


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"prio": -1}, "action_priority must be an int in 0..10"),
        ({"prio": 11}, "action_priority must be an int in 0..10"),
        ({"prio": True}, "action_priority"),
        ({"prio": 5.0}, "action_priority"),
        ({"name": ""}, "non-empty"),
        ({"evictable": False}, "evict_quantified requires evictable"),
        ({"throttleable": True}, "reserved"),
        ({"throttle_quantified": True}, "reserved"),
        ({"usage_of": 3}, "usage_of must be callable"),
        ({"sort": "cpu"}, "sort must be callable"),
    ],
)
def test_metric_validation(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        metric(**kwargs)


def test_not_evictable_metric_must_not_be_quantified() -> None:
    m = metric(evictable=False, evict_quantified=False)
    assert not m.evictable and not m.evict_quantified


def test_node_usage_key_defaults_to_name() -> None:
    assert metric("disk").node_usage_key == "disk"
    assert metric("disk", node_usage_key="fs_used").node_usage_key == "fs_used"


@pytest.mark.parametrize(
    ("raw", "released"),
    [(5.0, 5.0), (None, None), (-3.0, 0.0), (float("nan"), None), (float("inf"), None)],
)
def test_released_by_cleans_the_value(raw: float | None, released: float | None) -> None:
    m = metric(usage_of=lambda p: raw)
    assert m.released_by(PodUsage(make_pod("p"))) == released


def test_sorter_selection() -> None:
    pods = [
        PodUsage(make_pod("a"), extra={"m": 1.0}, start_ts=1.0),
        PodUsage(make_pod("b"), extra={"m": 9.0}, start_ts=2.0),
    ]

    def by_m(p: PodUsage) -> float | None:
        return p.extra.get("m")

    assert metric(usage_of=by_m, sortable=False).sorter is general_sorter
    # sortable without sort: crane HEAD's class/priority, usage desc, running time
    assert [p.pod.name for p in metric(usage_of=by_m).sorter(pods)] == ["b", "a"]
    # an explicit sort is used as given (here: ascending usage)
    asc = metric(usage_of=by_m, sort=lambda a, b: -usage(by_m)(a, b))
    assert [p.pod.name for p in asc.sorter(pods)] == ["a", "b"]


# --- registry ---------------------------------------------------------------------------------


def test_register_duplicate_rejected() -> None:
    reg = MetricRegistry([metric("a")])
    with pytest.raises(ValueError, match="'a' is already registered"):
        reg.register(metric("a", prio=9))
    assert reg["a"].action_priority == 5
    with pytest.raises(ValueError, match="already registered"):
        MetricRegistry([metric("x"), metric("x")])


def test_register_wrong_type() -> None:
    with pytest.raises(TypeError):
        MetricRegistry().register("cpu")  # type: ignore[arg-type]


def test_registry_lookup() -> None:
    reg = MetricRegistry([metric("b"), metric("a")])
    assert reg.get("a") is not None and reg.get("zz") is None
    assert "a" in reg and "zz" not in reg
    assert reg.names() == ("a", "b") and [m.name for m in reg] == ["a", "b"] and len(reg) == 2
    with pytest.raises(KeyError):
        reg["zz"]
    copy = reg.copy()
    copy.register(metric("c"))
    assert "c" not in reg


@pytest.mark.parametrize(
    ("metrics", "among", "expected"),
    [
        ([metric("low", 1), metric("high", 9)], None, "high"),
        # ties broken by the smallest name, whatever the registration order
        ([metric("b", 5), metric("a", 5)], None, "a"),
        ([metric("a", 5), metric("b", 5)], None, "a"),
        # not evictable metrics are never chosen
        ([metric("x", 10, evictable=False, evict_quantified=False), metric("y", 0)], None, "y"),
        # restricted to the waterline metrics
        ([metric("low", 1), metric("high", 9)], ["low"], "low"),
        ([metric("low", 1)], ["unknown"], None),
        ([], None, None),
    ],
)
def test_highest_priority_evictable(
    metrics: list[EvictionMetric], among: list[str] | None, expected: str | None
) -> None:
    found = MetricRegistry(metrics).highest_priority_evictable(among)
    assert (found.name if found else None) == expected


def test_evictable_order() -> None:
    reg = MetricRegistry(
        [
            metric("c", 5),
            metric("a", 5),
            metric("z", 9),
            metric("n", 10, evictable=False, evict_quantified=False),
        ]
    )
    assert [m.name for m in reg.evictable()] == ["z", "a", "c"]


def test_default_registry() -> None:
    reg = default_registry()
    assert reg.names() == (CPU_TOTAL_USAGE, MEMORY_TOTAL_USAGE)
    cpu, mem = reg[CPU_TOTAL_USAGE], reg[MEMORY_TOTAL_USAGE]
    assert (cpu.action_priority, cpu.unit, cpu.evictable, cpu.evict_quantified) == (
        5,
        "millicores",
        True,
        True,
    )
    assert (mem.action_priority, mem.unit, mem.evictable, mem.evict_quantified) == (5, "bytes", True, True)
    assert not cpu.throttleable and not mem.throttleable
    p = PodUsage(make_pod("p"), cpu_millicores=250, memory_bytes=GI)
    assert cpu.released_by(p) == 250.0 and mem.released_by(p) == float(GI)
    assert cpu.released_by(PodUsage(make_pod("q"))) is None
    assert default_registry() is not reg  # a fresh registry each time


def test_node_usage_from_metrics() -> None:
    nm = NodeMetrics("n1", timestamp=0.0, window_seconds=30.0, cpu_millicores=1500, memory_bytes=4 * GI)
    assert node_usage_from_metrics(nm) == {CPU_TOTAL_USAGE: 1500.0, MEMORY_TOTAL_USAGE: float(4 * GI)}
    assert node_usage_from_metrics(None) == {CPU_TOTAL_USAGE: None, MEMORY_TOTAL_USAGE: None}


def test_pod_usages_joins_metrics() -> None:
    a = make_pod("a", creation_ts=100.0)
    b = make_pod("b", namespace="other")
    metrics = {("default", "a"): PodMetrics("default", "a", 0.0, 30.0, cpu_millicores=120, memory_bytes=GI)}
    out = pod_usages([a, b], metrics, extra={("other", "b"): {"disk": 7.0}})
    assert [u.pod for u in out] == [a, b]
    assert (out[0].cpu_millicores, out[0].memory_bytes, out[0].start_ts, dict(out[0].extra)) == (
        120,
        GI,
        100.0,
        {},
    )
    assert (out[1].cpu_millicores, out[1].memory_bytes, out[1].start_ts, dict(out[1].extra)) == (
        None,
        None,
        None,
        {"disk": 7.0},
    )
    assert out[0].key == "default/a"


# --- entry-point plugins ----------------------------------------------------------------------


def install_dist(root: Path, monkeypatch: pytest.MonkeyPatch, source: str, eps: dict[str, str]) -> str:
    """Write a one-module distribution registering ``eps`` under scaler.eviction_metrics and put
    it on sys.path; ``{mod}`` in targets is replaced by the module name, which is returned."""
    mod = f"evm_{uuid.uuid4().hex[:8]}"
    dist = f"evmdist_{uuid.uuid4().hex[:8]}"
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{mod}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = root / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n", encoding="utf-8")
    lines = "".join(f"{n} = {t.format(mod=mod)}\n" for n, t in eps.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}", encoding="utf-8")
    monkeypatch.syspath_prepend(str(root))
    return mod


THIRD_PARTY = """
    from scaler.eviction.metrics import EvictionMetric

    def _gpu(p):
        return p.extra.get("gpu_mem")

    def gpu_metric():
        return EvictionMetric(name="gpu_memory", action_priority=6, usage_of=_gpu)

    INSTANCE = EvictionMetric(name="gpu_instance", action_priority=1, usage_of=_gpu)

    class GpuMetricClass(EvictionMetric):
        def __init__(self):
            super().__init__(name="gpu_class", action_priority=2, usage_of=_gpu)

    def broken():
        raise RuntimeError("boom")

    def not_a_metric():
        return 42

    def dup_cpu():
        return EvictionMetric(name="cpu_total_usage", action_priority=1, usage_of=_gpu)

    NOT_CALLABLE = 3
"""


def test_example_metric_is_loaded_by_entry_point() -> None:
    reg = default_registry()
    added = load_metric_plugins(reg, ["ExampleEphemeralStorage"])
    assert added == (EPHEMERAL_STORAGE_USAGE,)
    m = reg[EPHEMERAL_STORAGE_USAGE]
    assert (m.action_priority, m.unit, m.evict_quantified) == (7, "bytes", True)
    # loading everything also finds it
    reg2 = default_registry()
    assert EPHEMERAL_STORAGE_USAGE in load_metric_plugins(reg2)


def test_example_metric_sorts_and_closes_its_gap() -> None:
    reg = default_registry()
    load_metric_plugins(reg, ["ExampleEphemeralStorage"])
    m = reg[EPHEMERAL_STORAGE_USAGE]

    def disk(name: str, used: float | None, empty_dir: bool = False, prio: int = 0) -> PodUsage:
        vols = (Volume("scratch", "emptyDir"),) if empty_dir else ()
        extra = {} if used is None else {EPHEMERAL_STORAGE_USAGE: used}
        return PodUsage(make_pod(name, priority=prio, volumes=vols), cpu_millicores=10, extra=extra)

    pods = [
        disk("small", 1 * GI),
        disk("big", 8 * GI),
        disk("mid-plain", 4 * GI),
        disk("mid-emptydir", 4 * GI, empty_dir=True),
        disk("unknown", None),
        disk("important", 50 * GI, prio=1000),
    ]
    order = [p.pod.name for p in m.sorter(pods)]
    assert order == ["big", "mid-emptydir", "mid-plain", "small", "unknown", "important"]

    node_usage = {CPU_TOTAL_USAGE: 100.0, EPHEMERAL_STORAGE_USAGE: float(70 * GI)}
    wl = Waterlines({EPHEMERAL_STORAGE_USAGE: 60 * GI})
    assert calculate_gaps(node_usage, wl, reg)[EPHEMERAL_STORAGE_USAGE] == 10 * GI

    evicted: list[str] = []

    def evictor(pod: Pod) -> EvictResult:
        evicted.append(pod.name)
        return EvictResult(True)

    result = execute(pods, node_usage, wl, reg, evictor)
    assert result.mode == "precise"
    assert evicted == ["big", "mid-emptydir"]  # 8 + 4 GiB ≥ 10 GiB
    assert result.released[EPHEMERAL_STORAGE_USAGE] == 12 * GI
    assert result.released[CPU_TOTAL_USAGE] == 20.0
    assert result.remaining_gaps[EPHEMERAL_STORAGE_USAGE] == -2 * GI


def test_example_function_directly() -> None:
    m = ephemeral_storage_metric()
    assert m.released_by(PodUsage(make_pod("p"), extra={EPHEMERAL_STORAGE_USAGE: 3.0})) == 3.0


def test_third_party_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_dist(
        tmp_path / "site",
        monkeypatch,
        THIRD_PARTY,
        {"Gpu": "{mod}:gpu_metric", "GpuInstance": "{mod}:INSTANCE", "GpuClass": "{mod}:GpuMetricClass"},
    )
    reg = default_registry()
    assert load_metric_plugins(reg, ["Gpu", "GpuInstance", "GpuClass", "Gpu"]) == (
        "gpu_memory",
        "gpu_instance",
        "gpu_class",
    )
    assert reg["gpu_memory"].action_priority == 6
    assert reg.highest_priority_evictable().name == "gpu_memory"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("target", "match"),
    [
        ("{mod}:broken", r"cannot create eviction metric plugin 'Bad'.*boom"),
        ("{mod}:not_a_metric", r"'Bad'.*returned int, not an EvictionMetric"),
        ("{mod}:NOT_CALLABLE", r"'Bad'.*neither an EvictionMetric nor callable"),
        ("no_such_module_xyz:thing", r"cannot load eviction metric plugin 'Bad'"),
        ("{mod}:dup_cpu", r"'Bad' defines metric 'cpu_total_usage', already defined by the registry"),
    ],
)
def test_broken_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, match: str) -> None:
    install_dist(tmp_path / "site", monkeypatch, THIRD_PARTY, {"Gpu": "{mod}:gpu_metric", "Bad": target})
    reg = default_registry()
    with pytest.raises(EvictionConfigError, match=match):
        load_metric_plugins(reg, ["Gpu", "Bad"])
    assert "gpu_memory" not in reg  # all or nothing
    # loading everything hits the broken one too; loading only good ones works
    with pytest.raises(EvictionConfigError):
        load_metric_plugins(default_registry())
    assert load_metric_plugins(reg, ["Gpu"]) == ("gpu_memory",)


def test_unknown_plugin_name_lists_available() -> None:
    with pytest.raises(
        EvictionConfigError, match=r"unknown eviction metric plugin 'Nope'; available: .*Example"
    ):
        load_metric_plugins(default_registry(), ["Nope"])


def test_two_plugins_defining_one_metric(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_dist(
        tmp_path / "site", monkeypatch, THIRD_PARTY, {"A": "{mod}:gpu_metric", "B": "{mod}:gpu_metric"}
    )
    with pytest.raises(
        EvictionConfigError, match=r"plugin 'B' defines metric 'gpu_memory', already defined by plugin 'A'"
    ):
        load_metric_plugins(default_registry(), ["A", "B"])


def test_conflicting_entry_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_dist(tmp_path / "one", monkeypatch, THIRD_PARTY, {"Same": "{mod}:gpu_metric"})
    install_dist(tmp_path / "two", monkeypatch, THIRD_PARTY, {"Same": "{mod}:gpu_metric"})
    with pytest.raises(EvictionConfigError, match="'Same' is registered twice"):
        load_metric_plugins(default_registry(), ["Same"])


def test_loaded_metric_factory_signature() -> None:
    factory: Callable[[], EvictionMetric] = ephemeral_storage_metric
    assert factory().name == EPHEMERAL_STORAGE_USAGE
