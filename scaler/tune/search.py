"""The search of ``scaler tune``: an Optuna multi-objective study over replays.

Each trial is one replay (:func:`scaler.replay.simulate.run_policy`) of the flags Optuna
suggests from the :class:`~scaler.tune.space.Space`, on top of the ``--config`` mapping. Its
objectives (Optuna directions maximise, minimise, minimise):

1. node-hours saved against ``none`` (no scale-down) over the same replay;
2. overload node-minutes added over ``none``'s (the replay's overload: real usage above 100% of
   allocatable CPU or 95% of memory);
3. pods evicted (drains and hot-node relief).

The constraint ``added overload <= max_added_overload`` (node-minutes) is Optuna's
``constraints_func`` (a trial is feasible when the returned value is <= 0), so the sampler
prefers feasible trials (Deb's constrained domination in NSGA-II; the feasibility-aware
split of c-TPE in TPE).

Determinism: trials are asked in generations of ``generation_size`` (asked one after the other,
each trial's parameters suggested before the next is asked), the generation's replays fan out
on a :class:`scaler.fanout.Pool`, and the results are told in trial-number order once the
whole generation is back. What the sampler sees when it samples trial ``n`` is then the same
whatever the number of workers and the order the replays finished in, and with the same
``seed`` the same trials, and so the same results, come out of 1 worker or 64.

The first generation also replays the references: ``none`` (the baseline), ``scaler``'s
defaults (with ``--config``) and ``ca-requests`` (cluster-autoscaler's requests-based rule).

Sources: Optuna's ask-and-tell interface, ``NSGAIISampler`` and ``TPESampler`` with
``constraints_func`` (optuna.readthedocs.io); NSGA-II (Deb et al. 2002); MOTPE (Ozaki et al.
2020); c-TPE (Watanabe and Hutter 2023).
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scaler.fanout import Pool, TaskDone
from scaler.replay.policies import BUILTIN_POLICIES, Policy, build_policy
from scaler.replay.simulate import PolicyResult, ReplayInput, run_policy
from scaler.tune.space import Space, Value

if TYPE_CHECKING:
    import optuna

__all__ = ["SAMPLERS", "SearchResult", "TrialResult", "flag_args", "run_search"]

SAMPLERS = ("tpe", "nsga2")
"""``--sampler``: Optuna's multi-objective TPE (default) or NSGA-II."""

REFERENCES = ("none", "scaler", "ca-requests")
"""Policies replayed beside the trials: the baseline and the two marked on the plot."""


@dataclass(frozen=True, slots=True)
class TrialResult:
    """One trial: its number, flags (flag → value as written to the config file), and replay."""

    number: int
    flags: dict[str, Value]
    result: PolicyResult
    node: str | None = None


@dataclass(slots=True)
class SearchResult:
    """The study's outcome: the trials in number order, and the references by name
    (``none``, ``scaler``, ``ca-requests``)."""

    trials: list[TrialResult] = field(default_factory=list)
    references: dict[str, PolicyResult] = field(default_factory=dict)
    reference_nodes: dict[str, str | None] = field(default_factory=dict)


def flag_args(flags: Mapping[str, Value]) -> list[str]:
    """``--flag=value`` strings for :func:`scaler.replay.policies.build_policy` (booleans as
    ``true``/``false``)."""
    out = []
    for k, v in flags.items():
        text = ("true" if v else "false") if isinstance(v, bool) else str(v)
        out.append(f"--{k}={text}")
    return out


def _replay_task(inp: ReplayInput, policy: Policy, report: Callable[..., None]) -> PolicyResult:
    """One replay (a trial or a reference), run here or in a Ray task."""
    gc.freeze()  # the shared input is never collected: keep the collector off it
    return run_policy(inp, policy)


def objectives(result: PolicyResult, baseline: PolicyResult) -> tuple[float, float, float]:
    """(node-hours saved, overload node-minutes added, evictions) against ``baseline``, rounded
    as ``frontier.json`` writes them, so the sampler sees what the user reads."""
    return (
        round(baseline.node_hours - result.node_hours, 3),
        round(result.overload_node_minutes - baseline.overload_node_minutes, 1),
        float(result.pods_evicted),
    )


def _sampler(name: str, seed: int, generation_size: int, max_added: float) -> Any:
    """The seeded sampler. The constraint is set on each trial (``Trial.set_constraint``) where
    Optuna has it (5.0 on), else read by ``constraints_func`` from the trial's user attribute."""
    import optuna

    def read(trial: Any) -> list[float]:
        return [float(trial.user_attrs["addedOverloadNodeMinutes"]) - max_added]

    constraints = None if hasattr(optuna.trial.Trial, "set_constraint") else read

    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(
            population_size=max(2, generation_size), seed=seed, constraints_func=constraints
        )
    return optuna.samplers.TPESampler(
        seed=seed,
        n_startup_trials=generation_size,
        multivariate=True,
        group=True,  # the relief sub-flags exist only in some trials
        constant_liar=False,
        constraints_func=constraints,
    )


def _reference_policies(base: Mapping[str, Any]) -> dict[str, Policy]:
    """The reference policies every study replays once over ``base``: no scale-down (the
    baseline), scaler's defaults and ``ca-requests``.

    Raises:
        scaler.replay.policies.PolicyError: ``base`` rejected.
    """
    return {
        "none": build_policy("none", ["--scale-down=false"], base, "no scale-down"),
        "scaler": build_policy("scaler", [], base, "scaler's defaults"),
        "ca-requests": build_policy(
            "ca-requests", list(BUILTIN_POLICIES["ca-requests"][1]), base, BUILTIN_POLICIES["ca-requests"][0]
        ),
    }


def _ask(
    study: optuna.Study, space: Space, base: Mapping[str, Any], count: int
) -> list[tuple[optuna.trial.Trial, dict[str, Value], Policy]]:
    """Ask ``study`` for ``count`` trials: each trial, its suggested flags and its policy.

    Raises:
        scaler.replay.policies.PolicyError: a suggested value the configuration rejects.
    """
    asked: list[tuple[optuna.trial.Trial, dict[str, Value], Policy]] = []
    for _ in range(count):
        t = study.ask()
        flags = space.suggest(t, base)
        asked.append((t, flags, build_policy(f"trial-{t.number}", flag_args(flags), base)))
    return asked


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
    max_added_overload: float = 0.0,
    on_trial: Callable[[int, int, float | None], None] | None = None,
) -> SearchResult:
    """Run the study (see the module doc) with replays on ``pool``.

    ``on_trial(trials done, replays running, best)`` is called here when a generation starts
    and whenever a replay finishes, for a progress display; ``best`` is the largest saving (%
    of the baseline's node-hours) of the told trials within the constraint, or ``None``.

    Raises:
        scaler.replay.policies.PolicyError: a suggested value the configuration rejects.
        whatever a replay raised.
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    study = optuna.create_study(
        directions=["maximize", "minimize", "minimize"],
        sampler=_sampler(sampler, seed, generation_size, max_added_overload),
    )
    out = SearchResult()
    refs = _reference_policies(base)
    done = 0
    best: float | None = None
    while len(out.trials) < trials:
        count = min(generation_size, trials - len(out.trials))
        asked = _ask(study, space, base, count)
        items = [p for _, _, p in asked]
        first = not out.references
        if first:
            items = [*refs.values(), *items]
        running = len(items)

        skip = len(refs) if first else 0

        def finished(d: TaskDone[PolicyResult], skip: int = skip, best: float | None = best) -> None:
            nonlocal done, running
            running -= 1
            if d.index >= skip:
                done += 1
            if on_trial is not None:
                on_trial(done, running, best)

        if on_trial is not None:
            on_trial(done, running, best)
        results = pool.map(_replay_task, items, finished)
        if first:
            for name, d in zip(refs, results[: len(refs)], strict=True):
                out.references[name] = d.result
                out.reference_nodes[name] = d.node
            results = results[len(refs) :]
        baseline = out.references["none"]
        for (t, flags, _), d in zip(asked, results, strict=True):
            saved, added, evictions = objectives(d.result, baseline)
            t.set_user_attr("addedOverloadNodeMinutes", added)
            if hasattr(t, "set_constraint"):
                t.set_constraint("addedOverloadNodeMinutes", added - max_added_overload)
            study.tell(t, [saved, added, evictions])
            out.trials.append(TrialResult(t.number, flags, d.result, d.node))
            if added <= max_added_overload and baseline.node_hours:
                pct = 100.0 * saved / baseline.node_hours
                best = pct if best is None else max(best, pct)
    return out
