"""Dynamic Resource Allocation (resource.k8s.io/v1) as records, and their converters.

A DRA driver publishes its devices in ``ResourceSlice`` objects, grouped in pools (one per node
for node-local devices); a pod asks for devices through ``ResourceClaim`` objects (its own, made
from a ``ResourceClaimTemplate``, or shared ones it names), whose requests pick devices with the
CEL selectors of a ``DeviceClass`` and their own. :class:`DraObjects` holds all four kinds of a
snapshot, indexed. Quantities (capacities, counters) are exact :class:`~fractions.Fraction`\\ s of
their unit. Source of the fields and of their meaning: ``k8s.io/api/resource/v1/types.go``
(Kubernetes 1.35).

What scaler does not model of the API is kept as a word in ``unsupported`` (a request with
consumable ``capacity``, a ``distinctAttribute`` constraint, a selector that is not CEL, an
unknown allocation mode): the simulation never moves a pod whose claim it cannot decide.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any

from scaler.model import wire
from scaler.model import wire_dra as w
from scaler.model.parse_base import ObjectError, _missing, _node_selector, describe
from scaler.model.quantity import QuantityError, parse_quantity
from scaler.model.records import NodeSelectorTerm, Pod, PodClaim

__all__ = [
    "ALLOCATION_RESULTS_MAX",
    "DRA_CONVERTERS",
    "EMPTY_DRA",
    "AllocatedDevice",
    "Allocation",
    "ClaimRequest",
    "ClaimSpec",
    "CounterSet",
    "Device",
    "DeviceClass",
    "DeviceConstraint",
    "DeviceId",
    "DeviceRequest",
    "DeviceTaint",
    "DeviceToleration",
    "DraObjects",
    "DraRecord",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceSlice",
    "VersionValue",
    "claim_record",
    "claim_template_record",
    "device_class_record",
    "pod_claims",
    "resource_slice_record",
]

ALLOCATION_RESULTS_MAX = 32
"""At most this many devices in one claim's allocation (``resourceapi.AllocationResultsMaxSize``)."""

DeviceId = tuple[str, str, str]
"""A device as allocations name it: ``(driver, pool, device)``."""


@dataclass(frozen=True, slots=True)
class VersionValue:
    """A ``version`` attribute: a semantic version string (semver 2.0)."""

    text: str


AttributeValue = int | bool | str | VersionValue
"""A device attribute's typed value."""


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    """A device taint (``NoSchedule`` and ``NoExecute`` keep untolerating requests off it)."""

    key: str
    value: str = ""
    effect: str = ""


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    """A request's toleration of device taints (``operator`` ``Equal`` or ``Exists``)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: DeviceTaint) -> bool:
        """``resourceclaim.ToleratesTaint``: same rules as pod tolerations of node taints."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("Equal", "") and bool(self.key) and self.value == taint.value


@dataclass(frozen=True, slots=True)
class CounterSet:
    """A named set of counters a pool's partitionable devices draw on (``sharedCounters[]`` of a
    slice, or one device's ``consumesCounters[]`` entry)."""

    name: str
    counters: Mapping[str, Fraction]


@dataclass(frozen=True, slots=True, eq=False)
class Device:
    """One device of a slice. ``attributes`` and ``capacity`` keep the qualified names as
    written (``model`` or ``domain/model``: a name without a domain belongs to the driver's).
    ``node_name``/``node_selector``/``all_nodes`` are set when the slice selects nodes per
    device (``perDeviceNodeSelection``). Compared by identity (a device is one object of one
    snapshot)."""

    name: str
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    capacity: Mapping[str, Fraction] = field(default_factory=dict)
    consumes_counters: tuple[CounterSet, ...] = ()
    node_name: str = ""
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    taints: tuple[DeviceTaint, ...] = ()
    binding_conditions: bool = False
    allow_multiple_allocations: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class ResourceSlice:
    """A ResourceSlice: a driver's devices in one pool, available on ``node_name`` (node-local),
    on the nodes ``node_selector`` matches, on ``all_nodes``, or per device
    (``per_device_node_selection``). ``generation`` and ``slice_count`` say which slices make up
    the pool now (the newest generation, ``resourceSliceCount`` of them)."""

    name: str
    driver: str
    pool: str
    generation: int = 0
    slice_count: int = 1
    node_name: str = ""
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """A request for devices of one class: ``exactly`` of a claim request, or one of its
    ``firstAvailable`` sub-requests. ``mode`` is ``ExactCount`` (``count`` devices) or ``All``
    (every matching device). ``selectors`` are CEL expressions. ``unsupported`` says what of the
    request scaler does not model (``""``: nothing)."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = "ExactCount"
    count: int = 1
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()
    unsupported: str = ""


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """``spec.devices.requests[]`` of a claim: ``exactly`` one request, or the first of
    ``first_available`` that can be allocated (``DRAPrioritizedList``)."""

    name: str
    exactly: DeviceRequest | None = None
    first_available: tuple[DeviceRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    """``spec.devices.constraints[]``: the devices of ``requests`` (all when empty) share the
    value of attribute ``match_attribute``. ``distinct_attribute`` is not modelled."""

    requests: tuple[str, ...] = ()
    match_attribute: str = ""
    distinct_attribute: str = ""


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    """What a claim asks for: its requests and constraints."""

    requests: tuple[ClaimRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()

    @property
    def unsupported(self) -> str:
        """What of this spec scaler does not model, worded; ``""`` when it models it all."""
        for r in self.requests:
            if r.exactly is None and not r.first_available:
                return f"request {r.name!r} has neither exactly nor firstAvailable"
            for sub in (r.exactly,) if r.exactly is not None else r.first_available:
                if sub.unsupported:
                    return f"request {r.name!r}: {sub.unsupported}"
        for c in self.constraints:
            if c.distinct_attribute:
                return "a distinctAttribute constraint (not modelled)"
            if not c.match_attribute:
                return "a constraint of an unknown type"
        return ""


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One device of an allocation (``status.allocation.devices.results[]``). ``admin_access``
    results do not take the device for others."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False

    @property
    def id(self) -> DeviceId:
        """``(driver, pool, device)``."""
        return self.driver, self.pool, self.device


@dataclass(frozen=True, slots=True)
class Allocation:
    """A claim's allocation: its devices and the nodes that reach them (``node_selector``;
    ``None``: every node)."""

    devices: tuple[AllocatedDevice, ...] = ()
    node_selector: tuple[NodeSelectorTerm, ...] | None = None

    def available_on(self, node_name: str, labels: Mapping[str, str]) -> bool:
        """Whether a pod using this allocation may run on the node (``nodeSelector`` matches)."""
        terms = self.node_selector
        return terms is None or any(t.matches(node_name, labels) for t in terms)


@dataclass(frozen=True, slots=True, eq=False)
class ResourceClaim:
    """A ResourceClaim. ``owner_pod`` is the name of the pod that owns it (made from a template
    for that pod: it goes with the pod), ``""`` for a claim of its own; ``reserved_for`` names
    the pods using it (``status.reservedFor`` entries of resource ``pods``) and ``other_users``
    counts its other consumers."""

    namespace: str
    name: str
    spec: ClaimSpec
    uid: str = ""
    owner_pod: str = ""
    allocation: Allocation | None = None
    reserved_for: tuple[str, ...] = ()
    other_users: int = 0

    @property
    def key(self) -> tuple[str, str]:
        """``(namespace, name)``."""
        return self.namespace, self.name


@dataclass(frozen=True, slots=True, eq=False)
class ResourceClaimTemplate:
    """A ResourceClaimTemplate: the spec of the claims made from it."""

    namespace: str
    name: str
    spec: ClaimSpec


@dataclass(frozen=True, slots=True, eq=False)
class DeviceClass:
    """A DeviceClass: the CEL ``selectors`` every device of the class matches. ``unsupported``
    says what of it scaler does not model (``""``: nothing)."""

    name: str
    selectors: tuple[str, ...] = ()
    unsupported: str = ""


DraRecord = ResourceSlice | ResourceClaim | ResourceClaimTemplate | DeviceClass
"""Any DRA record."""


@dataclass(frozen=True, eq=False)
class DraObjects:
    """A snapshot's DRA objects, indexed: every ResourceSlice (by name order), ResourceClaims and
    ResourceClaimTemplates by ``(namespace, name)``, DeviceClasses by name. ``listed`` says
    whether the kinds were read at all (a cluster without ``resource.k8s.io/v1`` has none).
    Compared by identity: a changed object makes a new :class:`DraObjects`."""

    slices: tuple[ResourceSlice, ...] = ()
    claims: Mapping[tuple[str, str], ResourceClaim] = field(default_factory=dict)
    templates: Mapping[tuple[str, str], ResourceClaimTemplate] = field(default_factory=dict)
    classes: Mapping[str, DeviceClass] = field(default_factory=dict)
    memo: dict[Any, Any] = field(default_factory=dict, repr=False)
    """Values derived from these objects alone, kept by the simulation (never an answer's input
    other than through these objects)."""

    @property
    def present(self) -> bool:
        """Whether there is any DRA object at all."""
        return bool(self.slices or self.claims or self.templates or self.classes)

    @cached_property
    def local_slices(self) -> Mapping[str, tuple[ResourceSlice, ...]]:
        """Node name → the slices of devices local to it (``spec.nodeName``)."""
        out: dict[str, list[ResourceSlice]] = {}
        for s in self.slices:
            if s.node_name:
                out.setdefault(s.node_name, []).append(s)
        return {k: tuple(v) for k, v in out.items()}

    def claim_of(self, pod: Pod, name: str) -> ResourceClaim | None:
        """The ResourceClaim named ``name`` in ``pod``'s namespace, or ``None``."""
        return self.claims.get((pod.namespace, name))


EMPTY_DRA = DraObjects()
"""No DRA object (a snapshot without any, or of a cluster without the API)."""


# -- converters ------------------------------------------------------------------------------------


def _quantity(value: wire.Quantity, where: str, what: str) -> Fraction:
    try:
        return parse_quantity(value)
    except QuantityError as e:
        raise ObjectError(f"{where}: {what}: {e}") from None


def _counters(raw: Mapping[str, w.CounterW] | None, where: str, what: str) -> dict[str, Fraction]:
    return {k: _quantity(c.value, where, f"{what} {k}") for k, c in (raw or {}).items()}


def _attribute(a: w.DeviceAttributeW, where: str, name: str) -> AttributeValue:
    if a.int_value is not None:
        return a.int_value
    if a.bool_value is not None:
        return a.bool_value
    if a.string is not None:
        return a.string
    if a.version is not None:
        return VersionValue(a.version)
    raise ObjectError(f"{where}: attribute {name!r} has no value")


def _device(d: w.DeviceW, where: str) -> Device:
    if not d.name:
        raise ObjectError(f"{where}: a device without a name")
    at = f"{where} device {d.name}"
    return Device(
        name=d.name,
        attributes={k: _attribute(v, at, k) for k, v in (d.attributes or {}).items()},
        capacity={k: _quantity(v.value, at, f"capacity {k}") for k, v in (d.capacity or {}).items()},
        consumes_counters=tuple(
            CounterSet(c.counter_set, _counters(c.counters, at, "consumesCounters"))
            for c in d.consumes_counters or ()
        ),
        node_name=d.node_name or "",
        node_selector=_node_selector(d.node_selector),
        all_nodes=bool(d.all_nodes),
        taints=tuple(DeviceTaint(t.key, t.value, t.effect) for t in d.taints or ()),
        binding_conditions=bool(d.binding_conditions),
        allow_multiple_allocations=bool(d.allow_multiple_allocations),
    )


def resource_slice_record(obj: w.ResourceSliceW) -> ResourceSlice:
    """A ResourceSlice's record.

    Raises:
        ObjectError: no name, driver or pool name; a bad quantity; an attribute without value.
    """
    where = describe(obj)
    name = obj.metadata.name or _missing(obj, "metadata.name")
    spec = obj.spec
    if not spec.driver:
        _missing(obj, "spec.driver")
    if not spec.pool.name:
        _missing(obj, "spec.pool.name")
    return ResourceSlice(
        name=name,
        driver=spec.driver,
        pool=spec.pool.name,
        generation=spec.pool.generation,
        slice_count=spec.pool.resource_slice_count,
        node_name=spec.node_name or "",
        node_selector=_node_selector(spec.node_selector),
        all_nodes=bool(spec.all_nodes),
        per_device_node_selection=bool(spec.per_device_node_selection),
        devices=tuple(_device(d, where) for d in spec.devices or ()),
        shared_counters=tuple(
            CounterSet(c.name, _counters(c.counters, where, f"sharedCounters {c.name}"))
            for c in spec.shared_counters or ()
        ),
    )


def _selectors(raw: list[w.DeviceSelectorW] | None) -> tuple[tuple[str, ...], str]:
    exprs = []
    for i, s in enumerate(raw or ()):
        if s.cel is None:
            return (), f"selector #{i} is not a CEL selector"
        exprs.append(s.cel.expression)
    return tuple(exprs), ""


def _request(r: w.DeviceSubRequestW, name: str) -> DeviceRequest:
    selectors, bad = _selectors(r.selectors)
    mode = r.allocation_mode or "ExactCount"
    if not bad and r.capacity:
        bad = "it requests consumable capacity (not modelled)"
    if not bad and mode not in ("ExactCount", "All"):
        bad = f"allocation mode {mode!r} is unknown"
    if not bad and not r.device_class_name:
        bad = "it names no device class"
    return DeviceRequest(
        name=name,
        device_class=r.device_class_name,
        selectors=selectors,
        mode=mode,
        count=1 if r.count is None else r.count,
        admin_access=bool(r.admin_access),
        tolerations=tuple(
            DeviceToleration(t.key, t.operator or "Equal", t.value, t.effect) for t in r.tolerations or ()
        ),
        unsupported=bad,
    )


def claim_spec(spec: w.ResourceClaimSpecW) -> ClaimSpec:
    """The record of a claim's (or a template's) spec."""
    requests = []
    for r in spec.devices.requests or ():
        requests.append(
            ClaimRequest(
                r.name,
                _request(r.exactly, r.name) if r.exactly is not None else None,
                tuple(_request(s, s.name) for s in r.first_available or ()),
            )
        )
    constraints = tuple(
        DeviceConstraint(tuple(c.requests or ()), c.match_attribute or "", c.distinct_attribute or "")
        for c in spec.devices.constraints or ()
    )
    return ClaimSpec(tuple(requests), constraints)


def claim_record(obj: w.ResourceClaimW) -> ResourceClaim:
    """A ResourceClaim's record: its spec, allocation and the pods it is reserved for.

    Raises:
        ObjectError: no name.
    """
    meta = obj.metadata
    name = meta.name or _missing(obj, "metadata.name")
    owner = ""
    for o in meta.owner_references or ():
        if o.controller and o.kind == "Pod" and o.api_version in ("v1", ""):
            owner = o.name
    allocation = None
    a = obj.status.allocation
    if a is not None:
        allocation = Allocation(
            tuple(
                AllocatedDevice(r.request, r.driver, r.pool, r.device, bool(r.admin_access))
                for r in a.devices.results or ()
            ),
            _node_selector(a.node_selector),
        )
    pods = tuple(c.name for c in obj.status.reserved_for or () if c.resource == "pods" and not c.api_group)
    others = len(obj.status.reserved_for or ()) - len(pods)
    return ResourceClaim(
        namespace=meta.namespace or "default",
        name=name,
        spec=claim_spec(obj.spec),
        uid=meta.uid,
        owner_pod=owner,
        allocation=allocation,
        reserved_for=pods,
        other_users=others,
    )


def claim_template_record(obj: w.ResourceClaimTemplateW) -> ResourceClaimTemplate:
    """A ResourceClaimTemplate's record.

    Raises:
        ObjectError: no name.
    """
    meta = obj.metadata
    return ResourceClaimTemplate(
        meta.namespace or "default", meta.name or _missing(obj, "metadata.name"), claim_spec(obj.spec.spec)
    )


def device_class_record(obj: w.DeviceClassW) -> DeviceClass:
    """A DeviceClass's record. A class that backs an extended resource
    (``extendedResourceName``) is read; only its selectors matter here.

    Raises:
        ObjectError: no name.
    """
    selectors, bad = _selectors(obj.spec.selectors)
    return DeviceClass(obj.metadata.name or _missing(obj, "metadata.name"), selectors, bad)


DRA_CONVERTERS: dict[type[wire.ObjectW], Callable[[Any], DraRecord]] = {
    w.ResourceSliceW: resource_slice_record,
    w.ResourceClaimW: claim_record,
    w.ResourceClaimTemplateW: claim_template_record,
    w.DeviceClassW: device_class_record,
}
"""The converter of each DRA kind (:func:`scaler.model.parse.to_record` dispatches on it)."""


def pod_claims(spec: wire.PodSpecW, status: wire.PodStatusW) -> tuple[PodClaim, ...]:
    """A pod's ``spec.resourceClaims``, each resolved to its ResourceClaim's name
    (``resourceclaim.Name``): given, or made for the pod from its template and named in
    ``status.resourceClaimStatuses`` (``""`` while not made yet). An entry whose status names
    no claim needs none (the pod runs without it): dropped."""
    made = {s.name: s.resource_claim_name for s in status.resource_claim_statuses or ()}
    out = []
    for c in spec.resource_claims or ():
        if c.resource_claim_name:
            out.append(PodClaim(c.name, c.resource_claim_name))
        elif c.name in made:
            name = made[c.name]
            if name:
                out.append(PodClaim(c.name, name, c.resource_claim_template_name or ""))
        else:
            out.append(PodClaim(c.name, "", c.resource_claim_template_name or ""))
    return tuple(out)
