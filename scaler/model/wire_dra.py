"""The resource.k8s.io/v1 objects of Dynamic Resource Allocation as msgspec Structs: only the
fields scaler reads (:mod:`scaler.model.wire` says how these Structs decode).

``ResourceSlice`` (a DRA driver's devices, per node or shared), ``ResourceClaim`` and
``ResourceClaimTemplate`` (what pods ask for, and what was allocated to them), ``DeviceClass``
(the driver's selectors). Source of the fields: ``k8s.io/api/resource/v1/types.go`` (1.35).
:mod:`scaler.model.dra` turns them into records.
"""

from __future__ import annotations

from typing import Any

from msgspec import field

from scaler.model.wire import _W, NodeSelectorW, ObjectW, Quantity

__all__ = [
    "DRA_TYPES",
    "DeviceClassW",
    "DeviceSubRequestW",
    "DeviceW",
    "ResourceClaimSpecW",
    "ResourceClaimTemplateW",
    "ResourceClaimW",
    "ResourceSliceW",
]


class CounterW(_W, frozen=True):
    """A counter's ``value`` (``sharedCounters[].counters``, ``consumesCounters[].counters``)."""

    value: Quantity = "0"


class CounterSetW(_W, frozen=True):
    """``spec.sharedCounters[]`` of a ResourceSlice."""

    name: str = ""
    counters: dict[str, CounterW] | None = None


class DeviceCounterConsumptionW(_W, frozen=True):
    """``devices[].consumesCounters[]``."""

    counter_set: str = ""
    counters: dict[str, CounterW] | None = None


class DeviceAttributeW(_W, frozen=True):
    """One typed attribute value (exactly one of the four is set)."""

    int_value: int | None = field(default=None, name="int")
    bool_value: bool | None = field(default=None, name="bool")
    string: str | None = None
    version: str | None = None


class DeviceCapacityW(_W, frozen=True):
    """``devices[].capacity[…]``."""

    value: Quantity = "0"


class DeviceTaintW(_W, frozen=True):
    """``devices[].taints[]``."""

    key: str = ""
    value: str = ""
    effect: str = ""


class DeviceW(_W, frozen=True):
    """``spec.devices[]`` of a ResourceSlice."""

    name: str = ""
    attributes: dict[str, DeviceAttributeW] | None = None
    capacity: dict[str, DeviceCapacityW] | None = None
    consumes_counters: list[DeviceCounterConsumptionW] | None = None
    node_name: str | None = None
    node_selector: NodeSelectorW | None = None
    all_nodes: bool | None = None
    taints: list[DeviceTaintW] | None = None
    binds_to_node: bool | None = None
    binding_conditions: list[str] | None = None
    allow_multiple_allocations: bool | None = None


class ResourcePoolW(_W, frozen=True):
    """``spec.pool`` of a ResourceSlice."""

    name: str = ""
    generation: int = 0
    resource_slice_count: int = 0


class ResourceSliceSpecW(_W, frozen=True):
    """``spec`` of a ResourceSlice."""

    driver: str = ""
    pool: ResourcePoolW = ResourcePoolW()
    node_name: str | None = None
    node_selector: NodeSelectorW | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    devices: list[DeviceW] | None = None
    shared_counters: list[CounterSetW] | None = None


class ResourceSliceW(ObjectW, frozen=True, tag="ResourceSlice"):
    """A resource.k8s.io/v1 ResourceSlice."""

    spec: ResourceSliceSpecW = ResourceSliceSpecW()


class CELSelectorW(_W, frozen=True):
    """``selectors[].cel``."""

    expression: str = ""


class DeviceSelectorW(_W, frozen=True):
    """``selectors[]`` of a request or a DeviceClass (only ``cel`` exists in v1)."""

    cel: CELSelectorW | None = None


class DeviceTolerationW(_W, frozen=True):
    """``tolerations[]`` of a device request."""

    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""


class DeviceSubRequestW(_W, frozen=True):
    """``exactly`` of a request, or one of its ``firstAvailable`` sub-requests."""

    name: str = ""
    device_class_name: str = ""
    selectors: list[DeviceSelectorW] | None = None
    allocation_mode: str = ""
    count: int | None = None
    admin_access: bool | None = None
    tolerations: list[DeviceTolerationW] | None = None
    capacity: dict[str, Any] | None = None


class DeviceRequestW(_W, frozen=True):
    """``spec.devices.requests[]`` of a claim."""

    name: str = ""
    exactly: DeviceSubRequestW | None = None
    first_available: list[DeviceSubRequestW] | None = None


class DeviceConstraintW(_W, frozen=True):
    """``spec.devices.constraints[]`` of a claim."""

    requests: list[str] | None = None
    match_attribute: str | None = None
    distinct_attribute: str | None = None


class DeviceClaimW(_W, frozen=True):
    """``spec.devices`` of a claim."""

    requests: list[DeviceRequestW] | None = None
    constraints: list[DeviceConstraintW] | None = None


class ResourceClaimSpecW(_W, frozen=True):
    """``spec`` of a ResourceClaim (and of a template's claim)."""

    devices: DeviceClaimW = DeviceClaimW()


class DeviceRequestAllocationResultW(_W, frozen=True):
    """``status.allocation.devices.results[]``."""

    request: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""
    admin_access: bool | None = None
    share_id: str | None = field(default=None, name="shareID")


class DeviceAllocationResultW(_W, frozen=True):
    """``status.allocation.devices``."""

    results: list[DeviceRequestAllocationResultW] | None = None


class AllocationResultW(_W, frozen=True):
    """``status.allocation`` of a claim."""

    devices: DeviceAllocationResultW = DeviceAllocationResultW()
    node_selector: NodeSelectorW | None = None


class ResourceClaimConsumerW(_W, frozen=True):
    """``status.reservedFor[]``."""

    api_group: str = ""
    resource: str = ""
    name: str = ""
    uid: str = ""


class ResourceClaimStatusW(_W, frozen=True):
    """``status`` of a ResourceClaim."""

    allocation: AllocationResultW | None = None
    reserved_for: list[ResourceClaimConsumerW] | None = None


class ResourceClaimW(ObjectW, frozen=True, tag="ResourceClaim"):
    """A resource.k8s.io/v1 ResourceClaim."""

    spec: ResourceClaimSpecW = ResourceClaimSpecW()
    status: ResourceClaimStatusW = ResourceClaimStatusW()


class ResourceClaimTemplateSpecW(_W, frozen=True):
    """``spec`` of a ResourceClaimTemplate: the spec of the claims made from it."""

    spec: ResourceClaimSpecW = ResourceClaimSpecW()


class ResourceClaimTemplateW(ObjectW, frozen=True, tag="ResourceClaimTemplate"):
    """A resource.k8s.io/v1 ResourceClaimTemplate."""

    spec: ResourceClaimTemplateSpecW = ResourceClaimTemplateSpecW()


class DeviceClassSpecW(_W, frozen=True):
    """``spec`` of a DeviceClass."""

    selectors: list[DeviceSelectorW] | None = None
    extended_resource_name: str | None = None


class DeviceClassW(ObjectW, frozen=True, tag="DeviceClass"):
    """A resource.k8s.io/v1 DeviceClass."""

    spec: DeviceClassSpecW = DeviceClassSpecW()


DRA_TYPES: tuple[type[ObjectW], ...] = (ResourceSliceW, ResourceClaimW, ResourceClaimTemplateW, DeviceClassW)
"""The resource.k8s.io/v1 kinds (Dynamic Resource Allocation)."""
