"""No import cycle in ``scaler/``: computed from the source, every import counted.

Every ``import`` and ``from … import`` of a ``scaler`` module anywhere in a file counts, at module
level, inside functions (deferred imports) and under ``TYPE_CHECKING`` alike: a cycle hidden in a
function is still a cycle in the design. The check finds the strongly connected components of
the module graph (Tarjan) and fails on any with more than one module, naming them.
"""

from __future__ import annotations

import ast
from pathlib import Path

SCALER = Path(__file__).resolve().parents[1] / "scaler"


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in SCALER.rglob("*.py"):
        parts = list(path.relative_to(SCALER.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


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


def test_no_import_cycle_in_scaler() -> None:
    assert cycles(import_graph()) == []
