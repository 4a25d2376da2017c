"""Claims and devices in the simulation state, DRA utilization, and undecidable claims.

The state follows moves and reverts like the other stateful filters; cluster-autoscaler's DRA
snapshot (``simulator/dynamicresources/snapshot/snapshot.go``: ``UnreservePodClaims`` deallocates
a claim owned by the pod or left without users) is the reference for what a move does; the
utilization cases follow the examples of ``calculatePoolUtil`` in CA's
``simulator/dynamicresources/utils/utilization.go`` and its ``allCurrentGenSlices`` error.
"""

from __future__ import annotations

from typing import Any

from dra_objects import (
    claim,
    device,
    device_class,
    local_slice,
    node,
    node_metrics,
    pod,
    request,
    template,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.config import ScalerConfig
from scaler.model.snapshot import ClusterSnapshot, build_snapshot
from scaler.simulator.dra_state import CANNOT_ALLOCATE, NOT_AVAILABLE
from scaler.simulator.registry import load_filters
from scaler.simulator.removal import RemovalSimulator
from scaler.simulator.state import ClusterState
from scaler.utilization import dra_utilization

ACC = {"cloud.google.com/gke-accelerator": "nvidia-l4"}


def cluster(*extra: dict[str, Any], devices: int = 2) -> ClusterSnapshot:
    """gpu-1 (its pod infer-0 holds gpu-0), gpu-2 (free devices), cpu-1 (no device)."""
    objs = [
        node("gpu-1", labels=ACC), node("gpu-2", labels=ACC), node("cpu-1", pool="cpu"),
        local_slice("gpu-1", [device(f"gpu-{i}") for i in range(devices)]),
        local_slice("gpu-2", [device(f"gpu-{i}") for i in range(devices)]),
        device_class(), template("tmpl"),
        claim("infer-0-gpu", owner="infer-0", allocated=[("gpu", "gpu-1", "gpu-0")], node_name="gpu-1", reserved_for=["infer-0"]),
        pod("infer-0", "gpu-1", template_claims={"gpu": "infer-0-gpu"}),
        node_metrics("gpu-1"), node_metrics("gpu-2"), node_metrics("cpu-1"),
        *extra,
    ]  # fmt: skip
    return build_snapshot(objs)


def pod_of(snap: ClusterSnapshot, name: str) -> Any:
    return next(p for p in snap.pods if p.name == name)


def test_a_moved_pod_gets_devices_on_its_destination_and_a_revert_gives_them_back() -> None:
    snap = cluster(devices=1)
    state = ClusterState(snap)
    p = pod_of(snap, "infer-0")
    before = (dict(state.dra.in_use), dict(state.dra.allocation), dict(state.dra.reserved))
    mark = state.checkpoint()
    state.unschedule(p, "gpu-1")
    assert state.dra.allocation[("ml", "infer-0-gpu")] is None  # made for the pod: it goes with it
    assert state.dra.fits(p, state.nodes["cpu-1"].node) == CANNOT_ALLOCATE
    assert state.dra.fits(p, state.nodes["gpu-2"].node) is None
    state.place(p, "gpu-2")
    alloc = state.dra.allocation[("ml", "infer-0-gpu")]
    assert alloc is not None and [d.id for d in alloc.devices] == [("gpu.example.com", "gpu-2", "gpu-0")]
    assert state.dra.reserved[("ml", "infer-0-gpu")] == ("infer-0",)
    assert state.dra.in_use == {("gpu.example.com", "gpu-2", "gpu-0"): 1}  # gpu-1's device is free
    state.revert(mark)
    assert (state.dra.in_use, state.dra.allocation, state.dra.reserved) == before


def test_devices_taken_earlier_in_the_loop_are_taken() -> None:
    """Two pods each needing one device, one free device on gpu-2: the first fits, the second
    no longer does once the first is placed."""
    extra = [
        claim("infer-1-gpu", owner="infer-1", allocated=[("gpu", "gpu-1", "gpu-1")], node_name="gpu-1", reserved_for=["infer-1"]),
        pod("infer-1", "gpu-1", template_claims={"gpu": "infer-1-gpu"}),
        claim("busy", allocated=[("gpu", "gpu-2", "gpu-0")], node_name="gpu-2", reserved_for=["keeper"]),
        pod("keeper", "gpu-2", claims={"gpu": "busy"}),
    ]  # fmt: skip
    snap = cluster(*extra)
    state = ClusterState(snap)
    sim = RemovalSimulator(state, load_filters(ScalerConfig(filter_plugins=())))
    pods = [pod_of(snap, "infer-0"), pod_of(snap, "infer-1")]
    result = sim.simulate("gpu-1", pods, [["gpu-2", "cpu-1"]])
    assert not result.success
    assert "cannot allocate all claims" in result.failure.summary()
    assert state.dra.allocation[("ml", "infer-0-gpu")] is not None  # reverted as it was


def test_a_shared_claim_keeps_its_allocation_and_pins_its_pods() -> None:
    """A claim used by a pod that stays keeps its devices: a pod moving with it only goes where
    the allocation reaches (its node selector)."""
    extra = [
        claim("shared", allocated=[("gpu", "gpu-1", "gpu-1")], node_name="gpu-1", reserved_for=["a-0", "b-0"]),
        pod("a-0", "gpu-1", claims={"gpu": "shared"}),
        pod("b-0", "gpu-1", claims={"gpu": "shared"}),
    ]
    snap = cluster(*extra)
    state = ClusterState(snap)
    a = pod_of(snap, "a-0")
    state.unschedule(a, "gpu-1")
    assert state.dra.allocation[("ml", "shared")] is not None
    assert state.dra.fits(a, state.nodes["gpu-2"].node) == NOT_AVAILABLE
    assert state.dra.fits(a, state.nodes["gpu-1"].node) is None
    # Both users leave: the claim is free and is allocated again where the first one lands.
    state.unschedule(pod_of(snap, "b-0"), "gpu-1")
    assert state.dra.allocation[("ml", "shared")] is None
    state.place(a, "gpu-2")
    assert state.dra.fits(pod_of(snap, "b-0"), state.nodes["gpu-2"].node) is None
    assert state.dra.fits(pod_of(snap, "b-0"), state.nodes["cpu-1"].node) == NOT_AVAILABLE


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["infer-0", "infer-1"]), st.sampled_from(["gpu-1", "gpu-2"])), max_size=6))
def test_moves_then_revert_restore_the_devices_in_use(moves: list[tuple[str, str]]) -> None:
    """Any sequence of moves, reverted, leaves the claims and devices as they were; devices in
    use always equal those of the allocations (never one twice)."""
    extra = [
        claim("infer-1-gpu", owner="infer-1", allocated=[("gpu", "gpu-2", "gpu-1")], node_name="gpu-2", reserved_for=["infer-1"]),
        pod("infer-1", "gpu-2", template_claims={"gpu": "infer-1-gpu"}),
    ]  # fmt: skip
    snap = cluster(*extra)
    state = ClusterState(snap)
    where = {"infer-0": "gpu-1", "infer-1": "gpu-2"}
    before = (dict(state.dra.in_use), dict(state.dra.allocation))
    mark = state.checkpoint()
    for name, dest in moves:
        p = pod_of(snap, name)
        state.unschedule(p, where[name])
        if state.dra.fits(p, state.nodes[dest].node) is None:
            state.place(p, dest)
            where[name] = dest
        else:
            state.place(p, where[name])
        counted: dict[tuple[str, str, str], int] = {}
        for alloc in state.dra.allocation.values():
            for d in alloc.devices if alloc is not None else ():
                counted[d.id] = counted.get(d.id, 0) + 1
        assert counted == state.dra.in_use and all(v == 1 for v in counted.values())
    state.revert(mark)
    assert (state.dra.in_use, state.dra.allocation) == before


def test_undecidable_claims_are_named() -> None:
    bad = [request(selectors=['device.attributes["gpu.example.com"].model.foo()'])]
    extra = [
        claim("odd", requests=bad), pod("odd-0", "cpu-1", claims={"gpu": "odd"}),
        pod("lost-0", "cpu-1", claims={"gpu": "nowhere"}),
        pod("early-0", "cpu-1", template_claims={}),
    ]  # fmt: skip
    early = extra[-1]
    early["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]
    state = ClusterState(cluster(*extra))
    dra = state.dra
    snap = state.snapshot
    assert dra.undecidable(pod_of(snap, "odd-0")) == (
        "ml/odd", "request gpu: the request: selector 'device.attributes[\"gpu.example.com\"].model.foo()': "
        "CEL function foo is not evaluated by scaler",
    )  # fmt: skip
    assert dra.undecidable(pod_of(snap, "lost-0")) == ("ml/nowhere", "ResourceClaim not found")
    assert dra.undecidable(pod_of(snap, "early-0")) == ("ml/early-0 claim gpu", "no ResourceClaim made yet (template tmpl)")
    assert dra.undecidable(pod_of(snap, "infer-0")) is None


def test_dra_utilization_counts_allocated_devices_of_the_newest_generation() -> None:
    snap = cluster(devices=4)
    u = dra_utilization(snap.node_by_name["gpu-1"], snap.pods_by_node["gpu-1"], snap.dra)
    assert (u.value, u.resource, u.error) == (0.25, "gpu.example.com/gpu-1", "")
    free = dra_utilization(snap.node_by_name["gpu-2"], snap.pods_by_node["gpu-2"], snap.dra)
    assert free.value == 0.0


def test_dra_utilization_of_an_incomplete_pool_is_an_error() -> None:
    incomplete = local_slice("gpu-9", [device("gpu-0")], count=2, name="gpu-9-a")
    snap = build_snapshot([node("gpu-9", labels=ACC), incomplete, node_metrics("gpu-9")])
    u = dra_utilization(snap.node_by_name["gpu-9"], (), snap.dra)
    assert u.error == "pool 'gpu-9' error: newest generation: 1, slice count: 2 - found only 1 slices"


def test_dra_utilization_skips_admin_access_and_takes_the_highest_pool() -> None:
    objs = [
        node("gpu-9", labels=ACC),
        local_slice("gpu-9", [device("gpu-0"), device("gpu-1")]),
        local_slice("gpu-9", [device("nic-0")], driver="nic.example.com", name="gpu-9-nic"),
        claim("admin", allocated=[("gpu", "gpu-9", "gpu-0")], node_name="gpu-9", reserved_for=["a"]),
        pod("a", "gpu-9", claims={"gpu": "admin"}),
        node_metrics("gpu-9"),
    ]
    objs[3]["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    snap = build_snapshot(objs)
    u = dra_utilization(snap.node_by_name["gpu-9"], snap.pods_by_node["gpu-9"], snap.dra)
    assert u.value == 0.0  # an admin-access allocation takes no device
    objs[3]["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = False
    snap = build_snapshot(objs)
    u = dra_utilization(snap.node_by_name["gpu-9"], snap.pods_by_node["gpu-9"], snap.dra)
    assert (u.value, u.resource) == (0.5, "gpu.example.com/gpu-9")
    assert [p[:2] for p in u.pools] == [("gpu.example.com", "gpu-9"), ("nic.example.com", "gpu-9")]


def test_dra_utilization_of_partitionable_devices_follows_calculate_pool_util() -> None:
    """``calculatePoolUtil``'s example: 2 atomic devices, 1 partitionable (its counter set at 50%
    used) and 1 atomic allocated: (0.5 × 2/3) + (0.5 × 1/3) = 50%."""
    counters = [{"name": "gpu-0-counters", "counters": {"memory": {"value": "8Gi"}}}]
    half = {"name": "gpu-0-half", "consumesCounters": [{"counterSet": "gpu-0-counters", "counters": {"memory": {"value": "4Gi"}}}]}
    objs = [
        node("gpu-9", labels=ACC),
        local_slice("gpu-9", [device("a-0"), device("a-1"), half], shared_counters=counters),
        claim("c1", allocated=[("gpu", "gpu-9", "a-0"), ("gpu", "gpu-9", "gpu-0-half")], node_name="gpu-9", reserved_for=["p"]),
        pod("p", "gpu-9", claims={"gpu": "c1"}),
        node_metrics("gpu-9"),
    ]  # fmt: skip
    snap = build_snapshot(objs)
    u = dra_utilization(snap.node_by_name["gpu-9"], snap.pods_by_node["gpu-9"], snap.dra)
    assert abs(u.value - 0.5) < 1e-9


def test_the_replay_world_keeps_claims_and_slices_consistent_as_pods_move() -> None:
    """An evicted GPU pod's claim (made from a template) goes with it; its replacement, placed by
    the replay's scheduler on the node with a free device, gets that device written back; a
    deleted node's slices go; a scaled-up node publishes its pool's template node's slices."""
    import numpy as np

    from scaler.replay.sim_records import UsageTable
    from scaler.replay.world import World

    snap = cluster(devices=1)
    t0 = snap.now
    usage = UsageTable(np.array([t0, t0 + 300.0]), (), np.zeros((0, 2)), np.zeros((0, 2)))
    world = World(snap, usage, {}, ScalerConfig())
    p = next(x for x in world.pods.values() if x.name == "infer-0")
    world.evict(p)
    key = ("ml", "infer-0-gpu")
    assert world.dra.claims[key].allocation is None and world.dra.claims[key].reserved_for == ()
    world.delete_node("gpu-1")
    assert "gpu-1" not in world.dra.local_slices
    world.schedule_pending()
    moved = world.pods[p.uid]
    assert moved.node_name == "gpu-2"
    claim_now = world.dra.claims[key]
    assert claim_now.allocation is not None and [d.pool for d in claim_now.allocation.devices] == ["gpu-2"]
    assert claim_now.reserved_for == ("infer-0",)
    assert world.snapshot().dra is world.dra
    # The only device left is taken: a second eviction finds no place, and the pod stays pending.
    world.evict(moved)
    world.delete_node("gpu-2")
    world.schedule_pending()
    assert not world.pods[p.uid].node_name
    assert world.scale_up() == 1  # the gpu pool's template node has a device for it
    world.advance(1)
    added = [n for n in world.nodes if n.startswith("gpu") and n not in ("gpu-1", "gpu-2")]
    assert len(added) == 1 and added[0] in world.dra.local_slices
    assert world.pods[p.uid].node_name == added[0]
