"""``scaler tune`` by successive halving: the rungs, the promotions, the constraints, and on the
night-lowreq example with the Bitbrains trace, a replay over a rung equal to the first steps of
the replay over the whole window, the same frontier from 1 worker and an embedded Ray of 2, and
the same trials with and without halving ending on the same recommendation (or one within 0.5
points of saved node-hours).

The replays run in this process through :func:`scaler.tune.search.run_search`, with rungs of
80 minutes, 2 hours and 6 hours (the command's rungs start at a day: seconds here, not hours)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler.fanout import Pool
from scaler.model.times import timestamp_seconds
from scaler.replay.simulate import PolicyResult, ReplayInput, run_policy
from scaler.tune.search import Constraints, SearchResult, promote, run_search, rung_steps
from scaler.tune.space import SpaceError, load_space, parse_space

ROOT = Path(__file__).resolve().parents[1]
LOWREQ = ROOT / "scaler" / "examples" / "bitbrains-gke-night-lowreq"
BITBRAINS = ROOT.parent / "shared" / "data" / "raw" / "bitbrains-rnd-2013" / "rnd-2013-7.tar.gz"
DAY = 288  # 5-minute steps


# ---- the rungs, the promotions, the constraints --------------------------------------------------------


@pytest.mark.parametrize(
    ("days", "trials", "rungs"),
    [
        (7, 32, [DAY, 3 * DAY, 7 * DAY]),  # a week: a day, three days, the week
        (14, 32, [448, 1344, 14 * DAY]),  # two weeks: thirds, the one before the last over 3 days
        (4, 32, [DAY, 3 * DAY, 4 * DAY]),
        (3, 32, [3 * DAY]),  # not longer than the rung before the last would be: no halving
        (7, 2, [3 * DAY, 7 * DAY]),  # two trials: one goes on
        (7, 1, [7 * DAY]),
        (30, 32, [320, 960, 2880, 30 * DAY]),  # a month: four rungs of 32, 11, 4 and 2 trials
    ],
)
def test_rungs_end_on_the_window_the_one_before_at_least_three_days(days: int, trials: int, rungs: list[int]) -> None:
    got = rung_steps(days * DAY, 300.0, trials)
    assert got == rungs
    if len(got) > 1:
        assert got[-2] >= 3 * DAY and got[0] >= DAY


def test_promotion_takes_whole_pareto_fronts_then_the_most_saved() -> None:
    points = {0: (10.0, 5.0), 1: (12.0, 9.0), 2: (8.0, 1.0), 3: (9.0, 5.0), 4: (12.0, 9.0), 5: (3.0, 0.0)}
    # Front 1: 0, 1, 2, 4 and 5 (none dominates another); 3 only behind 0.
    assert promote(points, 5) == [0, 1, 2, 4, 5]
    assert promote(points, 6) == [0, 1, 2, 3, 4, 5]
    assert promote(points, 2) == [1, 4]  # the front does not fit: most saved first
    assert promote(points, 4) == [0, 1, 2, 4]
    assert promote({0: (5.0, 3.0), 1: (5.0, 2.0), 2: (6.0, 9.0), 3: (5.0, 1.0)}, 1) == [2]
    assert promote({0: (5.0, 3.0), 1: (6.0, 2.0), 2: (6.0, 1.0), 3: (1.0, 0.0), 4: (2.0, 2.5)}, 2) == [2, 3]
    # Front 1 is 2 and 3, front 2 is 4 (it dominates 0 and 1): whole fronts first.
    assert promote({0: (5.0, 3.0), 1: (6.0, 2.0), 2: (6.0, 1.0), 3: (1.0, 0.0), 4: (6.0, 1.5)}, 3) == [2, 3, 4]
    assert promote({7: (1.0, 1.0), 3: (1.0, 1.0)}, 1) == [3]  # a tie: the lower number


def test_constraints_added_overload_and_ratio_of_doing_nothing() -> None:
    none = PolicyResult("none", "", (), overload_node_minutes=1000.0)
    half = PolicyResult("t", "", (), overload_node_minutes=500.0)
    more = PolicyResult("t", "", (), overload_node_minutes=1010.0)
    assert Constraints(0.0).feasible(half, none) and not Constraints(0.0).feasible(more, none)
    assert Constraints(None, 0.5).feasible(half, none) and not Constraints(None, 0.4).feasible(half, none)
    assert Constraints(None, 1.05).feasible(more, none)  # a ratio above 1 allows some added overload
    assert not Constraints(0.0, 1.05).feasible(more, none)  # both asked: both hold
    assert Constraints(20.0, 0.5).excess(more, none) == {"maxAddedOverloadNodeMinutes": -10.0, "maxOverloadRatio": 510.0}
    assert not Constraints(None, None).given and Constraints(None, None).feasible(more, none)


def test_space_file_constraints() -> None:
    space = parse_space("target-cpu-usage: {low: 0.3, high: 0.5}\nconstraints: {max-overload-ratio: 0.5}\n", "s")
    assert space.constraints == {"max-overload-ratio": 0.5} and [p.flag for p in space.params] == ["target-cpu-usage"]
    for text, message in [
        ("constraints: {max-overload-ratio: -1}\ntarget-cpu-usage: {low: 0.3, high: 0.5}", "must be >= 0"),
        ("constraints: {max-overload: 1}\ntarget-cpu-usage: {low: 0.3, high: 0.5}", "unknown key 'max-overload'"),
        ("constraints: [1]\ntarget-cpu-usage: {low: 0.3, high: 0.5}", "expected a mapping"),
        ("constraints: {max-added-overload: 5}", "no flag to search"),
    ]:
        with pytest.raises(SpaceError, match=message):
            parse_space(text, "s")


def test_fixed_trials_round_trip_the_frontier_flags() -> None:
    space = load_space(None)
    flags = {"scale-down-unneeded-time": "15m", "usage-aggregation": "max", "hot-node-relief": True}
    assert space.fixed(flags, "f") == {"scale-down-unneeded-time": 900, "usage-aggregation": "max", "hot-node-relief": True}
    with pytest.raises(SpaceError, match="flag 'nodes' is not searched"):
        space.fixed({"nodes": "1:2:x"}, "f")


# ---- on the bundled example, in this process ---------------------------------------------------------


@pytest.fixture(scope="module")
def example() -> Iterator[ReplayInput]:
    """Night-lowreq over 6 hours of July 8 (72 steps)."""
    if not BITBRAINS.exists():
        pytest.skip(f"needs ../shared: {BITBRAINS} is absent")
    from scaler.replay.load import InputSpec, load_inputs

    spec = InputSpec(
        snapshot=(LOWREQ,),
        trace=BITBRAINS,
        start=timestamp_seconds("2013-07-08T00:00:00Z"),
        end=timestamp_seconds("2013-07-08T06:00:00Z"),
        quiet=True,
    )
    yield load_inputs(spec, 0.0, lambda _: None).replay_input()


RUNGS = [16, 24, 72]
SEARCH = {"trials": 6, "seed": 2, "generation_size": 3}


def search(inp: ReplayInput, workers: int = 1, **kw: object) -> SearchResult:
    with Pool(inp, workers) as pool:
        return run_search(inp, load_space(None), {}, pool, **{**SEARCH, **kw})  # type: ignore[arg-type]


def document(result: SearchResult, inp: ReplayInput) -> dict[str, object]:
    from scaler.tune.frontier import frontier_dict

    steps = len(inp.usage.times) - inp.start_step
    inputs = {"snapshot": "s", "trace": "t", "from": float(inp.usage.times[0]), "stepSeconds": inp.step,
              "to": float(inp.usage.times[0]) + steps * inp.step, "steps": steps}  # fmt: skip
    settings = {"sampler": "tpe", "seed": 2, "trials": 6, "generationSize": 3,
                "maxAddedOverloadNodeMinutes": 0.0, "maxOverloadRatio": None, "trialsFrom": None}  # fmt: skip
    return frontier_dict(result, load_space(None), inputs, settings, {})


@pytest.fixture(scope="module")
def halved(example: ReplayInput) -> dict[str, object]:
    return document(search(example, rungs=RUNGS), example)


def test_a_rung_is_the_first_steps_of_the_whole_replay(example: ReplayInput) -> None:
    from scaler.replay.policies import builtin_policy
    from scaler.tune.search import _window

    for name in ("scaler-relief", "ca-usage"):
        whole = run_policy(example, builtin_policy(name))
        part = run_policy(_window(example, 24), builtin_policy(name))
        assert part.times == whole.times[:24] and part.nodes == whole.nodes[:24], name
        assert part.overloaded == whole.overloaded[:24] and part.cost_per_step == whole.cost_per_step[:24], name


def test_halving_replays_a_third_on_each_longer_window_and_says_which(halved: dict[str, object]) -> None:
    doc = halved
    trials = doc["trials"]
    assert isinstance(trials, list) and len(trials) == 6
    rungs = doc["search"]["halving"]["rungs"]  # type: ignore[index]
    assert [(r["steps"], r["trials"]) for r in rungs] == [(16, 6), (24, 2), (72, 1)]
    assert rungs[0]["to"] == "2013-07-08T01:20:00Z" and rungs[-1]["to"] == "2013-07-08T06:00:00Z"
    by_rung = {k: [t for t in trials if t["rung"] == k] for k in range(3)}
    assert [len(v) for v in by_rung.values()] == [4, 1, 1]
    for t in trials:
        assert t["window"]["steps"] == RUNGS[t["rung"]]
        assert t["window"]["from"] == "2013-07-08T00:00:00Z"
        # Only the whole window's trials are judged against the constraints and drawn.
        assert (t["feasible"] is None) == (t["rung"] < 2) and (t["pareto"] is False or t["rung"] == 2)
    (last,) = by_rung[2]
    if last["feasible"]:
        assert doc["recommended"] == last["number"]


def test_halving_gives_the_same_frontier_on_two_workers(example: ReplayInput, halved: dict[str, object]) -> None:
    two = document(search(example, workers=2, rungs=RUNGS), example)
    assert json.dumps(two, sort_keys=True) == json.dumps(halved, sort_keys=True)


def test_the_same_trials_without_halving_agree(example: ReplayInput, halved: dict[str, object]) -> None:
    """Every trial of the halving search replayed over the whole window (``--trials-from`` with
    ``--no-halving``): the recommendation is the same trial, or one that saves at most 0.5
    points more of the baseline's node-hours."""
    space = load_space(None)
    fixed = [space.fixed(t["flags"], "t") for t in halved["trials"]]  # type: ignore[attr-defined]
    whole = document(search(example, halving=False, fixed=fixed), example)
    assert [t["flags"] for t in whole["trials"]] == [t["flags"] for t in halved["trials"]]  # type: ignore[attr-defined,index]
    assert all(t["rung"] == 0 and t["window"]["steps"] == 72 for t in whole["trials"])  # type: ignore[attr-defined]
    by_number = {t["number"]: t for t in whole["trials"]}  # type: ignore[attr-defined]
    a, b = halved["recommended"], whole["recommended"]
    assert (a is None) == (b is None)
    if a is not None and a != b:
        assert by_number[b]["savedPercent"] - by_number[a]["savedPercent"] <= 0.5


# ---- what the outputs say ------------------------------------------------------------------------------


def _result(name: str, node_hours: float, overload: float, evicted: int = 0, relief: int = 0) -> PolicyResult:
    return PolicyResult(name, "", (), node_hours=node_hours, overload_node_minutes=overload, cost=node_hours,
                        pods_evicted=evicted, relief_evictions=relief)  # fmt: skip


def _doc(relief: bool, ratio: float | None = None) -> dict[str, object]:
    from scaler.tune.frontier import frontier_dict
    from scaler.tune.search import TrialResult

    none = _result("none", 100.0, 1000.0)
    search = SearchResult(
        trials=[
            TrialResult(0, {"hot-node-relief": relief}, _result("t0", 80.0, 600.0, 50, 40 if relief else 0), None, 0, 288, relief),
            TrialResult(1, {"hot-node-relief": False}, _result("t1", 90.0, 990.0, 5), None, 0, 288, False),
        ],
        references={"none": none, "scaler": _result("scaler", 92.0, 1000.0, 3), "ca-requests": _result("ca", 95.0, 1000.0)},
        rungs=[288],
        rung_trials=[2],
        baselines=[none],
    )  # fmt: skip
    inputs = {"snapshot": "s", "trace": "t", "from": 0.0, "to": 86400.0, "stepSeconds": 300.0, "steps": 288}
    settings = {"sampler": "tpe", "seed": 1, "trials": 2, "generationSize": 8, "trialsFrom": None,
                "maxAddedOverloadNodeMinutes": None if ratio is not None else 0.0, "maxOverloadRatio": ratio}  # fmt: skip
    return frontier_dict(search, load_space(None), inputs, settings, {})


def test_a_recommendation_that_turns_on_relief_says_so_with_its_evictions() -> None:
    import io

    from scaler.tune.frontier import print_front, recommended_yaml
    from scaler.tune.html import render_html

    doc = _doc(relief=True)
    assert doc["recommended"] == 0
    out = io.StringIO()
    print_front(doc, {"hot-node-relief": False}, out, 1.0, "1 worker")
    note = "turns on hot-node relief (hot-node-relief: true), which evicts pods from busy nodes"
    assert note in out.getvalue() and "40 of its 50 evictions" in out.getvalue()
    assert "50 (40 by relief)" in out.getvalue()  # the EVICTIONS column
    text = recommended_yaml(doc, {})
    assert text is not None and note in " ".join(line.lstrip("# ") for line in text.splitlines())
    assert "40 of its 50 evictions" in render_html(doc, {"hot-node-relief": False})
    quiet = _doc(relief=False)
    out = io.StringIO()
    print_front(quiet, {"hot-node-relief": False}, out, 1.0, "1 worker")
    assert "hot-node relief" not in out.getvalue() and "hot-node relief" not in (recommended_yaml(quiet, {}) or "")


def test_overload_ratio_constraint_in_the_frontier() -> None:
    doc = _doc(relief=True, ratio=0.5)
    trials = {t["number"]: t for t in doc["trials"]}  # type: ignore[attr-defined]
    assert trials[0]["overloadRatio"] == 0.6 and trials[1]["overloadRatio"] == 0.99
    assert not trials[0]["feasible"] and not trials[1]["feasible"] and doc["recommended"] is None
    doc = _doc(relief=True, ratio=0.6)
    assert doc["recommended"] == 0 and doc["search"]["maxOverloadRatio"] == 0.6  # type: ignore[index]
