"""Layers that point one way in ``scaler/``, and no import cycle: computed from the source.

Every ``import`` and ``from … import`` of a ``scaler`` module anywhere in a file counts, at module
level, inside functions (deferred imports) and under ``TYPE_CHECKING`` alike: a dependency hidden
in a function is still a dependency of the design.

:data:`LAYERS` is the intended order of the packages, written once, lowest first. A module
belongs to the unit that names it or its nearest package (``kube.client`` before ``kube``). A
module may import its own unit and any unit of a lower layer; two units of one layer are peers
and import neither each other nor anything above. The cycle check finds the strongly connected
components of the module graph (Tarjan) and fails on any with more than one module.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping, Sequence
from pathlib import Path

SCALER = Path(__file__).resolve().parents[1] / "scaler"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),  # the one exception root
    ("model",),  # records, snapshots, quantities, times: the data everything reads
    ("specs",),  # the configuration's compact specs (--nodes, budgets) and ConfigError
    ("config", "reasons", "cmdline", "entrypoints", "forked", "fanout", "kube", "kube.raw"),
    # policy-free building blocks, each on model and config alone
    (
        "utilization", "usage_history", "limits", "prices", "budgets", "drain", "eviction", "observability",
        "kube.client", "kube.leader",
    ),
    # reading the cluster and its history, the scheduler simulation, node eligibility, writes
    ("sources", "history", "simulator", "eligibility", "names", "kube.writer"),
    ("engine", "plugin_api", "cloud", "kube.permissions"),  # the pure loop; cloud adapters
    ("planner", "relief"),  # what to remove, which hot node to relieve
    ("actuation", "report"),  # acting on a plan; the dry-run report
    ("controller", "why", "status"),  # the live loop; one node's answer and a running scaler's status, read
    ("runner", "replay"),  # the live process; the what-if replay drives the controller
    ("tune",),  # the search over replays
    ("cli",),  # the command line
    ("docs", "kubectl_plugin"),  # the reference pages; kubectl scaler, both on the command line
)  # fmt: skip
"""The intended package order of ``scaler``, lowest layer first."""


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in SCALER.rglob("*.py"):
        parts = list(path.relative_to(SCALER.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Module → the ``scaler`` modules it imports (a name imported from a package resolves to
    its submodule when there is one)."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            else:
                continue
            for name in targets:
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    graph[module].add(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_cycle_finder_finds_a_cycle() -> None:
    """The finder itself can fail: a made-up graph with one cycle and one chain."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]


def test_graph_sees_deferred_imports() -> None:
    graph = import_graph()
    assert "scaler.replay.cli" in graph["scaler.cli"]  # imported inside build_parser()


def test_tune_reads_the_replay_through_typed_seams_not_its_command() -> None:
    """``scaler tune`` loads its inputs from a typed spec (``scaler.replay.load``) and its flags
    from ``scaler.replay.command``, never from ``scaler replay``'s command module; and the
    loader takes that spec, not parsed arguments."""
    import inspect

    from scaler.replay.load import InputSpec, load_inputs

    graph = import_graph()
    for module in (m for m in graph if m.startswith("scaler.tune")):
        assert "scaler.replay.cli" not in graph[module], module
    assert {"scaler.replay.load", "scaler.replay.command"} <= graph["scaler.tune.cli"]
    assert "argparse" not in inspect.getsource(inspect.getmodule(load_inputs)).split("def _prometheus_trace")[0]
    assert inspect.signature(load_inputs).parameters["spec"].annotation in (InputSpec, "InputSpec")


def test_no_import_cycle_in_scaler() -> None:
    assert cycles(import_graph()) == []


def unit_of(module: str, units: Mapping[str, int]) -> str:
    """The unit of ``module`` (``scaler.kube.client``): the longest unit that names it or one of
    its packages; ``""`` for none."""
    parts = module.split(".")[1:]
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name in units:
            return name
    return ""


def layering_violations(
    graph: Mapping[str, set[str]], layers: Sequence[Sequence[str]] = LAYERS
) -> list[str]:
    """Every import against ``layers`` (upwards, or sideways between two units of one layer),
    and every module of no unit, as ``importer -> imported (unit layer -> unit layer)``."""
    units = {unit: rank for rank, layer in enumerate(layers) for unit in layer}
    found: list[str] = []
    for module, targets in sorted(graph.items()):
        if module == "scaler":
            continue
        mine = unit_of(module, units)
        if not mine:
            found.append(f"{module}: in no layer")
            continue
        for target in sorted(targets):
            theirs = unit_of(target, units)
            if not theirs or theirs == mine or units[theirs] < units[mine]:
                continue
            found.append(f"{module} -> {target} ({mine} {units[mine]} -> {theirs} {units[theirs]})")
    return found


def test_layering_finder_finds_an_upward_and_a_sideways_import() -> None:
    """The check itself can fail: a made-up graph against made-up layers."""
    graph = {
        "scaler.a": set(),
        "scaler.b.x": {"scaler.a"},
        "scaler.b.y": {"scaler.b.x", "scaler.c"},  # sideways: b and c are peers
        "scaler.c": {"scaler.d"},  # upwards
        "scaler.d": {"scaler.a", "scaler.b.x"},
        "scaler.e": set(),  # in no layer
    }
    assert layering_violations(graph, (("a",), ("b", "c"), ("d",))) == [
        "scaler.b.y -> scaler.c (b 1 -> c 1)",
        "scaler.c -> scaler.d (c 1 -> d 2)",
        "scaler.e: in no layer",
    ]


def test_every_unit_of_the_layers_exists() -> None:
    """A renamed package does not silently leave a stale name in :data:`LAYERS`."""
    modules = set(import_graph())
    names = [unit for layer in LAYERS for unit in layer]
    assert len(names) == len(set(names))
    assert [u for u in names if f"scaler.{u}" not in modules] == []


def test_layers_point_one_way() -> None:
    assert layering_violations(import_graph()) == []
