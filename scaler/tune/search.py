"""The search of ``scaler tune``: an Optuna study over replays, by successive halving.

Each trial is a configuration Optuna suggests from the :class:`~scaler.tune.space.Space`, on
top of the ``--config`` mapping, passed to the replay as a typed
:class:`~scaler.config.ScalerConfig` (:func:`scaler.replay.policies.make_policy`). Its figures
against ``none`` (no scale-down) over the same window (:func:`objectives`): node-hours saved
(maximised), overload node-minutes added (minimised), pods evicted (minimised).

**Successive halving** (Jamieson and Talwalkar 2016; the inner loop of Hyperband, Li et al.
2017), with η = 3 and windows of the history as the budget. The rungs are windows that all
start at ``--from``: the full window last, the one before it at least :data:`MIN_LAST_RUNG_SECONDS`
(three days) long and a third of the full window when that is longer, and each earlier one a
third of the next, down to :data:`MIN_FIRST_RUNG_SECONDS` (a day: one cycle of the daily load).
Every trial is replayed over the first rung; the best third (rounded up) of those replayed over
a rung go on to the next one, replayed again from the start over the longer window. A replay is
causal, so a trial's figures over a rung are those of the first steps of its replay over the
full window.

Early rungs rank on node-hours saved and evictions only: over a day, the node-hours saved by 36
flag sets on the bundled example ranked like a week's at Spearman 0.80 (over three days 1.00),
but their added overload only at 0.51 (three days: 0.69), and sets that took overload off over
a day added some over the week. A rung's trials are sorted into Pareto fronts of (saved,
evictions) (Deb's non-dominated sorting), the best front first; within the front that does not
fit whole, more node-hours saved first, then fewer evictions, then the lower trial number. The
overload constraints are checked on the full window only: a trial stopped early is never
feasible, never on the front, never recommended.

The study learns from the first rung, where every trial has figures over the same window: it is
told (saved, evictions) there. Without halving (``--no-halving``, or a window too short for two
rungs) every trial is replayed over the full window and the study is told all three objectives,
with the constraints set on each trial as Optuna's constraints (``Trial.set_constraint``; a
value <= 0 is feasible: Deb's constrained domination in NSGA-II, the feasibility-aware split of
c-TPE in TPE).

**Constraints.** ``max_added_overload``: overload node-minutes a trial may add to no
scale-down's; ``max_overload_ratio``: the trial's overload as a fraction of no scale-down's (0.5
asks for half). A trial is feasible when it meets every constraint given.

**Determinism.** Trials are asked in generations of ``generation_size`` (each trial's parameters
suggested before the next is asked), a generation's replays fan out on a
:class:`scaler.fanout.Pool`, and the results are told in trial-number order once the whole
generation is back; a rung's promotions are decided once all its replays are back. What the
sampler sees, and which trials go on, is therefore the same whatever the number of workers and
the order replays finished in: the same ``seed`` gives the same trials and results from 1
worker or 64.

The first and every later rung also replay ``none`` over their window (the baseline of saved
node-hours and added overload); the full window also replays scaler's defaults (with
``--config``) and ``ca-requests`` (cluster-autoscaler's requests-based rule), the references.

Why not Optuna's pruners: they are for single-objective studies (``Trial.should_prune`` raises
for a multi-objective one), and its ``SuccessiveHalvingPruner`` is the asynchronous variant
(ASHA, Li et al. 2020): a trial is promoted against the trials that reached its rung before it,
so the promotions depend on the order replays finish, and its rungs are fixed multiples
(``min_resource`` × η^k steps) where the last rung before the full window must be three days.

Sources: Optuna's ask-and-tell interface, ``NSGAIISampler``, ``TPESampler`` and
``Trial.set_constraint`` (optuna.readthedocs.io); NSGA-II and its non-dominated sorting (Deb et
al. 2002); MOTPE (Ozaki et al. 2020); c-TPE (Watanabe and Hutter 2023); successive halving
(Jamieson and Talwalkar 2016; Karnin et al. 2013); Hyperband (Li et al. 2017).
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from scaler.fanout import Pool, TaskDone
from scaler.replay.policies import Policy, builtin_policy, make_policy
from scaler.replay.simulate import PolicyResult, ReplayInput, run_policy
from scaler.tune.space import Space, Value

if TYPE_CHECKING:
    pass

__all__ = [
    "ETA",
    "MIN_FIRST_RUNG_SECONDS",
    "MIN_LAST_RUNG_SECONDS",
    "SAMPLERS",
    "Constraints",
    "SearchResult",
    "TrialResult",
    "objectives",
    "promote",
    "run_search",
    "rung_steps",
]

SAMPLERS = ("tpe", "nsga2")
"""``--sampler``: Optuna's multi-objective TPE (default) or NSGA-II."""

ETA = 3
"""Successive halving's η: a third of a rung's trials go on to the next."""

MIN_LAST_RUNG_SECONDS = 3 * 86400.0
"""The rung before the full window is at least three days long."""

MIN_FIRST_RUNG_SECONDS = 86400.0
"""No rung is shorter than a day (one cycle of the daily load)."""

REFERENCES = ("scaler", "ca-requests")
"""Policies replayed over the full window beside the trials, marked on the plot."""


@dataclass(frozen=True, slots=True)
class Constraints:
    """What makes a trial feasible over the full window (``None``: not asked).

    Attributes:
        max_added_overload: overload node-minutes a trial may add to no scale-down's.
        max_overload_ratio: the trial's overload node-minutes as a fraction of no scale-down's.
    """

    max_added_overload: float | None = 0.0
    max_overload_ratio: float | None = None

    @property
    def given(self) -> bool:
        """At least one constraint is asked."""
        return self.max_added_overload is not None or self.max_overload_ratio is not None

    def excess(self, result: PolicyResult, baseline: PolicyResult) -> dict[str, float]:
        """One value per constraint given, by its ``frontier.json`` name, feasible when <= 0
        (Optuna's convention): the added overload above ``max_added_overload``, and the overload
        above ``max_overload_ratio`` x no scale-down's (node-minutes, rounded as the frontier
        writes them)."""
        _, added, _ = objectives(result, baseline)
        out = {}
        if self.max_added_overload is not None:
            out["maxAddedOverloadNodeMinutes"] = added - self.max_added_overload
        if self.max_overload_ratio is not None:
            allowed = self.max_overload_ratio * baseline.overload_node_minutes
            out["maxOverloadRatio"] = round(result.overload_node_minutes - allowed, 1)
        return out

    def feasible(self, result: PolicyResult, baseline: PolicyResult) -> bool:
        """The trial meets every constraint given."""
        return all(v <= 0 for v in self.excess(result, baseline).values())


@dataclass(frozen=True, slots=True)
class TrialResult:
    """One trial: its number, flags (flag → value as written to the config file), its replay
    over the longest rung it reached, that rung's index and length (steps from the start), and
    whether its configuration turns on hot-node relief (which evicts pods from busy nodes).

    ``result`` is the full window's replay when ``steps`` is the full window's."""

    number: int
    flags: dict[str, Value]
    result: PolicyResult
    node: str | None = None
    rung: int = 0
    steps: int = 0
    relief: bool = False


@dataclass(slots=True)
class SearchResult:
    """The study's outcome.

    Attributes:
        trials: every trial, in number order.
        references: the full window's ``none``, ``scaler`` and ``ca-requests`` by name.
        reference_nodes: the Ray node each reference ran on.
        rungs: the rungs' lengths in steps (the last is the full window; one rung: no halving).
        rung_trials: how many trials were replayed over each rung.
        baselines: ``none`` over each rung (the last is ``references["none"]``).
    """

    trials: list[TrialResult] = field(default_factory=list)
    references: dict[str, PolicyResult] = field(default_factory=dict)
    reference_nodes: dict[str, str | None] = field(default_factory=dict)
    rungs: list[int] = field(default_factory=list)
    rung_trials: list[int] = field(default_factory=list)
    baselines: list[PolicyResult] = field(default_factory=list)


def rung_steps(steps: int, step_seconds: float, trials: int) -> list[int]:
    """The rungs' lengths in steps for a window of ``steps`` steps of ``step_seconds`` and
    ``trials`` trials (see the module doc), shortest first, the last ``steps``. One rung (no
    halving) when the window is not longer than the rung before it would be, or with fewer than
    two trials."""
    out = [steps]
    if trials < 2:
        return out
    last = max(math.ceil(steps / ETA), math.ceil(MIN_LAST_RUNG_SECONDS / step_seconds))
    shortest = math.ceil(MIN_FIRST_RUNG_SECONDS / step_seconds)
    size = math.ceil(trials / ETA)
    candidate = last
    while candidate < out[0] and candidate >= shortest and size >= 1:
        out.insert(0, candidate)
        if size == 1:
            break
        size = math.ceil(size / ETA)
        candidate = math.ceil(candidate / ETA)
    return out


def objectives(result: PolicyResult, baseline: PolicyResult) -> tuple[float, float, float]:
    """(node-hours saved, overload node-minutes added, evictions) against ``baseline``, rounded
    as ``frontier.json`` writes them, so the sampler sees what the user reads."""
    return (
        round(baseline.node_hours - result.node_hours, 3),
        round(result.overload_node_minutes - baseline.overload_node_minutes, 1),
        float(result.pods_evicted),
    )


def _fronts(points: Mapping[int, tuple[float, float]]) -> list[list[int]]:
    """``points`` (key → (saved, evictions)) sorted into Pareto fronts, best first: a point is
    in front k+1 when only points of fronts 1..k dominate it (more or as many node-hours saved
    and fewer or as many evictions, better in one)."""

    def dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
        return a[0] >= b[0] and a[1] <= b[1] and (a[0] > b[0] or a[1] < b[1])

    left = dict(points)
    fronts = []
    while left:
        front = sorted(
            k for k, p in left.items() if not any(dominates(q, p) for j, q in left.items() if j != k)
        )
        fronts.append(front)
        for k in front:
            del left[k]
    return fronts


def promote(points: Mapping[int, tuple[float, float]], count: int) -> list[int]:
    """The ``count`` keys of ``points`` (trial number → (saved node-hours, evictions)) that go on
    to the next rung, in number order: whole Pareto fronts first (:func:`_fronts`); within the
    front that does not fit whole, more saved first, then fewer evictions, then the lower
    number."""
    chosen: list[int] = []
    for front in _fronts(points):
        if len(chosen) + len(front) <= count:
            chosen += front
            continue
        ranked = sorted(front, key=lambda k: (-points[k][0], points[k][1], k))
        chosen += ranked[: count - len(chosen)]
        break
    return sorted(chosen)


@dataclass(frozen=True, slots=True)
class _Replay:
    """One replay to run: a policy over the first ``steps`` steps of the window (``None``: all)."""

    policy: Policy
    steps: int | None = None


def _window(inp: ReplayInput, steps: int | None) -> ReplayInput:
    """``inp`` cut after its first ``steps`` replayed steps (the history before them kept);
    numpy views, nothing copied."""
    if steps is None or inp.start_step + steps >= len(inp.usage.times):
        return inp
    end = inp.start_step + steps
    u = inp.usage
    usage = dataclasses.replace(u, times=u.times[:end], cpu=u.cpu[:, :end], memory=u.memory[:, :end])
    return dataclasses.replace(inp, usage=usage)


def _replay_task(inp: ReplayInput, item: _Replay, report: Callable[..., None]) -> PolicyResult:
    """One replay (a trial or a reference), run here or in a Ray task."""
    gc.freeze()  # the shared input is never collected: keep the collector off it
    return run_policy(_window(inp, item.steps), item.policy)


def _sampler(name: str, seed: int, generation_size: int) -> Any:
    """The seeded sampler. Constraints, where asked, are set on each trial
    (``Trial.set_constraint``) before it is told."""
    import optuna

    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(population_size=max(2, generation_size), seed=seed)
    return optuna.samplers.TPESampler(
        seed=seed,
        n_startup_trials=generation_size,
        multivariate=True,
        group=True,  # the relief sub-flags exist only in some trials
        constant_liar=False,
    )


def _reference_policies(base: Mapping[str, Any]) -> dict[str, Policy]:
    """The reference policies replayed over ``base``: no scale-down (the baseline), scaler's
    defaults and ``ca-requests``.

    Raises:
        scaler.replay.policies.PolicyError: ``base`` rejected.
    """
    return {
        "none": make_policy("none", {}, base, "no scale-down", ("--scale-down=false",), scale_down=False),
        "scaler": make_policy("scaler", {}, base, "scaler's defaults"),
        "ca-requests": builtin_policy("ca-requests", base),
    }


@dataclass(slots=True)
class _Run:
    """The state of one search while it runs: the study, the trials' flags, policies and
    latest results, and the progress shown."""

    study: Any
    space: Space
    base: Mapping[str, Any]
    pool: Pool[ReplayInput]
    constraints: Constraints
    on_trial: Callable[[int, int, int, float | None], None] | None
    total: int
    asked: dict[int, tuple[Any, dict[str, Value], Policy]] = field(default_factory=dict)
    done: int = 0
    best: float | None = None

    def ask(self, count: int) -> list[int]:
        """Ask the study for ``count`` trials; their numbers.

        Raises:
            scaler.replay.policies.PolicyError: a suggested value the configuration rejects.
        """
        numbers = []
        for _ in range(count):
            t = self.study.ask()
            flags = self.space.suggest(t, self.base)
            policy = make_policy(f"trial-{t.number}", flags, self.base, f"trial {t.number}")
            self.asked[t.number] = (t, flags, policy)
            numbers.append(t.number)
        return numbers

    def replay(self, items: Sequence[_Replay]) -> list[TaskDone[PolicyResult]]:
        """Replay ``items`` on the pool, reporting progress as each finishes."""
        running = len(items)

        def finished(d: TaskDone[PolicyResult]) -> None:
            nonlocal running
            running -= 1
            if items[d.index].policy.name.startswith("trial-"):
                self.done += 1
            self.progress(running)

        self.progress(running)
        return self.pool.map(_replay_task, items, finished)

    def progress(self, running: int) -> None:
        if self.on_trial is not None:
            self.on_trial(self.done, self.total, running, self.best)


def _first_rung(
    run: _Run, trials: int, generation_size: int, steps: int | None, halving: bool
) -> tuple[PolicyResult, dict[int, TaskDone[PolicyResult]]]:
    """Ask and replay every trial over the first rung (``steps``; ``None``: the full window), a
    generation at a time, telling the study each generation's figures in trial order (with
    ``halving``: saved and evictions; else all three objectives and the constraints). The first
    generation also replays ``none`` over the rung. Returns ``none``'s replay and each trial's.

    Raises:
        scaler.replay.policies.PolicyError: a suggested value the configuration rejects.
        whatever a replay raised.
    """
    baseline: PolicyResult | None = None
    results: dict[int, TaskDone[PolicyResult]] = {}
    while len(results) < trials:
        numbers = run.ask(min(generation_size, trials - len(results)))
        items = [_Replay(run.asked[n][2], steps) for n in numbers]
        if baseline is None:
            items.insert(0, _Replay(_reference_policies(run.base)["none"], steps))
        done = run.replay(items)
        if baseline is None:
            baseline = done.pop(0).result
        for n, d in zip(numbers, done, strict=True):
            results[n] = d
            t = run.asked[n][0]
            saved, added, evictions = objectives(d.result, baseline)
            if halving:
                run.study.tell(t, [saved, evictions])
                continue
            excess = run.constraints.excess(d.result, baseline)
            for key, value in excess.items():
                t.set_constraint(key, value)
            run.study.tell(t, [saved, added, evictions])
            if all(v <= 0 for v in excess.values()) and baseline.node_hours:
                pct = 100.0 * saved / baseline.node_hours
                run.best = pct if run.best is None else max(run.best, pct)
    assert baseline is not None  # trials >= 1
    return baseline, results


def run_search(
    inp: ReplayInput,
    space: Space,
    base: Mapping[str, Any],
    pool: Pool[ReplayInput],
    *,
    trials: int,
    seed: int,
    sampler: str = "tpe",
    generation_size: int = 8,
    constraints: Constraints | None = None,
    halving: bool = True,
    rungs: Sequence[int] | None = None,
    fixed: Sequence[Mapping[str, Any]] = (),
    on_trial: Callable[[int, int, int, float | None], None] | None = None,
) -> SearchResult:
    """Run the study (see the module doc) with replays on ``pool``.

    ``rungs`` are the rungs' lengths in steps, shortest first, the last the whole window
    (default :func:`rung_steps`; ignored without ``halving``). ``fixed``: parameters of the
    first trials (:meth:`~scaler.tune.space.Space.fixed`), replayed as given instead of
    sampled (the trials of an earlier search). ``on_trial(replays of trials
    done, replays of trials in all, replays running, best)`` is called here when replays start
    and whenever one finishes, for a progress display; ``best`` is the largest saving (% of the
    baseline's node-hours) of the full window's feasible trials so far, or ``None``.

    Raises:
        ValueError: ``rungs`` that do not grow or do not end at the whole window.
        scaler.replay.policies.PolicyError: a suggested value the configuration rejects.
        whatever a replay raised.
    """
    import optuna

    constraints = constraints or Constraints()
    plan, sizes = _rung_plan(len(inp.usage.times) - inp.start_step, inp.step, trials, halving, rungs)
    _quiet_optuna()
    halved = len(plan) > 1
    directions: list[Literal["maximize", "minimize"]] = ["maximize", "minimize"]
    if not halved:
        directions.append("minimize")
    study = optuna.create_study(directions=directions, sampler=_sampler(sampler, seed, generation_size))
    for params in fixed:
        study.enqueue_trial(dict(params))
    run = _Run(study, space, base, pool, constraints, on_trial, sum(sizes))
    refs = _reference_policies(base)
    out = SearchResult(rungs=plan, rung_trials=sizes)
    baseline, results = _first_rung(run, trials, generation_size, plan[0] if halved else None, halved)
    out.baselines.append(baseline)
    latest = {n: (0, d) for n, d in results.items()}
    for k in range(1, len(plan)):
        going = promote({n: _saved_and_evictions(d.result, baseline) for n, d in results.items()}, sizes[k])
        full = k == len(plan) - 1
        steps = None if full else plan[k]
        names = ["none", *(REFERENCES if full else ())]
        done = run.replay(
            [*(_Replay(refs[r], steps) for r in names), *(_Replay(run.asked[n][2], steps) for n in going)]
        )
        for name, d in zip(names, done, strict=False):
            out.reference_nodes[name] = d.node
            if full:
                out.references[name] = d.result
        baseline = done[0].result
        out.baselines.append(baseline)
        results = dict(zip(going, done[len(names) :], strict=True))
        latest |= {n: (k, d) for n, d in results.items()}
    if not halved:
        done = run.replay([_Replay(refs[name]) for name in REFERENCES])
        for name, d in zip(REFERENCES, done, strict=True):
            out.references[name], out.reference_nodes[name] = d.result, d.node
    out.references["none"] = baseline
    for n in sorted(latest):
        k, d = latest[n]
        _, flags, policy = run.asked[n]
        out.trials.append(TrialResult(n, flags, d.result, d.node, k, plan[k], policy.config.hot_node_relief))
        if k == len(plan) - 1 and constraints.feasible(d.result, baseline) and baseline.node_hours:
            pct = 100.0 * (baseline.node_hours - d.result.node_hours) / baseline.node_hours
            run.best = pct if run.best is None else max(run.best, pct)
    run.progress(0)
    return out


def _quiet_optuna() -> None:
    """Keep Optuna's own log lines and its warnings about experimental and fixed parameters
    off the terminal."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message="Fixed parameter", category=UserWarning)


def _rung_plan(
    total_steps: int, step: float, trials: int, halving: bool, rungs: Sequence[int] | None
) -> tuple[list[int], list[int]]:
    """The rungs' lengths in steps (shortest first, the last ``total_steps``) and how many
    trials each replays (``trials``, then a third of the rung before, rounded up).

    Raises:
        ValueError: ``rungs`` that do not grow or do not end at the whole window.
    """
    plan = [total_steps] if not halving else list(rungs or rung_steps(total_steps, step, trials))
    if plan[-1] != total_steps or any(a >= b for a, b in itertools.pairwise(plan)):
        raise ValueError(f"rungs must grow to the whole window of {total_steps} steps, got {plan}")
    sizes = [trials]
    for _ in plan[1:]:
        sizes.append(math.ceil(sizes[-1] / ETA))
    return plan, sizes


def _saved_and_evictions(result: PolicyResult, baseline: PolicyResult) -> tuple[float, float]:
    """What early rungs rank on: node-hours saved against ``baseline`` and evictions."""
    saved, _, evictions = objectives(result, baseline)
    return saved, evictions
