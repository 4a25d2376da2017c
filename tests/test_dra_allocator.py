"""The structured allocator against upstream's own table.

Each case is an entry of kube-scheduler's allocator tests, translated: ``staging/src/
k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go``
(Kubernetes 1.35, ``TestAllocator``), named as upstream names it. Upstream's helpers, as
rebuilt here: ``class(name, driver)`` selects ``device.driver == driver``; ``sliceWithOneDevice``
publishes ``device-1`` in a node-local pool; a request asks ``count`` devices of one class. An
upstream "expectError" is an :class:`AllocationError` here, or no allocation where upstream's
error only fails the node; the simulation never moves a pod either way.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from scaler.model.dra import (
    AttributeValue,
    ClaimRequest,
    ClaimSpec,
    CounterSet,
    Device,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DraObjects,
    ResourceSlice,
    VersionValue,
)
from scaler.model.records import Node, Resources
from scaler.simulator.dra_alloc import AllocationError, allocate

DRIVER_A, DRIVER_B = "driver-a", "driver-b"
CLASS_A, CLASS_B = "class-a", "class-b"
NODE1, NODE2 = "node-1", "node-2"
GI = 2**30


def node(name: str, region: str = "region-1") -> Node:
    return Node(name, Resources(8000, 32 * GI, 0, 110), labels={"region": region})


def cls(name: str, driver: str) -> DeviceClass:
    return DeviceClass(name, (f'device.driver == "{driver}"',))


def dev(name: str, capacity: dict[str, str] | None = None, attrs: dict[str, AttributeValue] | None = None,
        counters: tuple[CounterSet, ...] = ()) -> Device:  # fmt: skip
    from scaler.model.quantity import parse_quantity

    return Device(name, attrs or {}, {k: parse_quantity(v) for k, v in (capacity or {}).items()}, counters)


def slice_(name: str, node_name: str, pool: str, driver: str, *devices: Device, count: int = 1,
           generation: int = 1, counters: tuple[CounterSet, ...] = ()) -> ResourceSlice:  # fmt: skip
    return ResourceSlice(name, driver, pool, generation, count, node_name, devices=devices or (dev("device-1"),),
                         shared_counters=counters)  # fmt: skip


def req(name: str, class_name: str = CLASS_A, count: int = 1, *selectors: str, mode: str = "ExactCount",
        admin: bool = False) -> DeviceRequest:  # fmt: skip
    return DeviceRequest(name, class_name, tuple(selectors), mode, count, admin)


def claim(*requests: DeviceRequest, constraints: tuple[DeviceConstraint, ...] = ()) -> ClaimSpec:
    return ClaimSpec(tuple(ClaimRequest(r.name, r) for r in requests), constraints)


def first_available(name: str, *subs: DeviceRequest) -> ClaimSpec:
    return ClaimSpec((ClaimRequest(name, None, subs),))


def run(claims: list[ClaimSpec], classes: list[DeviceClass], slices: list[ResourceSlice], at: Node,
        in_use: dict[tuple[str, str, str], int] | None = None) -> Any:  # fmt: skip
    dra = DraObjects(tuple(slices), {}, {}, {c.name: c for c in classes})
    result = allocate(dra, at, claims, in_use or {}, {})
    if result is None:
        return None
    return [
        (
            [(d.request, d.driver, d.pool, d.device, d.admin_access) for d in a.devices],
            None if a.node_selector is None else [f.values for t in a.node_selector for f in t.match_fields],
        )
        for a in result
    ]


def local(node_name: str) -> list[tuple[str, ...]]:
    return [(node_name,)]


def test_simple() -> None:
    got = run([claim(req("req-0"))], [cls(CLASS_A, DRIVER_A)], [slice_("slice-1", NODE1, "pool-1", DRIVER_A)], node(NODE1))
    assert got == [([("req-0", DRIVER_A, "pool-1", "device-1", False)], local(NODE1))]


def test_other_node() -> None:
    slices = [slice_("slice-1", NODE1, "pool-1", DRIVER_B), slice_("slice-2", NODE2, "pool-2", DRIVER_A)]
    got = run([claim(req("req-0"))], [cls(CLASS_A, DRIVER_A)], slices, node(NODE2, "region-2"))
    assert got == [([("req-0", DRIVER_A, "pool-2", "device-1", False)], local(NODE2))]


SMALL = f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("1Gi")) >= 0'
LARGE = f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("2Gi")) >= 0'


@pytest.mark.parametrize(
    "entry,order",
    [("small-and-large", ("device-1", "device-2")), ("small-and-large-backtrack-requests", ("device-2", "device-1"))],
)
def test_small_and_large(entry: str, order: tuple[str, str]) -> None:
    devices = {"device-1": dev("device-1", {"memory": "1Gi"}), "device-2": dev("device-2", {"memory": "2Gi"})}
    slices = [slice_("slice-1", NODE1, "pool-1", DRIVER_A, *(devices[n] for n in order))]
    got = run([claim(req("req-0", CLASS_A, 1, SMALL), req("req-1", CLASS_A, 1, LARGE))], [cls(CLASS_A, DRIVER_A)], slices, node(NODE1))
    assert got == [
        ([("req-0", DRIVER_A, "pool-1", "device-1", False), ("req-1", DRIVER_A, "pool-1", "device-2", False)], local(NODE1))
    ]


def test_small_and_large_backtrack_claims() -> None:
    slices = [slice_("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-2", {"memory": "2Gi"}), dev("device-1", {"memory": "1Gi"}))]
    got = run(
        [claim(req("req-0", CLASS_A, 1, SMALL)), claim(req("req-1", CLASS_A, 1, LARGE))], [cls(CLASS_A, DRIVER_A)], slices, node(NODE1)
    )
    assert got == [
        ([("req-0", DRIVER_A, "pool-1", "device-1", False)], local(NODE1)),
        ([("req-1", DRIVER_A, "pool-1", "device-2", False)], local(NODE1)),
    ]


def test_devices_split_across_different_slices() -> None:
    slices = [slice_("slice-1", NODE1, "pool-1", DRIVER_A), slice_("slice-2", NODE1, "pool-2", DRIVER_A)]
    got = run([claim(req("req-0", CLASS_A, 2))], [cls(CLASS_A, DRIVER_A)], slices, node(NODE1))
    assert got == [([("req-0", DRIVER_A, "pool-1", "device-1", False), ("req-0", DRIVER_A, "pool-2", "device-1", False)], local(NODE1))]


def test_obsolete_slice() -> None:
    """The newer generation's slice holds device-2 only; the pool (2 slices) is incomplete:
    nothing is allocated from it."""
    slices = [
        slice_("slice-1-obsolete", NODE1, "pool-1", DRIVER_A, dev("device-1"), count=2),
        slice_("slice-1-obsolete", NODE1, "pool-1", DRIVER_A, dev("device-2"), count=2, generation=2),
    ]
    assert run([claim(req("req-0"))], [cls(CLASS_A, DRIVER_A)], slices, node(NODE1)) is None


def test_duplicate_slice() -> None:
    """Two identical slices of a 2-slice pool: duplicate device names make the pool invalid
    (upstream: "invalid resource pools were encountered", a failure of this node only)."""
    one = slice_("slice-1", NODE1, "pool-1", DRIVER_A, count=2)
    two = slice_("slice-1-2", NODE1, "pool-1", DRIVER_A, count=2)
    assert run([claim(req("req-0"))], [cls(CLASS_A, DRIVER_A)], [one, two], node(NODE1)) is None


def test_no_slices() -> None:
    assert run([claim(req("req-0"))], [cls(CLASS_A, DRIVER_A)], [], node(NODE1)) is None


def test_not_enough_suitable_devices() -> None:
    slices = [slice_("slice-1", NODE1, "pool-1", DRIVER_A)]
    assert run([claim(req("req-0")), claim(req("req-1"))], [cls(CLASS_A, DRIVER_A)], slices, node(NODE1)) is None


@pytest.mark.parametrize("entry,class_name", [("no-classes", CLASS_A), ("unknown-class", "unknown-class")])
def test_missing_class(entry: str, class_name: str) -> None:
    classes = [] if entry == "no-classes" else [cls(CLASS_A, DRIVER_A)]
    with pytest.raises(AllocationError, match=f"DeviceClass {class_name} not found"):
        run([claim(req("req-0", class_name))], classes, [slice_("slice-1", NODE1, "pool-1", DRIVER_A)], node(NODE1))


def test_all_devices_single_and_many() -> None:
    """Entries "all-devices-single" and "all-devices-many"."""
    one = [slice_("slice-1", NODE1, "pool-1", DRIVER_A)]
    got = run([claim(req("req-0", mode="All"))], [cls(CLASS_A, DRIVER_A)], one, node(NODE1))
    assert got == [([("req-0", DRIVER_A, "pool-1", "device-1", False)], local(NODE1))]
    two = [slice_("slice-1", NODE1, "pool-1", DRIVER_A), slice_("slice-1", NODE1, "pool-2", DRIVER_A)]
    got = run([claim(req("req-0", mode="All"))], [cls(CLASS_A, DRIVER_A)], two, node(NODE1))
    assert got == [([("req-0", DRIVER_A, "pool-1", "device-1", False), ("req-0", DRIVER_A, "pool-2", "device-1", False)], local(NODE1))]


def test_all_devices_of_the_incomplete_pool() -> None:
    slices = [slice_("slice-1", NODE1, "pool-1", DRIVER_A, count=2)]
    with pytest.raises(AllocationError, match="pool driver-a/pool-1 is being updated"):
        run([claim(req("req-0", mode="All"))], [cls(CLASS_A, DRIVER_A)], slices, node(NODE1))


@pytest.mark.parametrize("reversed_", [False, True], ids=["all-devices-plus-another", "all-devices-plus-another-reversed"])
def test_all_devices_plus_another(reversed_: bool) -> None:
    a = claim(req("req-0", CLASS_A, mode="All"))
    b = claim(req("req-0", CLASS_B, 1))
    slices = [slice_("slice-1", NODE1, "pool-1", DRIVER_A), slice_("slice-1", NODE1, "pool-1", DRIVER_B)]
    got = run([b, a] if reversed_ else [a, b], [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)], slices, node(NODE1))
    ra = ([("req-0", DRIVER_A, "pool-1", "device-1", False)], local(NODE1))
    rb = ([("req-0", DRIVER_B, "pool-1", "device-1", False)], local(NODE1))
    assert got == ([rb, ra] if reversed_ else [ra, rb])


def test_all_devices_many_plus_another() -> None:
    a = claim(req("req-0", CLASS_A, mode="All"))
    b = claim(req("req-0", CLASS_B, 1))
    slices = [
        slice_("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"), dev("device-2")),
        slice_("slice-1", NODE1, "pool-1", DRIVER_B),
    ]
    got = run([a, b], [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)], slices, node(NODE1))
    assert got == [
        ([("req-0", DRIVER_A, "pool-1", "device-1", False), ("req-0", DRIVER_A, "pool-1", "device-2", False)], local(NODE1)),
        ([("req-0", DRIVER_B, "pool-1", "device-1", False)], local(NODE1)),
    ]


def test_admin_access_enabled() -> None:
    """Devices in use may still be given to an admin-access request (marked so)."""
    in_use = {(DRIVER_A, "pool-1", "device-1"): 1, (DRIVER_A, "pool-1", "device-2"): 1}
    slices = [slice_("slice-1", NODE1, "pool-1", DRIVER_A)]
    got = run([claim(req("req-0", admin=True))], [cls(CLASS_A, DRIVER_A)], slices, node(NODE1), in_use)
    assert got == [([("req-0", DRIVER_A, "pool-1", "device-1", True)], local(NODE1))]
    assert run([claim(req("req-0"))], [cls(CLASS_A, DRIVER_A)], slices, node(NODE1), in_use) is None


ATTRS: dict[str, AttributeValue] = {
    "driverVersion": VersionValue("1.0.0"), "numa": 1, "stringAttribute": "stringAttributeValue", "boolAttribute": True,
}  # fmt: skip
INT_ATTRIBUTE, VERSION_ATTRIBUTE = f"{DRIVER_A}/numa", f"{DRIVER_A}/driverVersion"
STRING_ATTRIBUTE, BOOL_ATTRIBUTE = f"{DRIVER_A}/stringAttribute", f"{DRIVER_A}/boolAttribute"


def test_with_constraint() -> None:
    constraints = tuple(DeviceConstraint((), a) for a in (INT_ATTRIBUTE, VERSION_ATTRIBUTE, STRING_ATTRIBUTE, BOOL_ATTRIBUTE))
    slices = [slice_("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1", attrs=ATTRS), dev("device-2", attrs=ATTRS))]
    got = run([claim(req("req-0"), req("req-1"), constraints=constraints)], [cls(CLASS_A, DRIVER_A)], slices, node(NODE1))
    assert got == [([("req-0", DRIVER_A, "pool-1", "device-1", False), ("req-1", DRIVER_A, "pool-1", "device-2", False)], local(NODE1))]


def test_with_constraint_non_existent_attribute() -> None:
    spec = claim(req("req-0"), constraints=(DeviceConstraint((), f"{DRIVER_A}/nonExistentAttribute"),))
    assert run([spec], [cls(CLASS_A, DRIVER_A)], [slice_("slice-1", NODE1, "pool-1", DRIVER_A)], node(NODE1)) is None


@pytest.mark.parametrize(
    "entry,attribute,one,two",
    [
        ("with-constraint-not-matching-int-attribute", INT_ATTRIBUTE, {"numa": 1}, {"numa": 2}),
        ("with-constraint-not-matching-string-attribute", STRING_ATTRIBUTE, {"stringAttribute": "stringAttributeValue"},
         {"stringAttribute": "stringAttributeValue2"}),
        ("with-constraint-not-matching-bool-attribute", BOOL_ATTRIBUTE, {"boolAttribute": True}, {"boolAttribute": False}),
        ("with-constraint-not-matching-version-attribute", VERSION_ATTRIBUTE, {"driverVersion": VersionValue("1.0.0")},
         {"driverVersion": VersionValue("2.0.0")}),
    ],
)  # fmt: skip
def test_with_constraint_not_matching(entry: str, attribute: str, one: dict[str, Any], two: dict[str, Any]) -> None:
    spec = claim(req("req-0", CLASS_A, 2), constraints=(DeviceConstraint((), attribute),))
    slices = [slice_("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1", attrs=one), dev("device-2", attrs=two))]
    assert run([spec], [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)], slices, node(NODE1)) is None


def test_with_constraint_for_request_retry() -> None:
    constraints = (DeviceConstraint(("req-0",), VERSION_ATTRIBUTE), DeviceConstraint((), STRING_ATTRIBUTE))
    slices = [
        slice_(
            "slice-1", NODE1, "pool-1", DRIVER_A,
            dev("device-1", attrs={"driverVersion": VersionValue("1.0.0"), "stringAttribute": "a"}),
            dev("device-2", attrs={"driverVersion": VersionValue("2.0.0"), "stringAttribute": "b"}),
            dev("device-3", attrs={"driverVersion": VersionValue("3.0.0"), "stringAttribute": "b"}),
        )
    ]  # fmt: skip
    got = run([claim(req("req-0"), req("req-1"), constraints=constraints)], [cls(CLASS_A, DRIVER_A)], slices, node(NODE1))
    assert got == [([("req-0", DRIVER_A, "pool-1", "device-2", False), ("req-1", DRIVER_A, "pool-1", "device-3", False)], local(NODE1))]


def test_too_many_devices_total() -> None:
    """32 devices per claim at most: 32 plus one more is no allocation."""
    devices = tuple(dev(f"device-{i}") for i in range(33))
    slices = [slice_("slice-1", NODE1, "pool-1", DRIVER_A, *devices)]
    assert run([claim(req("req-0", CLASS_A, 32), req("req-1"))], [cls(CLASS_A, DRIVER_A)], slices, node(NODE1)) is None
    assert run([claim(req("req-0", CLASS_A, 32))], [cls(CLASS_A, DRIVER_A)], slices, node(NODE1)) is not None


def test_prioritized_list_first_available() -> None:
    """firstAvailable: the first sub-request that can be allocated wins, named req/sub."""
    slices = [slice_("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1", {"memory": "1Gi"}))]
    spec = first_available("req-0", req("subreq-0", CLASS_A, 1, LARGE), req("subreq-1", CLASS_A, 1, SMALL))
    got = run([spec], [cls(CLASS_A, DRIVER_A)], slices, node(NODE1))
    assert got == [([("req-0/subreq-1", DRIVER_A, "pool-1", "device-1", False)], local(NODE1))]


def test_partitionable_devices_share_counters() -> None:
    """Partitions of one GPU drawing on its shared counter set: two 4Gi halves fit an 8Gi GPU,
    the whole GPU no longer does once a half is in use."""
    counters = (CounterSet("gpu-0", {"memory": Fraction(8 * GI)}),)

    def part(name: str, memory: int) -> Device:
        return dev(name, counters=(CounterSet("gpu-0", {"memory": Fraction(memory * GI)}),))

    devices = (part("gpu-0-whole", 8), part("gpu-0-half-a", 4), part("gpu-0-half-b", 4))
    slices = [slice_("slice-1", NODE1, "pool-1", DRIVER_A, *devices, counters=counters)]
    two = run([claim(req("req-0", CLASS_A, 2))], [cls(CLASS_A, DRIVER_A)], slices, node(NODE1))
    assert two is not None and [d[3] for d in two[0][0]] == ["gpu-0-half-a", "gpu-0-half-b"]
    dra = DraObjects(tuple(slices), {}, {}, {CLASS_A: cls(CLASS_A, DRIVER_A)})
    used = {(DRIVER_A, "pool-1"): {("gpu-0", "memory"): Fraction(4 * GI)}}
    whole = allocate(dra, node(NODE1), [claim(req("req-0"))], {(DRIVER_A, "pool-1", "gpu-0-half-a"): 1}, used)
    assert whole is not None and whole[0].devices[0].device == "gpu-0-half-b"
    full = {(DRIVER_A, "pool-1"): {("gpu-0", "memory"): Fraction(8 * GI)}}
    assert allocate(dra, node(NODE1), [claim(req("req-0"))], {}, full) is None
