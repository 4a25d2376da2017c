"""The structured allocator of Dynamic Resource Allocation: can a pod's unallocated claims get
devices on a node, and which?

Follows kube-scheduler's allocator (``staging/src/k8s.io/dynamic-resource-allocation/
structured``, the ``incubating`` implementation that 1.35 runs with its default features, and
``experimental/pools_experimental.go`` for the pool order): the pools a node reaches are
gathered (:func:`gather_pools`); then every claim, every request, every device is picked in turn
from the devices not in use that match the device class's and the request's CEL selectors,
backtracking over combinations (never permutations) until the first complete solution. What it
models:

* ``exactly`` requests with ``count`` (``ExactCount``) or every matching device (``All``: a pool
  being updated or invalid makes that impossible);
* ``firstAvailable`` sub-requests, in order (``DRAPrioritizedList``);
* ``adminAccess``: the device may be in use, but not twice in one claim, and is not taken;
* partitionable devices: a device that ``consumesCounters`` fits only while the pool's
  ``sharedCounters`` are not exceeded by the devices in use and those being picked;
* ``matchAttribute`` constraints, device taints (``NoSchedule``/``NoExecute`` need a
  toleration), per-device node selection, at most 32 devices per claim.

Devices with binding conditions are not picked (the scheduler would wait for their binding;
the simulation does not move a pod onto them). The allocation's node selector is the node itself
for node-local devices, else the slices' node selectors merged (``createNodeSelector``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from scaler.errors import ScalerError
from scaler.model.dra import (
    ALLOCATION_RESULTS_MAX,
    AllocatedDevice,
    Allocation,
    AttributeValue,
    ClaimSpec,
    Device,
    DeviceId,
    DeviceRequest,
    DraObjects,
    ResourceSlice,
)
from scaler.model.records import Node, NodeSelectorRequirement, NodeSelectorTerm
from scaler.simulator.dra_cel import CelError, compile_selector, device_matches

__all__ = [
    "SEARCH_BUDGET",
    "AllocationError",
    "Pool",
    "allocate",
    "gather_pools",
    "pool_slices",
    "selectable",
]

SEARCH_BUDGET = 100_000
"""Devices tried by one allocation before it gives up (the node refuses the pod)."""

PoolKey = tuple[str, str]
"""``(driver, pool)``."""


class AllocationError(ScalerError):
    """The allocation cannot be decided on this node (a selector fails, the search is too long,
    a pool is being updated under an ``All`` request); the message says why."""


@dataclass(frozen=True, slots=True)
class Pool:
    """A pool of devices a node reaches: its newest generation's slices that target the node
    (sorted by name), the counters its partitionable devices share, and whether it is
    ``incomplete`` (slices of the generation missing) or ``invalid`` (why)."""

    driver: str
    name: str
    slices: tuple[ResourceSlice, ...] = ()
    counters: Mapping[str, Mapping[str, Fraction]] = field(default_factory=dict)
    incomplete: bool = False
    invalid: str = ""


def _node_matches(node: Node, name: str, all_nodes: bool, terms: tuple[NodeSelectorTerm, ...] | None) -> bool:
    if name:
        return node.name == name
    if all_nodes:
        return True
    return terms is not None and any(t.matches(node.name, node.labels) for t in terms)


def _targets(s: ResourceSlice, node: Node) -> bool | None:
    """Whether slice ``s`` is for ``node`` (``None``: it selects nodes in no known way)."""
    if s.shared_counters and not s.devices:
        return True  # counter sets are needed whatever the node
    if s.node_name or s.all_nodes or s.node_selector is not None:
        return _node_matches(node, s.node_name, s.all_nodes, s.node_selector)
    if s.per_device_node_selection:
        return any(_node_matches(node, d.node_name, d.all_nodes, d.node_selector) for d in s.devices)
    return None


def pool_slices(dra: DraObjects) -> Mapping[PoolKey, tuple[int, tuple[ResourceSlice, ...]]]:
    """Every pool of ``dra``: its newest generation and that generation's slices (memoized)."""
    key = ("pool-slices",)
    hit = dra.memo.get(key)
    if hit is None:
        out: dict[PoolKey, tuple[int, list[ResourceSlice]]] = {}
        for s in dra.slices:
            gen, members = out.get((s.driver, s.pool), (s.generation, []))
            if s.generation > gen:
                gen, members = s.generation, []
            if s.generation == gen:
                members.append(s)
            out[(s.driver, s.pool)] = (gen, members)
        hit = dra.memo[key] = {k: (g, tuple(v)) for k, (g, v) in out.items()}
    return hit


def gather_pools(dra: DraObjects, node: Node) -> tuple[Pool, ...]:
    """The pools ``node`` reaches, sorted by driver and pool name (``GatherPools``; memoized per
    node object). A pool whose newest generation has a slice that targets the node is kept; it
    is incomplete when fewer slices than ``resourceSliceCount`` exist for that generation."""
    key = ("pools", node.name)
    hit = dra.memo.get(key)
    if hit is not None and hit[0] is node:
        return hit[1]  # type: ignore[no-any-return]
    pools = []
    for (driver, name), (_, members) in sorted(pool_slices(dra).items()):
        mine = [s for s in members if _targets(s, node)]
        if not mine:
            continue
        counter_slices = [s for s in members if s.shared_counters]
        counters: dict[str, Mapping[str, Fraction]] = {}
        invalid = ""
        for s in counter_slices:
            for c in s.shared_counters:
                if c.name in counters:
                    invalid = invalid or f"duplicate counter set name {c.name}"
                counters[c.name] = c.counters
        device_slices = sorted((s for s in mine if s.devices), key=lambda s: s.name)
        seen: set[str] = set()
        for s in device_slices:
            for d in s.devices:
                if d.name in seen:
                    invalid = invalid or f"duplicate device name {d.name}"
                seen.add(d.name)
                for cc in d.consumes_counters:
                    have = counters.get(cc.name)
                    if have is None or any(k not in have for k in cc.counters):
                        invalid = (
                            invalid or f"device {d.name} consumes counters of set {cc.name} the pool lacks"
                        )
        incomplete = len(members) != (members[0].slice_count if members else 0)
        pools.append(Pool(driver, name, tuple(device_slices), counters, incomplete, invalid))
    out = tuple(pools)
    dra.memo[key] = (node, out)
    return out


def selectable(
    dra: DraObjects, request: DeviceRequest, driver: str, device: Device, node: Node | None, per_device: bool
) -> bool:
    """Whether ``device`` matches ``request``: the device class's selectors, then the request's
    (``isSelectable``); with per-device node selection, the device must reach ``node``.

    Raises:
        AllocationError: the class is missing, or a selector is undecidable or fails on the device.
    """
    cls = dra.classes.get(request.device_class)
    if cls is None:
        raise AllocationError(f"DeviceClass {request.device_class} not found")
    if cls.unsupported:
        raise AllocationError(f"DeviceClass {cls.name}: {cls.unsupported}")
    for owner, exprs in ((f"DeviceClass {cls.name}", cls.selectors), ("the request", request.selectors)):
        for expr in exprs:
            selector = compile_selector(expr)
            if selector.problem:
                raise AllocationError(f"{owner}: selector {expr!r}: {selector.problem}")
            try:
                if not device_matches(selector, driver, device):
                    return False
            except CelError as e:
                raise AllocationError(
                    f"{owner}: selector {expr!r} on device {driver}/{device.name}: {e}"
                ) from None
    if device.binding_conditions:
        return False
    if per_device and node is not None:
        return _node_matches(node, device.node_name, device.all_nodes, device.node_selector)
    return True


_Candidate = tuple[Pool, ResourceSlice, Device]


def _attribute(device: Device, driver: str, name: str) -> AttributeValue | None:
    """``lookupAttribute``: the fully qualified attribute, or, for the driver's own domain, the
    one written without a domain."""
    if name in device.attributes:
        return device.attributes[name]
    domain, _, ident = name.partition("/")
    if domain == driver and ident in device.attributes:
        return device.attributes[ident]
    return None


@dataclass(slots=True)
class _Search:
    """One allocation attempt (``allocator``): the state of the devices being picked."""

    dra: DraObjects
    node: Node
    pools: tuple[Pool, ...]
    in_use: Mapping[DeviceId, int]
    counters_used: Mapping[PoolKey, Mapping[tuple[str, str], Fraction]]
    specs: Sequence[ClaimSpec]
    budget: int = SEARCH_BUDGET
    picking: dict[DeviceId, set[int]] = field(default_factory=dict)
    counting: dict[PoolKey, dict[tuple[str, str], Fraction]] = field(default_factory=dict)
    results: list[list[tuple[str, _Candidate, bool]]] = field(default_factory=list)
    matched: list[list[list[AttributeValue | None]]] = field(default_factory=list)
    candidates: dict[tuple[int, int, int], list[_Candidate]] = field(default_factory=dict)

    def devices(self, ci: int, rj: int, k: int, request: DeviceRequest) -> list[_Candidate]:
        """The devices ``request`` may use on the node, in the allocator's order (memoized)."""
        key = (ci, rj, k)
        found = self.candidates.get(key)
        if found is None:
            found = [
                (pool, s, d)
                for pool in self.pools
                if not pool.incomplete and not pool.invalid
                for s in pool.slices
                for d in s.devices
                if selectable(self.dra, request, s.driver, d, self.node, s.per_device_node_selection)
            ]
            self.candidates[key] = found
        return found

    def _counters_fit(self, cand: _Candidate) -> bool:
        pool, _, device = cand
        pk = (pool.driver, pool.name)
        used = self.counters_used.get(pk, {})
        picking = self.counting.setdefault(pk, {})
        for cc in device.consumes_counters:
            for name, v in cc.counters.items():
                picking[(cc.name, name)] = picking.get((cc.name, name), Fraction(0)) + v
        fits = all(
            total - used.get((cs, name), 0) - picking.get((cs, name), 0) >= 0
            for cs, counters in pool.counters.items()
            for name, total in counters.items()
        )
        if not fits:
            self._release_counters(cand)
        return fits

    def _release_counters(self, cand: _Candidate) -> None:
        pool, _, device = cand
        picking = self.counting[(pool.driver, pool.name)]
        for cc in device.consumes_counters:
            for name, v in cc.counters.items():
                picking[(cc.name, name)] -= v

    def take(self, ci: int, request: DeviceRequest, name: str, parent: str, cand: _Candidate) -> bool:
        """Pick ``cand`` for request ``name`` of claim ``ci`` if it is free (or admin access),
        tolerated, within counters and constraints (``allocateDevice``)."""
        self.budget -= 1
        if self.budget < 0:
            raise AllocationError(f"no allocation found within {SEARCH_BUDGET} devices tried")
        pool, s, device = cand
        did = (s.driver, pool.name, device.name)
        holders = self.picking.get(did)
        if request.admin_access:
            if holders and ci in holders:
                return False
        elif self.in_use.get(did, 0) > 0 or holders:
            return False
        for t in device.taints:
            if t.effect in ("NoSchedule", "NoExecute") and not any(
                x.tolerates(t) for x in request.tolerations
            ):
                return False
        if device.consumes_counters and not self._counters_fit(cand):
            return False
        values = self.matched[ci]
        constraints = self.specs[ci].constraints
        changed: list[int] = []
        for i, c in enumerate(constraints):
            if (
                c.requests
                and name not in c.requests
                and parent not in c.requests
                and f"{parent}/{name}" not in c.requests
            ):
                continue
            value = _attribute(device, s.driver, c.match_attribute)
            state = values[i]
            if value is None or (state[1] and (type(state[0]) is not type(value) or state[0] != value)):
                for j in changed:
                    values[j][1] -= 1  # type: ignore[operator]
                if device.consumes_counters:
                    self._release_counters(cand)
                return False
            if not state[1]:
                state[0] = value
            state[1] += 1  # type: ignore[operator]
            changed.append(i)
        self.picking.setdefault(did, set()).add(ci)
        label = f"{parent}/{name}" if parent else name
        self.results[ci].append((label, cand, request.admin_access))
        return True

    def untake(self, ci: int, request: DeviceRequest, name: str, parent: str) -> None:
        """Undo the last :meth:`take` of claim ``ci``."""
        label, cand, _ = self.results[ci].pop()
        pool, s, device = cand
        self.picking[(s.driver, pool.name, device.name)].discard(ci)
        if device.consumes_counters:
            self._release_counters(cand)
        for i, c in enumerate(self.specs[ci].constraints):
            if c.requests and name not in c.requests and parent not in c.requests and label not in c.requests:
                continue
            self.matched[ci][i][1] -= 1  # type: ignore[operator]


def _requests_of(spec: ClaimSpec) -> Iterator[tuple[str, tuple[DeviceRequest, ...], bool]]:
    for r in spec.requests:
        if r.exactly is not None:
            yield r.name, (r.exactly,), False
        else:
            yield r.name, r.first_available, True


def allocate(
    dra: DraObjects,
    node: Node,
    specs: Sequence[ClaimSpec],
    in_use: Mapping[DeviceId, int],
    counters_used: Mapping[PoolKey, Mapping[tuple[str, str], Fraction]],
) -> list[Allocation] | None:
    """Allocate devices reachable from ``node`` to every claim of ``specs`` (``Allocate``).

    Args:
        dra: the snapshot's DRA objects.
        node: the node the pod would run on.
        specs: the specs of the claims to allocate, in the pod's order.
        in_use: devices taken by allocations already made (count of non-admin allocations).
        counters_used: per pool, the shared counters consumed by the devices in use.

    Returns:
        One allocation per spec, or ``None`` when the claims cannot all get devices there.

    Raises:
        AllocationError: the answer cannot be decided (see the class).
    """
    pools = gather_pools(dra, node)
    search = _Search(dra, node, pools, in_use, counters_used, specs)
    search.results = [[] for _ in specs]
    search.matched = [[[None, 0] for _ in spec.constraints] for spec in specs]
    plans = [list(_requests_of(spec)) for spec in specs]
    if not _claim(search, plans, 0):
        return None
    return [_allocation(search, ci, node) for ci in range(len(specs))]


def _claim(search: _Search, plans: list[list[tuple[str, tuple[DeviceRequest, ...], bool]]], ci: int) -> bool:
    if ci == len(plans):
        return True
    return _request(search, plans, ci, 0)


def _request(
    search: _Search, plans: list[list[tuple[str, tuple[DeviceRequest, ...], bool]]], ci: int, rj: int
) -> bool:
    if rj == len(plans[ci]):
        return _claim(search, plans, ci + 1)
    name, options, sub = plans[ci][rj]
    for k, request in enumerate(options):
        candidates = search.devices(ci, rj, k, request)
        if request.mode == "All":
            for pool in search.pools:
                if pool.incomplete or pool.invalid:
                    raise AllocationError(
                        f"request {name} asks for all devices, but pool {pool.driver}/{pool.name} is "
                        f"{'being updated' if pool.incomplete else 'invalid: ' + pool.invalid}"
                    )
            need = len(candidates)
            if need == 0:
                continue
        else:
            need = request.count
        if len(search.results[ci]) + need > ALLOCATION_RESULTS_MAX:
            continue
        label, parent = (request.name, name) if sub else (name, "")

        def nxt(search: _Search = search, ci: int = ci, rj: int = rj) -> bool:
            return _request(search, plans, ci, rj + 1)

        if _pick(search, ci, request, label, parent, candidates, need, 0, 0, nxt, request.mode == "All"):
            return True
    return False


def _pick(
    search: _Search,
    ci: int,
    request: DeviceRequest,
    name: str,
    parent: str,
    candidates: list[_Candidate],
    need: int,
    done: int,
    start: int,
    then: Callable[[], bool],
    every: bool,
) -> bool:
    """Pick the ``done``-th of ``need`` devices of one request from ``candidates[start:]``, then
    the rest, then ``then()``; undo on failure. ``every``: all candidates, in order."""
    if done == need:
        return then()
    if every:
        if not search.take(ci, request, name, parent, candidates[done]):
            return False
        if _pick(search, ci, request, name, parent, candidates, need, done + 1, 0, then, True):
            return True
        search.untake(ci, request, name, parent)
        return False
    for i in range(start, len(candidates) - (need - done - 1)):
        if search.take(ci, request, name, parent, candidates[i]):
            if _pick(search, ci, request, name, parent, candidates, need, done + 1, i + 1, then, False):
                return True
            search.untake(ci, request, name, parent)
    return False


def _allocation(search: _Search, ci: int, node: Node) -> Allocation:
    """The allocation of claim ``ci`` found, with its node selector (``createNodeSelector``)."""
    devices = []
    local = False
    fields: list[NodeSelectorRequirement] = []
    exprs: list[NodeSelectorRequirement] = []
    for label, (pool, s, d), admin in search.results[ci]:
        devices.append(AllocatedDevice(label, s.driver, pool.name, d.name, admin))
        name, terms = (
            (d.node_name, d.node_selector) if s.per_device_node_selection else (s.node_name, s.node_selector)
        )
        if name:
            local = True
        elif terms:
            for r in terms[0].match_fields:
                if r not in fields:
                    fields.append(r)
            for r in terms[0].match_expressions:
                if r not in exprs:
                    exprs.append(r)
    selector: tuple[NodeSelectorTerm, ...] | None = None
    if local:
        selector = (NodeSelectorTerm((), (NodeSelectorRequirement("metadata.name", "In", (node.name,)),)),)
    elif fields or exprs:
        selector = (NodeSelectorTerm(tuple(exprs), tuple(fields)),)
    return Allocation(tuple(devices), selector)
