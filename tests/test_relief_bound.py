"""benchmarks.relief_bound: the classification of an overloaded node-step by what blocks its relief,
one hand-built case per category, and the replay's ``observe`` hook counting the same node-steps
as the replay's overload figure."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from benchmarks.relief_bound import Blocker, BoundCounter, PodOnNode, Room, Verdict, classify, main
from scaler.cmdline import bundled_example
from scaler.model.records import Pod, Taint, Toleration
from scaler.replay.policies import parse_policies
from scaler.replay.simulate import OVERLOAD_CPU, OVERLOAD_MEMORY, run_policy
from tests.builders import GI, MI, make_node, make_pod
from tests.test_replay import overload_input

NODE = make_node("hot", cpu_m=4000, mem=16 * GI)
"""4 CPU, 16 GiB: over at > 4000m or > 15.2 GiB; TargetUsage on it: <= 1800m, < 12 GiB."""
ROOMY = Room("cold", 4000, 16 * GI)
DS = make_pod("ds-hot", node="hot", cpu_m=100, mem=128 * MI, owner_kind="DaemonSet", owner_name="ds")


def _on(pod: Pod, cpu: float, mem: float = 100 * MI, movable: bool = True) -> PodOnNode:
    return PodOnNode(pod, cpu, mem, movable)


def _app(name: str, cpu_m: int = 500, mem: int = 1 * GI, **kw: object) -> Pod:
    return make_pod(name, node="hot", cpu_m=cpu_m, mem=mem, **kw)


def _verdict(
    cpu: float,
    pods: Sequence[PodOnNode],
    rooms: Sequence[Room] = (ROOMY,),
    mem: float = 4 * GI,
) -> Blocker | None:
    v = classify(NODE, cpu, mem, pods, rooms)
    return None if v is None else v.blocker


def test_a_node_under_the_line_has_no_verdict() -> None:
    assert classify(NODE, 4000.0, 15.2 * GI, [_on(_app("a"), 3000.0)], [ROOMY]) is None


def test_overhead_when_the_node_is_over_without_any_workload_pod() -> None:
    # The DaemonSet pod and overhead alone use 4100m: moving the workload pod does not help.
    pods = [_on(DS, 4000.0), _on(_app("a"), 300.0)]
    assert _verdict(4400.0, pods) is Blocker.OVERHEAD


def test_drain_rules_when_the_pod_that_must_go_is_kept() -> None:
    pods = [_on(DS, 100.0), _on(_app("kept"), 1000.0, movable=False), _on(_app("a"), 300.0)]
    # Without both workload pods 3100m (under); without the movable one only 4100m (over).
    assert _verdict(4400.0, pods) is Blocker.DRAIN_RULES
    pods[1] = _on(_app("kept"), 1000.0, movable=True)
    assert _verdict(4400.0, pods) is Blocker.RELIEVABLE


def test_target_usage_when_the_pod_is_too_big_even_for_an_idle_node() -> None:
    big = [_on(DS, 100.0), _on(_app("big"), 2000.0)]  # 2000m > 45% of 4000m
    assert _verdict(4400.0, big) is Blocker.TARGET_USAGE
    # Its request counts too: 300m of usage but 2000m requested.
    asks = [_on(DS, 100.0), _on(_app("asks", cpu_m=2000), 300.0), _on(_app("b"), 0.0)]
    assert _verdict(4100.0, asks) is Blocker.TARGET_USAGE
    # Memory: at 75% of the node's memory it fails (strictly below passes).
    mem = [_on(DS, 100.0, 0.0), _on(_app("m", mem=GI), 100.0, 12 * GI)]
    assert _verdict(1000.0, mem, mem=15.5 * GI) is Blocker.TARGET_USAGE
    mem[1] = _on(_app("m", mem=GI), 100.0, 12 * GI - 1)
    assert _verdict(1000.0, mem, mem=15.5 * GI) is Blocker.RELIEVABLE


def test_no_room_when_the_request_fits_on_no_other_node() -> None:
    pods = [_on(DS, 100.0), _on(_app("a", cpu_m=1000), 1500.0)]
    assert _verdict(4400.0, pods, [Room("cold", 999, 16 * GI)]) is Blocker.NO_ROOM
    assert _verdict(4400.0, pods, [Room("cold", 4000, 512 * MI)]) is Blocker.NO_ROOM
    assert _verdict(4400.0, pods, [Room("hot", 4000, 16 * GI)]) is Blocker.NO_ROOM, "not onto itself"
    assert _verdict(4400.0, pods, [Room("cold", 1000, 1 * GI)]) is Blocker.RELIEVABLE


def test_no_room_on_a_node_whose_taint_the_pod_does_not_tolerate() -> None:
    taint = Taint("dedicated", "gpu", "NoSchedule")
    tainted = [Room("cold", 4000, 16 * GI, (taint,))]
    pods = [_on(DS, 100.0), _on(_app("a"), 1500.0)]
    assert _verdict(4400.0, pods, tainted) is Blocker.NO_ROOM
    tolerant = _app("a", tolerations=(Toleration("dedicated", "Equal", "gpu", "NoSchedule"),))
    assert _verdict(4400.0, [_on(DS, 100.0), _on(tolerant, 1500.0)], tainted) is Blocker.RELIEVABLE
    soft = [Room("cold", 4000, 16 * GI, (Taint("scaler.io/hot", "1", "PreferNoSchedule"),))]
    assert _verdict(4400.0, pods, soft) is Blocker.RELIEVABLE, "PreferNoSchedule never blocks"


def test_relievable_and_the_resource_and_pod_facts() -> None:
    pods = [_on(DS, 100.0), _on(_app("a"), 1500.0, 8 * GI), _on(_app("b", cpu_limit_millicores=2000), 1500.0)]
    assert classify(NODE, 4400.0, 4 * GI, pods, [ROOMY]) == Verdict("cpu", Blocker.RELIEVABLE, False, True)
    limited = [_on(DS, 100.0), _on(_app("a", memory_limit_bytes=16 * GI), 500.0, 16.5 * GI)]
    v = classify(NODE, 1000.0, 17 * GI, limited, [ROOMY])
    assert v == Verdict(
        "memory", Blocker.TARGET_USAGE, one_pod_above_allocatable=True, pod_without_limit=False
    )


def test_observe_hook_classifies_every_overloaded_node_step_of_the_replay() -> None:
    # test_replay's overload input: batch's 3.9 cores overload n3 for 3 steps (too big for
    # TargetUsage anywhere), web's 8 GiB per pod overloads n1 and n2 on memory for 2 steps
    # (movable, under TargetUsage's memory target, and n4 has room for their requests).
    inp = overload_input()
    policy = parse_policies(["none"])[0]
    counter = BoundCounter(policy.config, (OVERLOAD_CPU, OVERLOAD_MEMORY))
    result = run_policy(inp, policy, observe=counter)
    assert counter.counts["all", "cpu"] + counter.counts["all", "memory"] == sum(result.overloaded) == 7
    assert counter.counts["all", "cpu"] == 3
    assert counter.counts[Blocker.TARGET_USAGE.value, "cpu"] == 3
    assert counter.counts[Blocker.RELIEVABLE.value, "memory"] == 4
    assert counter.counts["pod without a limit", "cpu"] == 3
    assert counter.counts["one pod above allocatable", "cpu"] == 0


def test_bad_input_is_one_line_naming_it_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv, named in [
        (["--snapshot", str(tmp_path / "missing"), "--trace", str(tmp_path)], "missing"),
        (
            ["--snapshot", str(bundled_example()), "--trace", str(tmp_path), "--policy", "none,seed"],
            "none,seed",
        ),
        (["--snapshot", str(bundled_example()), "--trace", str(tmp_path), "--from", "soon"], "soon"),
    ]:
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("python -m benchmarks.relief_bound: error:") and named in err
        assert len(err.splitlines()) == 1
