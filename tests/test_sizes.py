"""Small functions and small modules in ``scaler/`` and ``plugins/``: computed from the source.

A function (``def`` or ``async def``, methods and nested functions included) spans
``end_lineno - lineno + 1`` lines of its ``ast`` node, decorators not counted; a module is its
number of lines. Above :data:`MAX_FUNCTION_LINES` or :data:`MAX_MODULE_LINES`, split it into
well-named helpers or modules (the layering test in ``test_import_cycles.py`` says where a new
module may import from).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("scaler", "plugins")
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 800


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[int, str, int]]:
    """``(line, name, lines)`` of every function in ``source`` longer than ``limit`` lines."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                out.append((node.lineno, node.name, lines))
    return sorted(out)


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_finder_finds_a_long_function_and_measures_it() -> None:
    body = "".join(f"        x{i} = {i}\n" for i in range(80))
    source = f"def short():\n    pass\n\nclass C:\n    async def long(self):\n{body}"
    assert long_functions(source) == [(5, "long", 81)]
    assert long_functions(source, limit=81) == []


def test_there_are_modules_to_measure() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in _modules()}
    assert {"scaler/planner.py", "scaler/replay/world.py", "plugins/target_usage.py"} <= names


def test_no_function_over_80_lines() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{line} {name} ({lines} lines)"
        for p in _modules()
        for line, name, lines in long_functions(p.read_text(encoding="utf-8"))
    ]
    assert not found, f"functions over {MAX_FUNCTION_LINES} lines: " + "; ".join(found)


def test_no_module_over_800_lines() -> None:
    found = [
        f"{p.relative_to(ROOT)} ({n} lines)"
        for p in _modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not found, f"modules over {MAX_MODULE_LINES} lines: " + "; ".join(found)
