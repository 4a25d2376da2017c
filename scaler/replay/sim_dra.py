"""The replay world's Dynamic Resource Allocation objects, kept consistent as pods move.

What the cluster's own controllers do, in the replay's terms (:class:`scaler.replay.world.World`):

* a pod taken off its node (evicted, or its node deleted) gives up its reservations (the
  resourceclaim controller); a claim made for it from a template goes with it and is made again
  from the template for its replacement, which keeps the pod's name: the claim keeps its name,
  takes the template's spec and loses its allocation; a claim no pod uses any more is
  deallocated (:func:`release`);
* the scheduler's allocation of a pod's claims on the node it is placed on is written back
  (:func:`allocated`), so later steps see the devices taken;
* a deleted node's own ResourceSlices go with it (the DRA driver's kubelet plugin published
  them, :func:`without_node`); a node added by a scale-up publishes copies of its pool's
  template node's slices (:func:`with_node_slices`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from scaler.model.dra import DraObjects, ResourceClaim, ResourceSlice
from scaler.model.records import Pod
from scaler.simulator.dra_state import DraState

__all__ = ["allocated", "release", "with_node_slices", "without_node"]


def _with(dra: DraObjects, *, slices: Iterable[ResourceSlice] | None = None,
          claims: dict[tuple[str, str], ResourceClaim] | None = None) -> DraObjects:  # fmt: skip
    return DraObjects(
        tuple(dra.slices if slices is None else slices),
        dra.claims if claims is None else claims,
        dra.templates,
        dra.classes,
    )


def release(dra: DraObjects, pod: Pod) -> DraObjects:
    """``dra`` after ``pod`` left its node (see the module doc); the same object when the pod
    has no claims."""
    if not pod.resource_claims:
        return dra
    claims = dict(dra.claims)
    for pc in pod.resource_claims:
        c = claims.get((pod.namespace, pc.claim))
        if c is None:
            continue
        users = tuple(u for u in c.reserved_for if u != pod.name)
        if c.owner_pod == pod.name:
            template = dra.templates.get((pod.namespace, pc.template)) if pc.template else None
            spec = template.spec if template is not None else c.spec
            claims[c.key] = replace(c, spec=spec, allocation=None, reserved_for=())
        elif not users and not c.other_users:
            claims[c.key] = replace(c, allocation=None, reserved_for=())
        else:
            claims[c.key] = replace(c, reserved_for=users)
    return _with(dra, claims=claims)


def allocated(dra: DraObjects, state: DraState, pods: Iterable[Pod]) -> DraObjects:
    """``dra`` with the allocations and reservations the scheduler's simulation ``state`` gave
    the claims of ``pods`` (placed in it)."""
    claims = dict(dra.claims)
    changed = False
    for pod in pods:
        for pc in pod.resource_claims:
            key = (pod.namespace, pc.claim)
            c = claims.get(key)
            if c is not None and key in state.allocation:
                claims[key] = replace(c, allocation=state.allocation[key], reserved_for=state.reserved[key])
                changed = True
    return _with(dra, claims=claims) if changed else dra


def without_node(dra: DraObjects, name: str) -> DraObjects:
    """``dra`` without the slices local to node ``name``."""
    if name not in dra.local_slices:
        return dra
    return _with(dra, slices=[s for s in dra.slices if s.node_name != name])


def with_node_slices(dra: DraObjects, start: DraObjects, template: str, name: str) -> DraObjects:
    """``dra`` with copies of node ``template``'s own slices in ``start`` (the replay's first
    snapshot: the template node may be gone since) for node ``name`` (a pool named after the
    template node is renamed after the new one)."""
    own = start.local_slices.get(template, ())
    if not own:
        return dra
    copies = [
        replace(
            s,
            name=s.name.replace(template, name) if template in s.name else f"{s.name}-{name}",
            node_name=name,
            pool=name if s.pool == template else f"{s.pool}-{name}",
        )
        for s in own
    ]
    return _with(dra, slices=sorted((*dra.slices, *copies), key=lambda s: s.name))
