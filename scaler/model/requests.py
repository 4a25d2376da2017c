"""Pod requests and limits as the scheduler and the kubelet compute them, from a pod's decoded spec
(and status).

Pod requests follow Kubernetes' ``resourcehelper.PodRequests`` (``k8s.io/component-helpers/
resource``): containers summed, the max with each init container (plus the sidecars started
before it), restartable init containers (sidecars) added, pod overhead added; a pod-level
``spec.resources.requests`` wins for CPU, memory and huge pages. A container with a limit but no
request for a resource requests its limit, as the API server's defaulting does. A pod being
resized in place counts as kube-scheduler counts it with status resources
(:func:`resize_requests`). Pod CPU and memory limits follow ``resourcehelper.PodLimits`` the same
way, and the kubelet's rule that a pod whose containers do not all declare a limit has none
(:func:`compute_pod_limits`). :mod:`scaler.model.parse` computes them once per pod, when the pod
is read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction

from scaler.model import wire
from scaler.model.parse_base import ObjectError, describe, parse_resources
from scaler.model.quantity import QuantityError, check_total, parse_quantity
from scaler.model.records import QoSClass, Resources

__all__ = ["compute_pod_limits", "compute_pod_requests", "resize_requests"]


# Resources that pod-level ``spec.resources`` may set and that decide the QoS class
# (``resourcehelper.IsSupportedPodLevelResource``, ``qos.isSupportedQoSComputeResource``); huge
# pages (``hugepages-<size>``) may be set at pod level too, but do not decide the QoS class.
_POD_LEVEL_RESOURCES = ("cpu", "memory")
_HUGEPAGES = "hugepages-"
_NO_RESOURCES: dict[str, wire.Quantity] = {}
# The resources an in-place resize may change (KEP-1287): only these follow the container status.
_RESIZABLE = ("cpu", "memory")

Pair = tuple[Mapping[str, wire.Quantity], Mapping[str, wire.Quantity]]


def _positive(raw: Mapping[str, wire.Quantity], name: str, where: str, field: str) -> Fraction | None:
    if name not in raw:
        return None
    try:
        q = parse_quantity(raw[name])
    except QuantityError as e:
        raise ObjectError(f"{where}: {field}: {e}") from None
    return q if q > 0 else None


def _qos_class(groups: list[Pair], where: str) -> QoSClass:
    """Kubernetes' ``ComputePodQOS`` over (requests, limits) pairs: only CPU and memory count, and
    only quantities above zero. Guaranteed needs every pair to limit both, and the summed requests
    to equal the summed limits; BestEffort means no CPU or memory request or limit at all."""
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for reqs, lims in groups:
        for name in _POD_LEVEL_RESOURCES:
            q = _positive(reqs, name, where, "resources.requests")
            if q is not None:
                requests[name] = requests.get(name, Fraction(0)) + q
        found = 0
        for name in _POD_LEVEL_RESOURCES:
            q = _positive(lims, name, where, "resources.limits")
            if q is not None:
                found += 1
                limits[name] = limits.get(name, Fraction(0)) + q
        if found != len(_POD_LEVEL_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return QoSClass.BEST_EFFORT
    if guaranteed and requests == limits:
        return QoSClass.GUARANTEED
    return QoSClass.BURSTABLE


def _rr(r: wire.ResourceRequirementsW | None) -> Pair:
    """(requests, limits) of a ``ResourceRequirements``, a missing request defaulting to its limit
    (API-server defaulting)."""
    if r is None:
        return _NO_RESOURCES, _NO_RESOURCES
    limits = r.limits or _NO_RESOURCES
    if not limits:
        return r.requests or _NO_RESOURCES, limits
    requests = dict(r.requests or _NO_RESOURCES)
    for name, value in limits.items():
        requests.setdefault(name, value)
    return requests, limits


def _aggregate(spec: wire.PodSpecW, of: Callable[[wire.ContainerW], Resources]) -> Resources:
    """``resourcehelper``'s container aggregation of ``of(container)`` (requests or limits): the
    containers summed, restartable init containers (sidecars) added, and the maximum taken with
    each other init container plus the sidecars started before it. Each container is visited
    once, containers first, then init containers in order."""
    total = Resources()
    for c in spec.containers or ():
        total = total + of(c)
    sidecars = Resources()
    init_max = Resources()
    for c in spec.init_containers or ():
        r = of(c)
        if c.restart_policy == "Always":
            total = total + r
            sidecars = sidecars + r
            init_max = init_max.max(sidecars)
        else:
            init_max = init_max.max(r + sidecars)
    return total.max(init_max)


def compute_pod_requests(
    spec: wire.PodSpecW,
    where: str,
    resized: Mapping[str, Mapping[str, wire.Quantity]] | None = None,
    per_container: dict[str, Resources] | None = None,
) -> tuple[Resources, QoSClass]:
    """Effective pod requests and the computed QoS class (``resourcehelper.PodRequests``,
    ``qos.ComputePodQOS``).

    Requests default as the API server's defaulting does: a container's missing request to its
    limit; with pod-level limits, a missing pod-level CPU or memory request to the containers'
    aggregate request, or to the pod-level limit when no container requests that resource.
    Pod-level ``spec.resources``, when it sets CPU or memory, decides the QoS class instead of the
    containers; a pod-level huge-pages request replaces the containers' (a pod-level huge-pages
    limit without a request requests it). ``pods`` is 1.

    Args:
        spec, where: the pod's spec, and the pod (for messages).
        resized: container name → the requests counted for it instead of its spec's
            (:func:`resize_requests`); the QoS class still follows the spec.
        per_container: filled with each regular container's and sidecar's own requests.

    Raises:
        ObjectError: a malformed quantity.
    """
    container_rl: list[Pair] = []
    inits = {id(c) for c in spec.init_containers or ()} if per_container is not None else set()

    def container(c: wire.ContainerW) -> Resources:
        reqs, lims = _rr(c.resources)
        field = f"container {c.name!r} resources"
        parse_resources(lims, where, field)  # validate the limits too
        container_rl.append((reqs, lims))
        own = parse_resources(reqs, where, field)
        if per_container is not None and (c.restart_policy == "Always" or id(c) not in inits):
            per_container[c.name] = own
        counted = resized.get(c.name) if resized else None
        return own if counted is None else parse_resources(counted, where, field)

    total = _aggregate(spec, container)
    pod_res = spec.resources or wire.ResourceRequirementsW()
    pod_lims = {k: v for k, v in (pod_res.limits or {}).items() if k in _POD_LEVEL_RESOURCES}
    pod_level = {k: v for k, v in (pod_res.requests or {}).items() if k in _POD_LEVEL_RESOURCES}
    total = _pod_level_huge_pages(total, pod_res, where)
    if pod_lims:
        parse_resources(pod_lims, where, "spec.resources.limits")
        # defaultPodRequests: with pod-level limits set, a missing pod-level request defaults to the
        # containers' aggregate request when any container requests it, else to the pod-level limit.
        aggregate = {"cpu": f"{total.cpu_millicores}m", "memory": str(total.memory_bytes)}
        for name in _POD_LEVEL_RESOURCES:
            if name not in pod_level:
                if any(name in reqs for reqs, _ in container_rl):
                    pod_level[name] = aggregate[name]
                elif name in pod_lims:
                    pod_level[name] = pod_lims[name]
    if pod_level:
        pl = parse_resources(pod_level, where, "spec.resources.requests")
        total = Resources(
            pl.cpu_millicores if "cpu" in pod_level else total.cpu_millicores,
            pl.memory_bytes if "memory" in pod_level else total.memory_bytes,
            total.ephemeral_storage_bytes,
            0,
            total.extended,
        )
    if spec.overhead:
        total = total + parse_resources(spec.overhead, where, "spec.overhead")
    total = Resources(
        total.cpu_millicores,
        total.memory_bytes,
        total.ephemeral_storage_bytes,
        1,
        {k: v for k, v in total.extended.items() if v},
    )
    _check_totals(total, where, "requests")
    if pod_level or pod_lims:
        qos = _qos_class([(pod_level, pod_lims)], where)
    else:
        qos = _qos_class(container_rl, where)
    return total, qos


def _pod_level_huge_pages(total: Resources, pod_res: wire.ResourceRequirementsW, where: str) -> Resources:
    """``total`` with the pod-level huge-pages requests in place of the containers' (a pod-level
    huge-pages limit without a request requests it: huge pages cannot be overcommitted).

    Raises:
        ObjectError: a malformed quantity.
    """
    huge = {k: v for k, v in (pod_res.limits or {}).items() if k.startswith(_HUGEPAGES)}
    huge.update((k, v) for k, v in (pod_res.requests or {}).items() if k.startswith(_HUGEPAGES))
    if not huge:
        return total
    extended = dict(total.extended)
    extended.update(parse_resources(huge, where, "spec.resources.requests").extended)
    return Resources(total.cpu_millicores, total.memory_bytes, total.ephemeral_storage_bytes, 0, extended)


def _check_totals(total: Resources, where: str, field: str) -> None:
    """Refuse a pod whose summed ``field`` (requests or limits, containers, sidecars and overhead
    together) exceed :data:`~scaler.model.quantity.MAX_QUANTITY` in some resource.

    Raises:
        ObjectError: naming the pod, the field and the resource.
    """
    try:
        check_total(total.cpu_millicores, f"cpu {field}", "millicores")
        check_total(total.memory_bytes, f"memory {field}", "bytes")
        check_total(total.ephemeral_storage_bytes, f"ephemeral-storage {field}", "bytes")
        for name, v in total.extended.items():
            check_total(v, f"{name} {field}")
    except QuantityError as e:
        raise ObjectError(f"{where}: the containers' {e}") from None


def compute_pod_limits(spec: wire.PodSpecW, where: str) -> tuple[int | None, int | None]:
    """The pod's CPU limit (millicores) and memory limit (bytes), each ``None`` when the pod has
    none: what its cgroup enforces (the CFS quota, the memory limit).

    The amounts are ``resourcehelper.PodLimits`` (``k8s.io/component-helpers/resource``): the
    containers' limits summed, restartable init containers (sidecars) added, the maximum taken
    with each other init container plus the sidecars started before it, and the pod overhead
    added. A pod has a limit for a resource only when every container (init containers
    included) declares a non-zero one, as the kubelet decides before setting the pod cgroup's
    quota (``pkg/kubelet/cm/helpers_linux.go ResourceConfigForPod``: ``cpuLimitsDeclared`` /
    ``memoryLimitsDeclared``); a pod-level ``spec.resources.limits`` wins for CPU and memory.

    Raises:
        ObjectError: a malformed quantity.
    """
    if not spec.containers:
        return None, None
    declared = {"cpu": True, "memory": True}

    def limits(c: wire.ContainerW) -> Resources:
        lims = (c.resources.limits if c.resources else None) or _NO_RESOURCES
        field = f"container {c.name!r} resources.limits"
        for name in _POD_LEVEL_RESOURCES:
            if _positive(lims, name, where, field) is None:
                declared[name] = False
        return parse_resources({k: v for k, v in lims.items() if k in _POD_LEVEL_RESOURCES}, where, field)

    total = _aggregate(spec, limits)
    cpu: int | None = total.cpu_millicores if declared["cpu"] else None
    mem: int | None = total.memory_bytes if declared["memory"] else None
    pod_lims = (spec.resources.limits if spec.resources else None) or _NO_RESOURCES
    if _positive(pod_lims, "cpu", where, "spec.resources.limits") is not None:
        cpu = parse_resources({"cpu": pod_lims["cpu"]}, where, "spec.resources.limits").cpu_millicores
    if _positive(pod_lims, "memory", where, "spec.resources.limits") is not None:
        mem = parse_resources({"memory": pod_lims["memory"]}, where, "spec.resources.limits").memory_bytes
    if spec.overhead:
        extra = parse_resources(spec.overhead, where, "spec.overhead")
        cpu = None if cpu is None else cpu + extra.cpu_millicores
        mem = None if mem is None else mem + extra.memory_bytes
    _check_totals(Resources(cpu or 0, mem or 0), where, "limits")
    return cpu, mem


def _resize_infeasible(status: wire.PodStatusW) -> bool:
    """``resourcehelper.IsPodResizeInfeasible``: the ``PodResizePending`` condition says
    ``Infeasible`` (the first such condition decides); without one, the ``status.resize`` field
    of clusters before 1.33 does."""
    for c in status.conditions or ():
        if c.type == "PodResizePending":
            return c.reason == "Infeasible"
    return status.resize == "Infeasible"


def _status_changes(
    containers: list[wire.ContainerW] | None, statuses: list[wire.ContainerStatusW] | None
) -> list[tuple[wire.ContainerW, wire.ContainerStatusW]]:
    """The containers (of ``containers``, by name) whose status in ``statuses`` may count other
    requests than their spec's: it has ``resources`` or ``allocatedResources`` that do not
    repeat the spec's requests. Statuses come in the spec's order: a container is found by its
    index first, by its name otherwise."""
    out: list[tuple[wire.ContainerW, wire.ContainerStatusW]] = []
    if not containers or not statuses:
        return out
    for i, cs in enumerate(statuses):
        applied = cs.resources.requests if cs.resources is not None else None
        allocated = cs.allocated_resources
        if applied is None and allocated is None:
            continue
        c = containers[i] if i < len(containers) and containers[i].name == cs.name else None
        if c is None:
            c = next((x for x in containers if x.name == cs.name), None)
            if c is None:
                continue
        wanted = c.resources.requests if c.resources is not None else None
        if (applied is None or applied == wanted) and (allocated is None or allocated == wanted):
            continue  # the usual case: the status repeats the spec
        out.append((c, cs))
    return out


def _larger(values: list[wire.Quantity], w: wire.PodW, field: str) -> wire.Quantity:
    """The largest of ``values`` (quantities), as given.

    Raises:
        ObjectError: a malformed quantity (naming the pod ``w`` and ``field``).
    """
    best, best_value = values[0], None
    for v in values:
        try:
            q = parse_quantity(v)
        except QuantityError as e:
            raise ObjectError(f"{describe(w)}: {field}: {e}") from None
        if best_value is None or q > best_value:
            best, best_value = v, q
    return best


def resize_requests(
    spec: wire.PodSpecW, status: wire.PodStatusW, w: wire.PodW
) -> dict[str, dict[str, wire.Quantity]] | None:
    """The requests kube-scheduler counts for each container of a pod resized in place, where
    they differ from its spec; ``None`` when none does (the usual case, decided without parsing
    a quantity when the status repeats the spec).

    kube-scheduler 1.35 counts a pod with its status resources (``framework.PodInfo``'s
    resources from ``resourcehelper.PodRequests`` with ``UseStatusResources``, in
    ``k8s.io/component-helpers/resource/helpers.go``): for each regular container and each
    restartable init container (sidecar) that has a status with ``resources`` or
    ``allocatedResources``, the larger of its spec's requests, what the runtime applies
    (``status.containerStatuses[].resources.requests``) and what the kubelet allocated
    (``allocatedResources``): a resize in progress or deferred counts at its largest. When the
    resize is infeasible (:func:`_resize_infeasible`), the spec's request never comes: the larger
    of the applied and allocated requests counts. Only CPU and memory follow the status (the only
    resources a resize changes); a resource neither status names keeps its spec's request. Plain
    init containers have ended and keep their spec's requests.

    Raises:
        ObjectError: a malformed quantity in a status.
    """
    changed = _status_changes(spec.containers, status.container_statuses)
    if status.init_container_statuses and spec.init_containers:
        sidecars = [c for c in spec.init_containers if c.restart_policy == "Always"]
        changed += _status_changes(sidecars, status.init_container_statuses)
    if not changed:
        return None
    infeasible = _resize_infeasible(status)
    out: dict[str, dict[str, wire.Quantity]] | None = None
    for c, cs in changed:
        applied = (cs.resources.requests if cs.resources is not None else None) or _NO_RESOURCES
        allocated = cs.allocated_resources or _NO_RESOURCES
        wanted = _rr(c.resources)[0]
        for name in _RESIZABLE:
            mine = wanted.get(name)
            got, held = applied.get(name), allocated.get(name)
            if (got is None or got == mine) and (held is None or held == mine):
                continue  # the status repeats the spec (or says nothing): the spec's request
            values = [v for v in (got, held) if v is not None]
            if not infeasible and mine is not None:
                values.append(mine)
            counted = _larger(values, w, f"container {c.name!r} status resources")
            if mine is not None and parse_quantity(counted) == parse_quantity(mine):
                continue
            if out is None:
                out = {}
            out.setdefault(c.name, dict(wanted))[name] = counted
    return out
