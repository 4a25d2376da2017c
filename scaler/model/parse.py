"""Turn decoded API objects (the msgspec Structs of :mod:`scaler.model.wire`) into slim records.

msgspec has already checked every type on the way in (strings, integers, lists, objects, enum
values), so what is left here is meaning: defaults, required values, quantities, times, and pod
requests, computed once per pod as kube-scheduler computes them (:mod:`scaler.model.requests`).

Every converter raises :class:`ObjectError` naming the object (``Pod shop/web-0``) and the bad
field or value; :mod:`scaler.model.decode` brings the Structs in (from JSON bytes or plain values)
and words msgspec's own type errors the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

import msgspec

from scaler.model import wire
from scaler.model.dra import DRA_CONVERTERS, DraRecord, pod_claims
from scaler.model.parse_base import (
    ObjectError,
    _controller_ref,
    _label_selector,
    _missing,
    _node_selector,
    _time,
    describe,
    ident,
    parse_resources,
    parse_time,
)
from scaler.model.quantity import (
    MAX_QUANTITY,
    QuantityError,
    check_total,
    parse_bytes,
    parse_millicores,
)
from scaler.model.records import (
    TAINT_TO_BE_DELETED,
    Controller,
    Namespace,
    Node,
    NodeMetrics,
    NodeSelectorTerm,
    OwnerRef,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodAffinityTerm,
    PodDisruptionBudget,
    PodMetrics,
    QoSClass,
    Resources,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    Volume,
)
from scaler.model.requests import compute_pod_limits, compute_pod_requests, resize_requests
from scaler.model.times import parse_duration_seconds, rfc3339_seconds

__all__ = [
    "ObjectError",
    "Record",
    "describe",
    "ident",
    "parse_resources",
    "parse_time",
    "to_record",
]

Record = (
    Namespace
    | Node
    | Pod
    | PodDisruptionBudget
    | NodeMetrics
    | PodMetrics
    | Controller
    | PersistentVolume
    | PersistentVolumeClaim
    | DraRecord
)
"""Any record :func:`to_record` returns."""


_KEY_ENCODER = msgspec.msgpack.Encoder()

ContainerRequests = tuple[tuple[str, int, int], ...]
"""``(name, CPU request in millicores, memory request in bytes)`` of each regular container and
sidecar of a pod, from its spec (0: no request)."""

ContainerFacts = tuple[
    Resources,
    QoSClass,
    tuple[tuple[str, str, int], ...],
    int | None,
    int | None,
    tuple[str, ...],
    ContainerRequests,
]
"""``(requests, computed QoS class, host ports, CPU limit in millicores, memory limit in bytes,
names of the containers that run, their own requests)`` of a pod; a limit is ``None`` when the
pod has none (:func:`compute_pod_limits`); the names are ``spec.containers`` and the restartable
init containers (sidecars)."""

_NAMES: dict[tuple[str, ...], tuple[str, ...]] = {}


def _names(names: tuple[str, ...]) -> tuple[str, ...]:
    """One shared tuple per list of container names (a pod's and its PodMetrics' are then
    usually the same object, and compare by identity)."""
    hit = _NAMES.get(names)
    if hit is None:
        if len(_NAMES) >= 8192:
            _NAMES.clear()
        hit = _NAMES[names] = names
    return hit


_CONTAINERS: dict[bytes, ContainerFacts] = {}


def _container_facts(w: wire.PodW, spec: wire.PodSpecW) -> ContainerFacts:
    """(requests, computed QoS class, host ports, limits, running containers, their requests) of
    a pod: :func:`compute_pod_requests`, the ``hostPort`` entries of the containers that hold
    them and :func:`compute_pod_limits`, memoized on the encoding of the containers and resource
    fields (the replicas of a workload share them); malformed input is never memoized.

    Host ports are held by the regular containers and the restartable init containers
    (sidecars) only: a plain init container's port is released when it ends (kube-scheduler's
    ``GetHostPorts``, ``pkg/scheduler/util/utils.go``, since sidecars).

    Raises:
        ObjectError: a malformed quantity.
    """
    key = _KEY_ENCODER.encode((spec.containers, spec.init_containers, spec.resources, spec.overhead))
    hit = _CONTAINERS.get(key)
    if hit is None:
        where = describe(w)
        own: dict[str, Resources] = {}
        requests, qos = compute_pod_requests(spec, where, per_container=own)
        sidecars = [c for c in spec.init_containers or () if c.restart_policy == "Always"]
        ports = tuple(
            (p.protocol or "TCP", p.host_ip or "0.0.0.0", p.host_port)
            for c in (*(spec.containers or ()), *sidecars)
            for p in c.ports or ()
            if p.host_port
        )
        running = tuple(c.name for c in spec.containers or ()) + tuple(c.name for c in sidecars)
        each = tuple((name, r.cpu_millicores, r.memory_bytes) for name, r in own.items())
        hit = (requests, qos, ports, *compute_pod_limits(spec, where), _names(running), each)
        if len(_CONTAINERS) >= 4096:
            _CONTAINERS.clear()
        _CONTAINERS[key] = hit
    return hit


# -- kinds -----------------------------------------------------------------------------------------


def _volume(v: wire.VolumeW) -> Volume:
    """A pod volume: its name, its source kind (``emptyDir`` when it names none, the API's
    default), the emptyDir medium and the PVC claim name."""
    if v.projected is not None:  # the usual one (the service-account token)
        kind = "projected"
    else:
        kind = next((api for attr, api in wire.VOLUME_SOURCES if getattr(v, attr) is not None), "emptyDir")
    medium = v.empty_dir.medium if kind == "emptyDir" and v.empty_dir is not None else ""
    claim = v.persistent_volume_claim.claim_name if v.persistent_volume_claim is not None else ""
    return Volume(v.name, kind, medium, claim)


def _affinity_terms(terms: list[wire.PodAffinityTermW] | None, w: wire.PodW) -> tuple[PodAffinityTerm, ...]:
    out = []
    for t in terms or ():
        if not t.topology_key:
            raise ObjectError(f"{describe(w)}: pod affinity term without topologyKey")
        selector = _label_selector(t.namespace_selector)
        empty = selector is not None and not selector.match_labels and not selector.match_expressions
        out.append(
            PodAffinityTerm(
                _label_selector(t.label_selector),
                t.topology_key,
                tuple(t.namespaces or ()),
                empty,  # namespaceSelector {}: every namespace
                None if empty else selector,
            )
        )
    return tuple(out)


def _spread(cs: list[wire.TopologySpreadConstraintW], w: wire.PodW) -> tuple[TopologySpreadConstraint, ...]:
    out = []
    for c in cs:
        if not c.topology_key:
            raise ObjectError(f"{describe(w)}: missing required field 'topologyKey'")
        out.append(
            TopologySpreadConstraint(
                max_skew=c.max_skew,
                topology_key=c.topology_key,
                when_unsatisfiable=c.when_unsatisfiable,
                label_selector=_label_selector(c.label_selector),
                min_domains=c.min_domains,
                node_affinity_policy=c.node_affinity_policy or "Honor",
                node_taints_policy=c.node_taints_policy or "Ignore",
                match_label_keys=tuple(c.match_label_keys or ()),
            )
        )
    return tuple(out)


_QOS = {q.value: q for q in QoSClass}
_TOLERATIONS: dict[tuple[wire.TolerationW, ...], tuple[Toleration, ...]] = {}


def _tolerations(ts: list[wire.TolerationW] | None) -> tuple[Toleration, ...]:
    """A pod's tolerations, memoized (pods share a handful of toleration lists)."""
    if not ts:
        return ()
    key = tuple(ts)
    hit = _TOLERATIONS.get(key)
    if hit is None:
        if len(_TOLERATIONS) >= 1024:
            _TOLERATIONS.clear()
        hit = _TOLERATIONS[key] = tuple(
            Toleration(t.key, t.operator or "Equal", t.value, t.effect) for t in ts
        )
    return hit


Constraints = tuple[
    tuple[NodeSelectorTerm, ...] | None,
    tuple[PodAffinityTerm, ...],
    tuple[PodAffinityTerm, ...],
    tuple[TopologySpreadConstraint, ...],
]
_NO_CONSTRAINTS: Constraints = (None, (), (), ())
_CONSTRAINTS: dict[bytes, Constraints] = {}


def _constraints(w: wire.PodW, spec: wire.PodSpecW) -> Constraints:
    """(required node affinity, required pod affinity, required anti-affinity, topology spread) of
    a pod, memoized on their encoding (the replicas of a workload share them)."""
    key = _KEY_ENCODER.encode((spec.affinity, spec.topology_spread_constraints))
    hit = _CONSTRAINTS.get(key)
    if hit is not None:
        return hit
    nodes: tuple[NodeSelectorTerm, ...] | None = None
    pod_aff = anti = None
    if spec.affinity is not None:
        na, pa, paa = spec.affinity.node_affinity, spec.affinity.pod_affinity, spec.affinity.pod_anti_affinity
        if na is not None:
            nodes = _node_selector(na.required_during_scheduling_ignored_during_execution)
        pod_aff = pa.required_during_scheduling_ignored_during_execution if pa is not None else None
        anti = paa.required_during_scheduling_ignored_during_execution if paa is not None else None
    hit = (
        nodes,
        _affinity_terms(pod_aff, w),
        _affinity_terms(anti, w),
        _spread(spec.topology_spread_constraints or [], w),
    )
    if len(_CONSTRAINTS) >= 4096:
        _CONSTRAINTS.clear()
    _CONSTRAINTS[key] = hit
    return hit


def _pod(w: wire.PodW) -> Pod:
    """A v1 Pod's record (see :func:`to_record`)."""
    meta, spec, status = w.metadata, w.spec, w.status
    name = meta.name or _missing(w, "metadata.name")
    if spec is None:
        _missing(w, "spec")
    namespace = meta.namespace or "default"
    requests, qos, ports, cpu_limit, memory_limit, running, each = _container_facts(w, spec)
    spec_requests = None
    if status.container_statuses:  # the kubelet's word: the containers running now
        running = _running(status)
        resized = resize_requests(spec, status, w)
        if resized:
            counted, _ = compute_pod_requests(spec, describe(w), resized)
            if counted != requests:
                spec_requests, requests = requests, counted
    if status.qos_class:
        qos = _QOS[status.qos_class]
    constraints = _NO_CONSTRAINTS
    if spec.affinity is not None or spec.topology_spread_constraints:
        constraints = _constraints(w, spec)
    owner = None
    for o in meta.owner_references or ():
        if o.controller:
            owner = OwnerRef(o.kind, o.name, o.uid, o.api_version)
            break
    created, deleted = meta.creation_timestamp, meta.deletion_timestamp
    try:
        creation_ts = rfc3339_seconds(created) if created else None
        deletion_ts = rfc3339_seconds(deleted) if deleted else None
    except (ValueError, TypeError):
        _time(created, "metadata.creationTimestamp", w)
        _time(deleted, "metadata.deletionTimestamp", w)
        raise
    volumes = spec.volumes
    claims = pod_claims(spec, status) if spec.resource_claims else ()
    return Pod(
        namespace=namespace,
        name=name,
        uid=meta.uid or f"{namespace}/{name}",
        node_name=spec.node_name,
        requests=requests,
        labels=meta.labels or {},
        annotations=meta.annotations or {},
        controller=owner,
        phase=status.phase or "Pending",
        priority=spec.priority or 0,
        qos_class=qos,
        restart_policy=spec.restart_policy or "Always",
        creation_ts=creation_ts,
        deletion_ts=deletion_ts,
        start_ts=_time(status.start_time, "status.startTime", w),
        termination_grace_seconds=30
        if spec.termination_grace_period_seconds is None
        else spec.termination_grace_period_seconds,
        tolerations=_tolerations(spec.tolerations),
        node_selector=spec.node_selector or {},
        required_node_affinity=constraints[0],
        required_affinity=constraints[1],
        required_anti_affinity=constraints[2],
        topology_spread=constraints[3],
        host_ports=ports,
        volumes=tuple([_volume(v) for v in volumes]) if volumes else (),
        cpu_limit_millicores=cpu_limit,
        memory_limit_bytes=memory_limit,
        has_priority=spec.priority is not None,
        containers=running,
        container_requests=each,
        spec_requests=spec_requests,
        resource_claims=claims,
    )


def _running(status: wire.PodStatusW) -> tuple[str, ...]:
    """Names of the containers (sidecars included) whose status says ``running``."""
    names = [
        c.name for c in status.container_statuses or () if c.state is not None and c.state.running is not None
    ]
    names += [
        c.name
        for c in status.init_container_statuses or ()
        if c.state is not None and c.state.running is not None
    ]
    return _names(tuple(names))


def _node(w: wire.NodeW) -> Node:
    """A v1 Node's record: ``status.allocatable`` is required; the ``ToBeDeletedByClusterAutoscaler``
    taint's value is its time (0 when it is not a number)."""
    meta, spec, status = w.metadata, w.spec, w.status
    where = describe(w)
    name = meta.name or _missing(w, "metadata.name")
    if not status.allocatable:
        raise ObjectError(f"{where}: missing required field 'status.allocatable'")
    taints = []
    tbd: float | None = None
    for t in spec.taints or ():
        if not t.key:
            raise ObjectError(f"{where}: taint without key (value {t.value!r}, effect {t.effect!r})")
        taints.append(Taint(t.key, t.value, t.effect or "NoSchedule"))
        if t.key == TAINT_TO_BE_DELETED:
            try:
                tbd = float(t.value)
            except ValueError:
                tbd = 0.0
    ready = False
    ready_ts = 0.0
    for c in status.conditions or ():
        if c.type == "Ready":
            ready = c.status == "True"
            if c.last_transition_time:
                ready_ts = parse_time(c.last_transition_time, "Ready.lastTransitionTime", where)
    return Node(
        name=name,
        allocatable=parse_resources(status.allocatable, where, "status.allocatable"),
        labels=meta.labels or {},
        annotations=meta.annotations or {},
        taints=tuple(taints),
        unschedulable=bool(spec.unschedulable),
        ready=ready,
        ready_transition_ts=ready_ts,
        creation_ts=_time(meta.creation_timestamp, "metadata.creationTimestamp", w) or 0.0,
        provider_id=spec.provider_id,
        uid=meta.uid,
        to_be_deleted_ts=tbd,
    )


def _usage(usage: wire.UsageW | None, w: wire.ObjectW) -> tuple[int, int]:
    """(millicores, bytes) of a metrics ``usage``. metrics-server writes CPU in nanocores
    (``"123456789n"``) and memory in kibibytes (``"1234Ki"``): those are read directly, anything
    else by :func:`parse_millicores` / :func:`parse_bytes` (same results). The loop of
    :func:`pod_metrics_records` holds a copy of the direct reading."""
    if usage is not None:
        cpu, mem = usage.cpu, usage.memory
        if type(cpu) is str and type(mem) is str and cpu[-1:] == "n" and mem[-2:] == "Ki":
            n, k = cpu[:-1], mem[:-2]
            if n.isascii() and n.isdigit() and k.isascii() and k.isdigit():
                return -(-int(n) // 1_000_000), int(k) * 1024  # MilliValue() rounds up
    if usage is None or usage.cpu is None or usage.memory is None:
        given = usage.present() if usage is not None else {}
        raise ObjectError(f"{describe(w)}: usage must have cpu and memory, got {given!r}")
    try:
        return parse_millicores(usage.cpu), parse_bytes(usage.memory)
    except QuantityError as e:
        raise ObjectError(f"{describe(w)}: usage: {e}") from None


@lru_cache(maxsize=4096)
def _valid_stamp(timestamp: str, window: str | None) -> tuple[float, float]:
    """(timestamp, window) in seconds; raises ``ValueError``/``TypeError`` on a bad one. Memoized:
    metrics-server stamps many items alike, and one cached call replaces four."""
    return rfc3339_seconds(timestamp), 0.0 if window is None else parse_duration_seconds(window)


def _stamp(w: wire.NodeMetricsW | wire.PodMetricsW) -> tuple[float, float]:
    """(timestamp, window) in seconds of a metrics item; the timestamp is required."""
    if w.timestamp:
        try:
            return _valid_stamp(w.timestamp, w.window)
        except (ValueError, TypeError):
            pass  # named below
    window = 0.0
    if w.window is not None:
        try:
            window = parse_duration_seconds(w.window)
        except ValueError:
            raise ObjectError(f"{describe(w)}: invalid window {w.window!r}") from None
    if not w.timestamp:
        _missing(w, "timestamp")
    return _time(w.timestamp, "timestamp", w) or 0.0, window


def _bounded_usage(cpu: int, mem: int, w: wire.ObjectW) -> None:
    """Refuse a metrics item whose usage (summed over its containers) exceeds
    :data:`~scaler.model.quantity.MAX_QUANTITY`.

    Raises:
        ObjectError: naming the item and the resource.
    """
    try:
        check_total(cpu, "usage cpu of the containers", "millicores")
        check_total(mem, "usage memory of the containers", "bytes")
    except QuantityError as e:
        raise ObjectError(f"{describe(w)}: {e}") from None


def _node_metrics(w: wire.NodeMetricsW) -> NodeMetrics:
    name = w.metadata.name or _missing(w, "metadata.name")
    cpu, mem = _usage(w.usage, w)
    if cpu > MAX_QUANTITY or mem > MAX_QUANTITY:
        _bounded_usage(cpu, mem, w)
    ts, window = _stamp(w)
    return NodeMetrics(name, ts, window, cpu, mem)


def _pod_metrics(w: wire.PodMetricsW) -> PodMetrics:
    return pod_metrics_records([w])[0]


def pod_metrics_records(items: list[wire.PodMetricsW]) -> list[PodMetrics]:
    """The records of decoded PodMetrics, in order: usage summed over the containers, each item
    released (set to ``None`` in ``items``) once converted.

    One loop for a whole LIST (450,000 pods at 15,000 nodes, every ``--scan-interval``): the
    usual container (``"123456789n"`` CPU, ``"1234Ki"`` memory) is read inline, anything else by
    :func:`_usage`, and a timestamp and window like the previous item's are not read again.

    Raises:
        ObjectError: as :func:`to_record`, naming the first bad item.
    """
    out: list[PodMetrics] = []
    append = out.append
    stamp_of: tuple[str | None, str | None] | None = None
    stamp = (0.0, 0.0)
    for i in range(len(items)):
        w, items[i] = items[i], None  # type: ignore[call-overload]
        meta = w.metadata
        name = meta.name or _missing(w, "metadata.name")
        cpu = mem = 0
        containers = w.containers or ()
        for c in containers:
            u = c.usage
            if u is not None:
                n, k = u.cpu, u.memory
                if type(n) is str and type(k) is str and n[-1:] == "n" and k[-2:] == "Ki":
                    n, k = n[:-1], k[:-2]
                    if n.isascii() and n.isdigit() and k.isascii() and k.isdigit():
                        cpu += -(-int(n) // 1_000_000)  # MilliValue() rounds up
                        mem += int(k) * 1024
                        continue
            c_cpu, c_mem = _usage(u, w)  # anything else, or a named error
            cpu += c_cpu
            mem += c_mem
        if cpu > MAX_QUANTITY or mem > MAX_QUANTITY:
            _bounded_usage(cpu, mem, w)
        if stamp_of != (w.timestamp, w.window):
            stamp, stamp_of = _stamp(w), (w.timestamp, w.window)
        names = _names(tuple([c.name for c in containers]))
        append(PodMetrics(meta.namespace or "default", name, stamp[0], stamp[1], cpu, mem, names))
    return out


def _pdb(w: wire.PodDisruptionBudgetW) -> PodDisruptionBudget:
    return PodDisruptionBudget(
        namespace=w.metadata.namespace or "default",
        name=w.metadata.name or _missing(w, "metadata.name"),
        selector=_label_selector(w.spec.selector),
        disruptions_allowed=w.status.disruptions_allowed,
    )


_DEFAULT_ONE_REPLICA = frozenset({"ReplicaSet", "ReplicationController", "StatefulSet", "Deployment"})


def _controller(w: wire.ControllerW) -> Controller:
    kind = str(type(w).__struct_config__.tag)
    replicas = w.spec.replicas
    if replicas is None and kind in _DEFAULT_ONE_REPLICA:
        replicas = 1  # API default
    return Controller(
        kind=kind,
        namespace=w.metadata.namespace or "default",
        name=w.metadata.name or _missing(w, "metadata.name"),
        uid=w.metadata.uid,
        replicas=replicas,
        owner=_controller_ref(w.metadata),
    )


def _pv(w: wire.PersistentVolumeW) -> PersistentVolume:
    na = w.spec.node_affinity
    return PersistentVolume(
        name=w.metadata.name or _missing(w, "metadata.name"),
        labels=w.metadata.labels or {},
        node_affinity=_node_selector(na.required) if na is not None else None,
    )


def _namespace(w: wire.NamespaceW) -> Namespace:
    """A v1 Namespace: its name and labels (for pod affinity's ``namespaceSelector``)."""
    return Namespace(w.metadata.name or _missing(w, "metadata.name"), w.metadata.labels or {})


def _pvc(w: wire.PersistentVolumeClaimW) -> PersistentVolumeClaim:
    return PersistentVolumeClaim(
        namespace=w.metadata.namespace or "default",
        name=w.metadata.name or _missing(w, "metadata.name"),
        volume_name=w.spec.volume_name,
    )


_CONVERTERS: dict[type[wire.ObjectW], Callable[[Any], Record]] = {
    wire.PodW: _pod,
    wire.NodeW: _node,
    wire.NodeMetricsW: _node_metrics,
    wire.PodMetricsW: _pod_metrics,
    wire.PodDisruptionBudgetW: _pdb,
    wire.PersistentVolumeW: _pv,
    wire.PersistentVolumeClaimW: _pvc,
    wire.NamespaceW: _namespace,
    **{t: _controller for t in wire.CONTROLLER_TYPES},
    **DRA_CONVERTERS,
}


def to_record(w: wire.ObjectW) -> Record:
    """The record of a decoded object: :class:`Pod`, :class:`Node`, :class:`NodeMetrics`,
    :class:`PodMetrics`, :class:`PodDisruptionBudget`, :class:`Controller`,
    :class:`PersistentVolume`, :class:`PersistentVolumeClaim`, or a DRA record
    (:mod:`scaler.model.dra`).

    Raises:
        ObjectError: a required value is missing (``metadata.name``, a pod's ``spec``, a node's
            ``status.allocatable``, a metrics ``timestamp`` or usage), or a quantity, time or
            duration is malformed.
    """
    return _CONVERTERS[type(w)](w)
