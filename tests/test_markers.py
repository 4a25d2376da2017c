"""The suite's markers (tests/conftest.py): every name in its lists names a real module or test,
and a module the ``-m`` filter skips without importing it holds only tests it would deselect."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import E2E, REAL_APISERVER, SLOW, markers, pytest_ignore_collect

TESTS = Path(__file__).resolve().parent
KINDS = ("unit", "e2e", "real_apiserver")


def defined_tests(module: str) -> set[str]:
    """The names of the test functions and methods defined in ``tests/<module>.py``."""
    return set(re.findall(r"^\s*def (test_\w+)\(", (TESTS / f"{module}.py").read_text(), re.MULTILINE))


@pytest.mark.parametrize("name", sorted(E2E | REAL_APISERVER | SLOW))
def test_every_listed_name_is_a_module_or_one_of_its_tests(name: str) -> None:
    module, _, test = name.partition("::")
    assert (TESTS / f"{module}.py").is_file(), f"{name}: no tests/{module}.py"
    assert not test or test in defined_tests(module), f"{name}: no such test in tests/{module}.py"


def test_every_test_gets_one_kind_or_slow_and_unit_excludes_slow() -> None:
    for path in sorted(TESTS.glob("test_*.py")):
        for test in defined_tests(path.stem):
            got = markers(path.stem, test)
            kinds = [k for k in KINDS if k in got]
            assert len(kinds) == 1 or got == {"slow"}, (path.stem, test, got)
            assert not {"unit", "slow"} <= got, (path.stem, test, got)


def test_a_module_wide_marker_set_is_every_tests_own() -> None:
    for path in sorted(TESTS.glob("test_*.py")):
        whole = markers(path.stem)
        if whole:
            assert all(markers(path.stem, t) == whole for t in defined_tests(path.stem)), path.stem


class _Config:
    def __init__(self, expression: str) -> None:
        self.expression = expression

    def getoption(self, name: str, default: str = "") -> str:
        return self.expression if name == "markexpr" else default


@pytest.mark.parametrize(
    ("expression", "module", "ignored"),
    [
        ("unit", "test_tune", True),
        ("unit", "test_real_apiserver", True),
        ("unit", "test_watch", True),
        ("unit", "test_filters", None),
        ("unit", "test_cli_flags", None),  # one e2e test among unit ones: imported, filtered per test
        ("not unit", "test_filters", True),
        ("not unit", "test_tune", None),
        ("e2e and not slow", "test_deploy", True),
        ("unit or skipif", "test_tune", None),  # the module's own marks are not known here
        ("", "test_tune", None),
    ],
)  # fmt: skip
def test_only_modules_the_expression_cannot_select_are_skipped_unimported(
    expression: str, module: str, ignored: bool | None
) -> None:
    path = TESTS / f"{module}.py"
    assert pytest_ignore_collect(path, _Config(expression)) is ignored  # type: ignore[arg-type]
