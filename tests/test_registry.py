"""Tests of the plugin registry: built-ins, entry-point discovery, third-party plugins, errors."""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

import pytest
from builders import make_node, make_pod

from plugins.examples.most_headroom import MostHeadroom
from plugins.target_usage import TargetUsage
from scaler.config import ScalerConfig
from scaler.model.snapshot import ClusterSnapshot
from scaler.simulator.registry import (
    BUILTIN_FILTERS,
    ENTRY_POINT_GROUP,
    PluginError,
    discover,
    load_filters,
    load_scorers,
    resolve_plugins,
)
from scaler.simulator.state import ClusterState, FilterPlugin, ScorePlugin

BUILTIN_NAMES = [
    "NodeUnschedulable",
    "NodeResourcesFit",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "VolumeZone",
    "DynamicResources",
    "InterPodAffinity",
    "PodTopologySpread",
]
CHEAP = BUILTIN_NAMES[:-2]
SCANNING = BUILTIN_NAMES[-2:]


def ordered(*configured: str) -> list[str]:
    """Run order: cheap built-ins, configured plugins, then the pod-scanning built-ins."""
    return [*CHEAP, *configured, *SCANNING]


def install_dist(
    root: Path, monkeypatch: pytest.MonkeyPatch, module_source: str, entry_points: dict[str, str]
) -> str:
    """Write a one-module distribution into ``root`` (module + ``*.dist-info`` with METADATA and
    entry_points.txt registering ``entry_points`` under scaler.plugins) and put ``root`` on
    sys.path. Returns the module name; ``{mod}`` in entry-point targets is replaced by it."""
    mod = f"thirdparty_{uuid.uuid4().hex[:8]}"
    dist = f"thirdparty_{uuid.uuid4().hex[:8]}"
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{mod}.py").write_text(textwrap.dedent(module_source), encoding="utf-8")
    info = root / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n", encoding="utf-8")
    lines = "".join(f"{name} = {target.format(mod=mod)}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}", encoding="utf-8")
    monkeypatch.syspath_prepend(str(root))
    return mod


THIRD_PARTY = """
    from __future__ import annotations


    class OnlyEven:
        \"\"\"Rejects nodes whose name ends in an odd digit.\"\"\"

        name = "OnlyEven"

        def __init__(self, config):
            self.config = config

        def filter(self, pod, node, state):
            return "odd node" if node.name[-1] in "13579" else None


    class NotAPlugin:
        def __init__(self, config):
            pass


    class Broken:
        name = "Broken"

        def __init__(self, config):
            raise RuntimeError("boom")

        def filter(self, pod, node, state):
            return None


    def factory(config):
        return OnlyEven(config)
"""


def test_builtin_order() -> None:
    assert [cls.name for cls in BUILTIN_FILTERS] == BUILTIN_NAMES


def test_default_config_loads_builtins_then_target_usage() -> None:
    filters = load_filters(ScalerConfig())
    assert [f.name for f in filters] == ordered("TargetUsage")
    assert all(isinstance(f, FilterPlugin) for f in filters)
    assert isinstance(filters[len(CHEAP)], TargetUsage)


def test_discover_lists_shipped_plugins() -> None:
    found = discover()
    assert found["TargetUsage"] is TargetUsage
    assert found["MostHeadroom"] is MostHeadroom


def test_unknown_filter_name() -> None:
    with pytest.raises(PluginError, match=r"unknown filter plugin 'Nope'; available: .*TargetUsage"):
        load_filters(ScalerConfig(filter_plugins=("TargetUsage", "Nope")))


def test_unknown_score_name() -> None:
    with pytest.raises(PluginError, match=r"unknown score plugin 'Nope'"):
        load_scorers(ScalerConfig(score_plugins=("Nope",)))


def test_plugins_resolved_once_built_fresh_for_each_evaluation() -> None:
    cfg = ScalerConfig(score_plugins=("MostHeadroom",))
    plugins = resolve_plugins(cfg)
    first, second = plugins.build(), plugins.build()
    assert [type(f) for f in first[0]] == [type(f) for f in load_filters(cfg)]
    assert [type(s) for s in first[1]] == [MostHeadroom]
    assert all(a is not b for a, b in zip(first[0] + first[1], second[0] + second[1], strict=True))
    with pytest.raises(PluginError, match=r"unknown filter plugin 'Typo'"):
        resolve_plugins(ScalerConfig(filter_plugins=("Typo",)))


def test_scorers() -> None:
    assert load_scorers(ScalerConfig()) == []
    scorers = load_scorers(ScalerConfig(score_plugins=("MostHeadroom", "MostHeadroom")))
    assert len(scorers) == 1
    assert isinstance(scorers[0], MostHeadroom) and isinstance(scorers[0], ScorePlugin)


def test_builtin_and_repeated_names_are_not_duplicated() -> None:
    cfg = ScalerConfig(filter_plugins=("NodeAffinity", "TargetUsage", "TargetUsage"))
    assert [f.name for f in load_filters(cfg)] == ordered("TargetUsage")


def test_no_extra_filters() -> None:
    assert [f.name for f in load_filters(ScalerConfig(filter_plugins=()))] == ordered()


def test_wrong_kind_rejected() -> None:
    with pytest.raises(PluginError, match="'MostHeadroom' is not a filter plugin"):
        load_filters(ScalerConfig(filter_plugins=("MostHeadroom",)))
    with pytest.raises(PluginError, match="'TargetUsage' is not a score plugin"):
        load_scorers(ScalerConfig(score_plugins=("TargetUsage",)))


def test_plugins_get_the_config() -> None:
    cfg = ScalerConfig(target_cpu_usage=0.3)
    plugin = load_filters(cfg)[len(CHEAP)]
    assert isinstance(plugin, TargetUsage) and plugin.config is cfg


def test_third_party_filter_is_found_and_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_dist(tmp_path / "site", monkeypatch, THIRD_PARTY, {"OnlyEven": "{mod}:OnlyEven"})
    assert "OnlyEven" in discover()
    cfg = ScalerConfig(filter_plugins=("TargetUsage", "OnlyEven"))
    filters = load_filters(cfg)
    assert [f.name for f in filters] == ordered("TargetUsage", "OnlyEven")

    snap = ClusterSnapshot.create(now=0.0, nodes=[make_node("n1"), make_node("n2")], pods=[])
    state = ClusterState(snap, usage={"n1": (0, 0), "n2": (0, 0)})
    pod = make_pod("p", node="")

    def feasible(name: str) -> list[str]:
        return [r for f in filters if (r := f.filter(pod, state.nodes[name], state)) is not None]

    assert feasible("n1") == ["odd node"]
    assert feasible("n2") == []


def test_third_party_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_dist(
        tmp_path / "site",
        monkeypatch,
        THIRD_PARTY,
        {
            "NotAPlugin": "{mod}:NotAPlugin",
            "Broken": "{mod}:Broken",
            "Missing": "no_such_module_xyz:Thing",
            "Factory": "{mod}:factory",
        },
    )
    with pytest.raises(PluginError, match="'NotAPlugin' is not a filter plugin"):
        load_filters(ScalerConfig(filter_plugins=("NotAPlugin",)))
    with pytest.raises(PluginError, match=r"cannot create filter plugin 'Broken'.*boom"):
        load_filters(ScalerConfig(filter_plugins=("Broken",)))
    with pytest.raises(PluginError, match="cannot load plugin 'Missing'"):
        load_filters(ScalerConfig(filter_plugins=("Missing",)))
    with pytest.raises(PluginError, match=r"'Factory'.*is not a class"):
        load_filters(ScalerConfig(filter_plugins=("Factory",)))
    with pytest.raises(PluginError, match=r"plugin '(Factory|Missing)'"):
        discover()
    # a broken plugin that is not asked for does not get in the way
    assert load_filters(ScalerConfig())[len(CHEAP)].name == "TargetUsage"


def test_conflicting_registrations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_dist(tmp_path / "one", monkeypatch, THIRD_PARTY, {"Dup": "{mod}:OnlyEven"})
    install_dist(tmp_path / "two", monkeypatch, THIRD_PARTY, {"Dup": "{mod}:OnlyEven"})
    with pytest.raises(PluginError, match="'Dup' is registered twice"):
        load_filters(ScalerConfig(filter_plugins=("Dup",)))


def test_entry_points_are_scanned_once_per_sys_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from scaler import entrypoints

    first = entrypoints.scan(ENTRY_POINT_GROUP)
    assert entrypoints.scan(ENTRY_POINT_GROUP) is first  # kept: no rescan per evaluation
    assert "TargetUsage" in first
    # A distribution written into a directory already on sys.path is not seen until the path
    # changes (nothing is installed into a running process); putting a new directory on the
    # path rescans.
    install_dist(tmp_path / "new", monkeypatch, THIRD_PARTY, {"LateComer": "{mod}:OnlyEven"})
    again = entrypoints.scan(ENTRY_POINT_GROUP)
    assert again is not first and "LateComer" in again and "LateComer" not in first
