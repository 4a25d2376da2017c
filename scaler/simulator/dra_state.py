"""Claims and devices during one simulation: which claim holds which devices, which pods use it.

:class:`DraState` lives in a :class:`~scaler.simulator.state.ClusterState` (``state.dra``) and
follows its moves and reverts through the same journal, as cluster-autoscaler's DRA snapshot
follows its cluster snapshot (``simulator/dynamicresources/snapshot``):

* a pod taken off its node gives up its reservation of each of its claims; a claim made for
  the pod (owned by it), or used by no pod any more, is deallocated and its devices are free
  (``UnreservePodClaims``);
* a pod placed on a node reserves its claims, and those without an allocation are allocated
  there by the structured allocator (:func:`scaler.simulator.dra_alloc.allocate`): their devices
  are taken for every later placement, until a revert gives them back;
* a claim that keeps its allocation (shared with pods that stay) pins its pods to the nodes its
  allocation's node selector matches.

A claim made for a pod from a ResourceClaimTemplate is allocated again with the template's spec
(the claim its replacement gets), or its own when the template is gone.

:meth:`DraState.undecidable` says, from the snapshot alone, why a pod's claims cannot be decided
(a claim not found, a feature not modelled, a selector not evaluated or failing on a device, an
``All`` request while a pool is being updated): such a pod is never moved.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

from scaler.model.dra import (
    Allocation,
    ClaimSpec,
    Device,
    DeviceId,
    DeviceRequest,
    DraObjects,
    ResourceClaim,
)
from scaler.model.records import Node, Pod
from scaler.model.snapshot import ClusterSnapshot
from scaler.simulator.dra_alloc import AllocationError, PoolKey, allocate, pool_slices, selectable

__all__ = [
    "CANNOT_ALLOCATE",
    "IN_USE",
    "NOT_AVAILABLE",
    "RESERVED_FOR_MAX",
    "DraState",
]

RESERVED_FOR_MAX = 256
"""At most this many consumers of one claim (``resourceapi.ResourceClaimReservedForMaxSize``)."""
CANNOT_ALLOCATE = "cannot allocate all claims"
"""The scheduler's reason when the allocator finds no devices for the pod's claims on a node."""
NOT_AVAILABLE = "resourceclaim not available on the node"
"""The scheduler's reason when an allocated claim's devices are not reachable from a node."""
IN_USE = "resourceclaim in use"
"""The scheduler's reason when a claim has as many consumers as it may have."""


def _claims_key(pod: Pod) -> tuple[object, ...]:
    return ("undecidable", pod.namespace, pod.name, pod.resource_claims)


class DraState:
    """The claims' allocations and reservations, and the devices in use, as a simulation moves
    pods (see the module doc). Every change is appended to ``journal`` (the owning state's undo
    journal) as a function that undoes it.

    Args:
        snapshot: the evaluation's snapshot (its :attr:`~ClusterSnapshot.dra` objects).
        journal: the undo journal the changes join.
    """

    def __init__(self, snapshot: ClusterSnapshot, journal: list[Callable[[], None]]) -> None:
        self.dra: DraObjects = snapshot.dra
        self._journal = journal
        self.allocation: dict[tuple[str, str], Allocation | None] = {}
        self.reserved: dict[tuple[str, str], tuple[str, ...]] = {}
        self.in_use: dict[DeviceId, int] = {}
        self.counters_used: dict[PoolKey, dict[tuple[str, str], Fraction]] = {}
        self.version = 0
        self._memo: tuple[object, list[Allocation] | str | None] | None = None
        for key, claim in self.dra.claims.items():
            self.allocation[key] = claim.allocation
            self.reserved[key] = claim.reserved_for
            if claim.allocation is not None:
                self._take(claim.allocation, 1)

    # ---- queries ----------------------------------------------------------------------------
    def spec(self, pod: Pod, claim: ResourceClaim, template: str) -> ClaimSpec:
        """The spec a claim is allocated with: its template's for a claim made for ``pod``
        (what its replacement's claim asks), else its own."""
        if template and claim.owner_pod == pod.name:
            t = self.dra.templates.get((pod.namespace, template))
            if t is not None:
                return t.spec
        return claim.spec

    def undecidable(self, pod: Pod) -> tuple[str, str] | None:
        """``(claim, why)`` when a claim of ``pod`` cannot be decided from the snapshot (see the
        module doc), else ``None``. ``claim`` names it (``namespace/name``, or the pod's entry
        when no claim was made). Memoized per pod and snapshot objects."""
        key = _claims_key(pod)
        if key in self.dra.memo:
            return self.dra.memo[key]  # type: ignore[no-any-return]
        found = None
        for pc in pod.resource_claims:
            if not pc.claim:
                what = f"template {pc.template}" if pc.template else "no template"
                found = (f"{pod.namespace}/{pod.name} claim {pc.name}", f"no ResourceClaim made yet ({what})")
                break
            claim = self.dra.claims.get((pod.namespace, pc.claim))
            name = f"{pod.namespace}/{pc.claim}"
            if claim is None:
                found = (name, "ResourceClaim not found")
                break
            why = self._spec_problem(self.spec(pod, claim, pc.template))
            if why:
                found = (name, why)
                break
        self.dra.memo[key] = found
        return found

    def _spec_problem(self, spec: ClaimSpec) -> str:
        if spec.unsupported:
            return spec.unsupported
        for r in spec.requests:
            for sub in (r.exactly,) if r.exactly is not None else r.first_available:
                why = self._request_problem(sub)
                if why:
                    return f"request {r.name}: {why}"
        return ""

    def _request_problem(self, request: DeviceRequest) -> str:
        key = ("request-problem", request.device_class, request.selectors, request.mode)
        hit = self.dra.memo.get(key)
        if hit is None:
            hit = self.dra.memo[key] = self._evaluate_everywhere(request)
        return hit

    def _evaluate_everywhere(self, request: DeviceRequest) -> str:
        """Evaluate the request's selectors on every device of every pool (each error the
        allocator may meet on some node, found once)."""
        try:
            for (driver, pool), (_, slices) in pool_slices(self.dra).items():
                for s in slices:
                    for d in s.devices:
                        selectable(self.dra, request, driver, d, None, False)
                if request.mode == "All" and len(slices) != slices[0].slice_count:
                    return f"asks for all devices, but pool {driver}/{pool} is being updated"
        except AllocationError as e:
            return str(e)
        return ""

    def _claims(self, pod: Pod) -> list[tuple[ResourceClaim, str]]:
        out = []
        for pc in pod.resource_claims:
            claim = self.dra.claims.get((pod.namespace, pc.claim))
            if claim is not None:
                out.append((claim, pc.template))
        return out

    def fits(self, pod: Pod, node: Node) -> str | None:
        """``None`` when ``pod``'s claims can be used on ``node`` now, else the scheduler's
        reason (the DynamicResources plugin's ``Filter``)."""
        bad = self.undecidable(pod)
        if bad is not None:
            return f"ResourceClaim {bad[0]} cannot be decided: {bad[1]}"
        unavailable = False
        for claim, _ in self._claims(pod):
            users = self.reserved[claim.key]
            if pod.name not in users and len(users) + claim.other_users >= RESERVED_FOR_MAX:
                return IN_USE
            alloc = self.allocation[claim.key]
            if alloc is not None and not alloc.available_on(node.name, node.labels):
                unavailable = True
        found = self._allocate(pod, node)
        if isinstance(found, str):
            return found
        if unavailable:
            return NOT_AVAILABLE
        return None

    def _allocate(self, pod: Pod, node: Node) -> list[Allocation] | str | None:
        """Allocations for the pod's unallocated claims on ``node`` (``[]`` when none needs
        one), or the reason there are none; the last answer is kept until the state changes."""
        memo_key = (pod.uid, node.name, self.version)
        if self._memo is not None and self._memo[0] == memo_key:
            return self._memo[1]
        specs = [self.spec(pod, c, t) for c, t in self._claims(pod) if self.allocation[c.key] is None]
        result: list[Allocation] | str | None
        if not specs:
            result = []
        else:
            try:
                result = allocate(self.dra, node, specs, self.in_use, self.counters_used)
            except AllocationError as e:
                result = f"{CANNOT_ALLOCATE} ({e})"
            if result is None:
                result = CANNOT_ALLOCATE
        self._memo = (memo_key, result)
        return result

    # ---- changes (journaled) ----------------------------------------------------------------
    def _take(self, allocation: Allocation, sign: int) -> None:
        """Count ``allocation``'s devices as in use (``sign`` 1) or free (-1), with the shared
        counters their partitionable devices consume."""
        index = self._devices()
        for d in allocation.devices:
            if d.admin_access:
                continue
            n = self.in_use.get(d.id, 0) + sign
            if n:
                self.in_use[d.id] = n
            else:
                self.in_use.pop(d.id, None)
            device = index.get(d.id)
            if device is not None and device.consumes_counters:
                used = self.counters_used.setdefault((d.driver, d.pool), {})
                for cc in device.consumes_counters:
                    for name, v in cc.counters.items():
                        used[(cc.name, name)] = used.get((cc.name, name), Fraction(0)) + sign * v

    def _devices(self) -> dict[DeviceId, Device]:
        hit = self.dra.memo.get(("device-index",))
        if hit is None:
            hit = {
                (driver, pool, d.name): d
                for (driver, pool), (_, slices) in pool_slices(self.dra).items()
                for s in slices
                for d in s.devices
            }
            self.dra.memo[("device-index",)] = hit
        return hit

    def _set(self, key: tuple[str, str], allocation: Allocation | None, reserved: tuple[str, ...]) -> None:
        old_alloc, old_reserved = self.allocation[key], self.reserved[key]
        if old_alloc is not allocation:
            if old_alloc is not None:
                self._take(old_alloc, -1)
            if allocation is not None:
                self._take(allocation, 1)
        self.allocation[key], self.reserved[key] = allocation, reserved
        self.version += 1

        def undo() -> None:
            if old_alloc is not allocation:
                if allocation is not None:
                    self._take(allocation, -1)
                if old_alloc is not None:
                    self._take(old_alloc, 1)
            self.allocation[key], self.reserved[key] = old_alloc, old_reserved
            self.version += 1

        self._journal.append(undo)

    def unschedule(self, pod: Pod) -> None:
        """``pod`` leaves its node: its reservations go; a claim made for it, or used by no one
        any more, is deallocated."""
        for claim, _ in self._claims(pod):
            users = tuple(u for u in self.reserved[claim.key] if u != pod.name)
            alloc = self.allocation[claim.key]
            if claim.owner_pod == pod.name or (not users and not claim.other_users):
                alloc = None
            self._set(claim.key, alloc, users)

    def place(self, pod: Pod, node: Node) -> None:
        """``pod`` runs on ``node``: its claims are reserved for it and those without an
        allocation get the devices :meth:`fits` found there (none found: left unallocated)."""
        found = self._allocate(pod, node)
        allocations = iter(found if isinstance(found, list) else ())
        for claim, _ in self._claims(pod):
            alloc = self.allocation[claim.key]
            if alloc is None:
                alloc = next(allocations, None)
            users = self.reserved[claim.key]
            if pod.name not in users:
                users = (*users, pod.name)
            self._set(claim.key, alloc, users)
