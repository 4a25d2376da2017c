"""Golden replays (``tests/golden_replay.py``): every figure of every replay report of the pinned
cases (the bundled example over a day and over a week for ``scaler``, ``seed`` and
``scaler-relief``; a generated 100-node cluster over a day; a generated 1,000-node cluster over
its first three hours, removals and evictions included) is byte-identical to
``tests/data/golden-replay/``. The week takes minutes of CPU: ``make test`` checks it only with
``SCALER_GOLDEN_LONG=1``, ``python -m tests.golden_replay`` always; run one of them before
merging a change to the simulation, the planner or the replay.

A change that should not change decisions keeps them identical; one that does regenerates
them (``python -m tests.golden_replay --write``) and says why in its commit."""

from __future__ import annotations

import json
import os

import pytest

from tests.golden_replay import CASES, TRACE, Case, first_difference, path_of, run_case

pytestmark = pytest.mark.skipif(not TRACE.exists(), reason="the Bitbrains trace (../shared/data) is not here")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_replay_figures_are_the_golden_ones(case: Case) -> None:
    if case.long and os.environ.get("SCALER_GOLDEN_LONG") != "1":
        pytest.skip(f"{case.name} takes minutes: run with SCALER_GOLDEN_LONG=1")
    expected = path_of(case).read_text(encoding="utf-8")
    got = run_case(case)
    assert got == expected, first_difference(expected, got)


def test_the_golden_cases_remove_nodes_and_evict_pods() -> None:
    """The pinned figures exercise the decisions: every policy of every case removes nodes, and
    in every case a policy drains nodes or relieves hot ones (evictions). On the bundled
    example ``scaler`` and ``seed`` remove only its empty nodes: it is packed by requests, so
    only ``scaler-relief`` evicts there."""
    for case in CASES:
        figures = json.loads(path_of(case).read_text(encoding="utf-8"))
        assert all(f["nodes_removed"] > 0 for f in figures.values()), case.name
        assert any(f["pods_evicted"] > 0 for f in figures.values()), case.name
