"""Parse Kubernetes API JSON (as ``kubectl get -o json`` prints it) into slim records.

Every function takes one API object as a ``dict`` and returns a record, or raises
:class:`ObjectError` naming the object and the bad field. Pod requests follow Kubernetes'
``resourcehelper.PodRequests`` (``k8s.io/component-helpers/resource``): containers summed, the
max with each init container (plus the sidecars started before it), restartable init containers
(sidecars) added, pod overhead added; a pod-level ``spec.resources.requests`` wins for CPU and
memory. A container with a limit but no request for a resource requests its limit, as the API
server's defaulting does. Pod CPU and memory limits follow ``resourcehelper.PodLimits`` the same
way, and the kubelet's rule that a pod whose containers do not all declare a limit has none
(:func:`compute_pod_limits`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Hashable, Mapping
from fractions import Fraction
from functools import lru_cache
from typing import Any

import msgspec

from scaler.model.quantity import QuantityError, parse_bytes, parse_count, parse_millicores, parse_quantity
from scaler.model.records import (
    TAINT_TO_BE_DELETED,
    Controller,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    NodeMetrics,
    NodeSelectorRequirement,
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

__all__ = [
    "ObjectError",
    "format_time",
    "parse_controller",
    "parse_duration_seconds",
    "parse_label_selector",
    "parse_node",
    "parse_node_metrics",
    "parse_pdb",
    "parse_pod",
    "parse_pod_metrics",
    "parse_pv",
    "parse_pvc",
    "parse_resources",
    "parse_time",
]

Obj = Mapping[str, Any]


class ObjectError(ValueError):
    """An API object is malformed; the message names the object and the bad field or value."""


def _ident(obj: Obj) -> str:
    kind = obj.get("kind") or "object"
    raw_meta = obj.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    ns, name = meta.get("namespace"), meta.get("name")
    return f"{kind} {f'{ns}/' if ns else ''}{name or '<unnamed>'}"


def _map(obj: Obj, key: str, where: Obj) -> Mapping[str, Any]:
    v = obj.get(key)
    if v is None:
        return {}
    if type(v) is not dict and not isinstance(v, Mapping):  # dict first: the ABC check is slow
        raise ObjectError(f"{_ident(where)}: field {key!r} must be an object, got {v!r}")
    return v


def _list(obj: Obj, key: str, where: Obj) -> list[Any]:
    v = obj.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise ObjectError(f"{_ident(where)}: field {key!r} must be a list, got {v!r}")
    for item in v:
        if type(item) is not dict and not isinstance(item, Mapping):
            raise ObjectError(f"{_ident(where)}: field {key!r} must hold objects, got {item!r}")
    return v


def _str_map(obj: Obj, key: str, where: Obj) -> dict[str, str]:
    m = _map(obj, key, where)
    if all(type(k) is str and type(v) is str for k, v in m.items()):
        return dict(m)  # the usual case: already strings
    return {str(k): str(v) for k, v in m.items()}


def _required(obj: Obj, key: str, where: Obj) -> Any:
    v = obj.get(key)
    if v is None or v == "":
        raise ObjectError(f"{_ident(where)}: missing required field {key!r}")
    return v


def _int(v: Any, field: str, where: Obj) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ObjectError(f"{_ident(where)}: field {field!r} must be an integer, got {v!r}")
    return v


def parse_time(value: Any, field: str = "timestamp", where: Obj | None = None) -> float:
    """Parse an RFC 3339 timestamp (``2026-11-04T14:00:00Z``) into Unix seconds.

    Raises:
        ObjectError: not a valid RFC 3339 time (message names the value).
    """
    if isinstance(value, dt.datetime):  # an unquoted timestamp in a YAML file
        t = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return t.timestamp()
    if not isinstance(value, str):
        raise ObjectError(f"{_ident(where or {})}: field {field!r} is not a timestamp: {value!r}")
    try:
        return _rfc3339_seconds(value)
    except ValueError:
        raise ObjectError(f"{_ident(where or {})}: field {field!r} is not a timestamp: {value!r}") from None


@lru_cache(maxsize=4096)
def _rfc3339_seconds(value: str) -> float:
    """Unix seconds of an RFC 3339 string (memoized: a metrics list repeats one timestamp).

    Raises:
        ValueError: not a timestamp.
    """
    text = value.replace("Z", "+00:00").replace("z", "+00:00")
    t = dt.datetime.fromisoformat(text)
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return t.timestamp()


def format_time(ts: float) -> str:
    """Unix seconds as an RFC 3339 UTC timestamp to the second (``2026-11-22T08:30:00Z``, the
    layout Kubernetes writes; fractions are dropped). The inverse of :func:`parse_time` for
    whole seconds."""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@lru_cache(maxsize=1024)
def parse_duration_seconds(value: str) -> float:
    """Parse a Go-style duration (``30s``, ``2m``, ``1h30m``, ``500ms``) or a bare number of
    seconds into seconds.

    Raises:
        ValueError: the value is not a duration (message names it).
    """
    import math
    import re

    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):
            raise ValueError(f"invalid duration {value!r}")
        return seconds
    units = {
        "ns": 1e-9,
        "us": 1e-6,
        "\u00b5s": 1e-6,
        "\u03bcs": 1e-6,
        "ms": 1e-3,
        "s": 1.0,
        "m": 60.0,
        "h": 3600.0,
    }
    parts = re.findall(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"invalid duration {value!r}")
    return sum(float(n) * units[u] for n, u in parts)


def parse_resources(raw: Mapping[str, Any], where: Obj, field: str) -> Resources:
    """Parse a ``ResourceList`` (``{"cpu": "250m", "memory": "1Gi", ...}``) into
    :class:`Resources`. ``pods`` is parsed as a count; other names go to ``extended``.

    Raises:
        ObjectError: a malformed quantity (message names the object, field and value).
    """
    cpu = mem = eph = pods = 0
    ext: dict[str, int] = {}
    try:
        for name, value in raw.items():
            if name == "cpu":
                cpu = parse_millicores(value)
            elif name == "memory":
                mem = parse_bytes(value)
            elif name == "ephemeral-storage":
                eph = parse_bytes(value)
            elif name == "pods":
                pods = parse_count(value)
            elif name == "storage":
                continue
            else:
                ext[name] = parse_count(value)
    except QuantityError as e:
        raise ObjectError(f"{_ident(where)}: {field}: {e}") from None
    return Resources(cpu, mem, eph, pods, ext)


def parse_label_selector(raw: Any, where: Obj, field: str = "selector") -> LabelSelector | None:
    """Parse a ``metav1.LabelSelector``; ``None`` stays ``None``.

    Raises:
        ObjectError: malformed selector.
    """
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{_ident(where)}: field {field!r} must be an object, got {raw!r}")
    exprs = []
    for e in _list(raw, "matchExpressions", where):
        op = e.get("operator")
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ObjectError(f"{_ident(where)}: {field}: unknown selector operator {op!r}")
        exprs.append(LabelSelectorRequirement(str(e.get("key", "")), op, tuple(e.get("values") or ())))
    return LabelSelector(_str_map(raw, "matchLabels", where), tuple(exprs))


def _node_selector_terms(raw: Any, where: Obj) -> tuple[NodeSelectorTerm, ...]:
    terms = []
    for t in raw or ():

        def reqs(key: str, t: Mapping[str, Any] = t) -> tuple[NodeSelectorRequirement, ...]:
            out = []
            for r in _list(t, key, where):
                op = r.get("operator")
                if op not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
                    raise ObjectError(f"{_ident(where)}: unknown node selector operator {op!r}")
                out.append(NodeSelectorRequirement(str(r.get("key", "")), op, tuple(r.get("values") or ())))
            return tuple(out)

        terms.append(NodeSelectorTerm(reqs("matchExpressions"), reqs("matchFields")))
    return tuple(terms)


def _controller_ref(meta: Mapping[str, Any], where: Obj) -> OwnerRef | None:
    for o in _list(meta, "ownerReferences", where):
        if o.get("controller"):
            return OwnerRef(
                str(o.get("kind", "")),
                str(o.get("name", "")),
                str(o.get("uid", "")),
                str(o.get("apiVersion", "")),
            )
    return None


# Resources that pod-level ``spec.resources`` may set and that decide the QoS class
# (``resourcehelper.IsSupportedPodLevelResource``, ``qos.isSupportedQoSComputeResource``).
_POD_LEVEL_RESOURCES = ("cpu", "memory")


def _requests_and_limits(res: Mapping[str, Any], where: Obj) -> tuple[dict[str, Any], Mapping[str, Any]]:
    """(requests, limits) of a ``ResourceRequirements``, a missing request defaulting to its limit."""
    limits = _map(res, "limits", where)
    requests = dict(_map(res, "requests", where))
    for name, value in limits.items():
        requests.setdefault(name, value)  # API-server defaulting: request defaults to limit
    return requests, limits


def _positive(raw: Mapping[str, Any], name: str, where: Obj, field: str) -> Fraction | None:
    if name not in raw:
        return None
    try:
        q = parse_quantity(raw[name])
    except QuantityError as e:
        raise ObjectError(f"{_ident(where)}: {field}: {e}") from None
    return q if q > 0 else None


def _qos_class(groups: list[tuple[Mapping[str, Any], Mapping[str, Any]]], where: Obj) -> QoSClass:
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


def _requests_key(spec: Mapping[str, Any]) -> Hashable | None:
    """Everything :func:`pod_requests` reads from ``spec``, as a hashable value (each scalar
    with its type, so that ``1`` and ``True`` differ), or ``None`` when it holds something
    unexpected (the uncached path then reports it)."""
    fast = _fast_requests_key(spec)
    if fast is not None:
        return fast

    def res(r: Any) -> Hashable:
        if r is None:
            return None
        if type(r) is not dict:
            raise TypeError
        return tuple(
            (k, type(v).__name__, v) if type(v) is not dict else (k, "dict", res(v)) for k, v in r.items()
        )

    try:
        containers = tuple(
            (res(c.get("resources")), c.get("restartPolicy") if init else None)
            for init, key in ((False, "containers"), (True, "initContainers"))
            for c in (spec.get(key) or ())
        )
        key = (containers, res(spec.get("resources")), res(spec.get("overhead")))
        hash(key)
    except (TypeError, AttributeError):
        return None
    return key


class _Bail(Exception):
    """An unusual shape: take the general (validating) path instead of the fast one."""


def _str_items(m: Any) -> tuple[tuple[str, str], ...]:
    """``m``'s items when ``m`` is a dict of strings to strings (the usual ResourceList, label
    map...); raises :class:`_Bail` otherwise. ``str.join`` checks the types in C."""
    if type(m) is not dict:
        raise _Bail
    try:
        "".join(m)
        "".join(m.values())
    except TypeError:
        raise _Bail from None
    return tuple(m.items())


def _rr_key(r: Any) -> Hashable:
    """Key of a ``ResourceRequirements`` holding only string ``requests``/``limits``."""
    if r is None:
        return None
    if type(r) is not dict:
        raise _Bail
    req = r.get("requests")
    lim = r.get("limits")
    if len(r) != (req is not None) + (lim is not None):
        raise _Bail  # claims or other fields: the general key
    return (
        None if req is None else _str_items(req),
        None if lim is None else _str_items(lim),
    )


def _fast_requests_key(spec: Mapping[str, Any]) -> Hashable | None:
    """:func:`_requests_key` for the usual shape (containers whose resources hold string
    quantities only), tagged so that it never equals a general key; ``None`` otherwise."""
    try:
        parts: list[Hashable] = []
        for key, init in (("containers", False), ("initContainers", True)):
            cs = spec.get(key)
            if cs is None:
                continue
            if type(cs) is not list:
                return None
            for c in cs:
                if type(c) is not dict:
                    return None
                rp = c.get("restartPolicy") if init else None
                if rp is not None and type(rp) is not str:
                    return None
                parts.append((init, _rr_key(c.get("resources")), rp))
        pr = spec.get("resources")
        ov = spec.get("overhead")
        return (
            "fast",
            tuple(parts),
            _rr_key(pr),
            None if ov is None else _str_items(ov),
        )
    except _Bail:
        return None


PodResources = tuple[Resources, QoSClass, int | None, int | None]
"""``(requests, QoS class, CPU limit in millicores, memory limit in bytes)`` of a pod; a limit is
``None`` when the pod has none (:func:`compute_pod_limits`)."""

_REQUESTS_MEMO: dict[Hashable, PodResources] = {}
_REQUESTS_MEMO_MAX = 4096


def pod_requests(spec: Mapping[str, Any], where: Obj) -> PodResources:
    """:func:`compute_pod_requests` and :func:`compute_pod_limits`, memoized on the resource
    fields of ``spec`` (replicas of a workload share them); malformed input is never memoized,
    so it always raises.

    Raises:
        ObjectError: a malformed quantity.
    """
    key = _requests_key(spec)
    if key is None:
        return (*compute_pod_requests(spec, where), *compute_pod_limits(spec, where))
    hit = _REQUESTS_MEMO.get(key)
    if hit is None:
        hit = (*compute_pod_requests(spec, where), *compute_pod_limits(spec, where))
        if len(_REQUESTS_MEMO) >= _REQUESTS_MEMO_MAX:
            _REQUESTS_MEMO.clear()
        _REQUESTS_MEMO[key] = hit
    return hit


def compute_pod_limits(spec: Mapping[str, Any], where: Obj) -> tuple[int | None, int | None]:
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
    declared = {"cpu": True, "memory": True}
    total = Resources()
    sidecars = Resources()
    init_max = Resources()
    containers = _list(spec, "containers", where)
    if not containers:
        return None, None

    def limits(c: Mapping[str, Any]) -> Resources:
        lims = _map(_map(c, "resources", where), "limits", where)
        field = f"container {c.get('name')!r} resources.limits"
        for name in _POD_LEVEL_RESOURCES:
            if _positive(lims, name, where, field) is None:
                declared[name] = False
        return parse_resources({k: v for k, v in lims.items() if k in _POD_LEVEL_RESOURCES}, where, field)

    for c in containers:
        total = total + limits(c)
    for c in _list(spec, "initContainers", where):
        r = limits(c)
        if c.get("restartPolicy") == "Always":
            total = total + r
            sidecars = sidecars + r
            init_max = init_max.max(sidecars)
        else:
            init_max = init_max.max(r + sidecars)
    total = total.max(init_max)
    pod_lims = _map(_map(spec, "resources", where), "limits", where)
    cpu: int | None = total.cpu_millicores if declared["cpu"] else None
    mem: int | None = total.memory_bytes if declared["memory"] else None
    if _positive(pod_lims, "cpu", where, "spec.resources.limits") is not None:
        cpu = parse_resources({"cpu": pod_lims["cpu"]}, where, "spec.resources.limits").cpu_millicores
    if _positive(pod_lims, "memory", where, "spec.resources.limits") is not None:
        mem = parse_resources({"memory": pod_lims["memory"]}, where, "spec.resources.limits").memory_bytes
    overhead = _map(spec, "overhead", where)
    if overhead:
        extra = parse_resources(overhead, where, "spec.overhead")
        cpu = None if cpu is None else cpu + extra.cpu_millicores
        mem = None if mem is None else mem + extra.memory_bytes
    return cpu, mem


def compute_pod_requests(spec: Mapping[str, Any], where: Obj) -> tuple[Resources, QoSClass]:
    """Effective pod requests and the computed QoS class (``resourcehelper.PodRequests``,
    ``qos.ComputePodQOS``).

    Requests default as the API server's defaulting does: a container's missing request to its
    limit; with pod-level limits, a missing pod-level CPU or memory request to the containers'
    aggregate request, or to the pod-level limit when no container requests that resource.
    Pod-level ``spec.resources``, when it sets CPU or memory, decides the QoS class instead of the
    containers.

    Raises:
        ObjectError: a malformed quantity.
    """
    total = Resources()
    container_rl: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []

    def container(c: Mapping[str, Any]) -> Resources:
        reqs, lims = _requests_and_limits(_map(c, "resources", where), where)
        field = f"container {c.get('name')!r} resources"
        parse_resources(lims, where, field)  # validate the limits too
        container_rl.append((reqs, lims))
        return parse_resources(reqs, where, field)

    for c in _list(spec, "containers", where):
        total = total + container(c)
    sidecars = Resources()
    init_max = Resources()
    for c in _list(spec, "initContainers", where):
        r = container(c)
        if c.get("restartPolicy") == "Always":
            total = total + r
            sidecars = sidecars + r
            init_max = init_max.max(sidecars)
        else:
            init_max = init_max.max(r + sidecars)
    total = total.max(init_max)
    pod_res = _map(spec, "resources", where)
    pod_lims = {k: v for k, v in _map(pod_res, "limits", where).items() if k in _POD_LEVEL_RESOURCES}
    pod_level = {k: v for k, v in _map(pod_res, "requests", where).items() if k in _POD_LEVEL_RESOURCES}
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
    overhead = _map(spec, "overhead", where)
    if overhead:
        total = total + parse_resources(overhead, where, "spec.overhead")
    total = Resources(
        total.cpu_millicores,
        total.memory_bytes,
        total.ephemeral_storage_bytes,
        1,
        {k: v for k, v in total.extended.items() if v},
    )
    if pod_level or pod_lims:
        qos = _qos_class([(pod_level, pod_lims)], where)
    else:
        qos = _qos_class(container_rl, where)
    return total, qos


def _affinity_terms(raw: list[Any], where: Obj) -> tuple[PodAffinityTerm, ...]:
    out = []
    for t in raw:
        topo = t.get("topologyKey")
        if not topo:
            raise ObjectError(f"{_ident(where)}: pod affinity term without topologyKey")
        out.append(
            PodAffinityTerm(
                parse_label_selector(t.get("labelSelector"), where, "labelSelector"),
                str(topo),
                tuple(t.get("namespaces") or ()),
                # Namespace labels are not in the snapshot: any namespaceSelector is taken as "all
                # namespaces", which over-counts conflicts for anti-affinity (the safe side).
                t.get("namespaceSelector") is not None,
            )
        )
    return tuple(out)


def parse_pod(obj: Obj) -> Pod:
    """Parse a v1 Pod.

    The usual shapes take a fast path (:func:`_parse_pod_fast`); anything it does not expect, a
    malformed field included, goes through the general path (:func:`_parse_pod_general`), which
    validates every field and names the bad one.

    Raises:
        ObjectError: missing metadata.name/namespace, malformed quantities, selectors or times.
    """
    try:
        pod = _parse_pod_fast(obj)
    except Exception:  # _Bail, or anything the general path will report (or raise) itself
        pod = _parse_pod_general(obj)
    return _added_after_freeze(obj, msgspec.structs.replace(pod, containers=_running(obj)))


def _added_after_freeze(obj: Obj, pod: Pod) -> Pod:
    """What changed after this parser was frozen: only regular containers and sidecars hold
    host ports (kube-scheduler's ``GetHostPorts``); ``Pod.container_requests`` (each regular
    container's and sidecar's own CPU and memory request); a pod-level huge-pages request (or
    limit) replaces the containers' (``resourcehelper.IsSupportedPodLevelResource``)."""
    spec = obj["spec"]
    sidecars = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    running = [*(spec.get("containers") or ()), *sidecars]
    ports = tuple(
        (str(p.get("protocol") or "TCP"), str(p.get("hostIP") or "0.0.0.0"), int(p["hostPort"]))
        for c in running
        for p in c.get("ports") or ()
        if p.get("hostPort")
    )
    own: dict[str, tuple[int, int]] = {}
    for c in running:
        reqs, _ = _requests_and_limits(c.get("resources") or {}, obj)
        r = parse_resources(reqs, obj, "resources")
        own[str(c.get("name", ""))] = (r.cpu_millicores, r.memory_bytes)
    requests = pod.requests
    res = spec.get("resources") or {}
    huge = {k: v for k, v in (res.get("limits") or {}).items() if k.startswith("hugepages-")}
    huge.update({k: v for k, v in (res.get("requests") or {}).items() if k.startswith("hugepages-")})
    if huge:
        overhead = parse_resources(spec.get("overhead") or {}, obj, "spec.overhead").extended
        ext = dict(requests.extended)
        for k, v in parse_resources(huge, obj, "spec.resources").extended.items():
            ext[k] = v + overhead.get(k, 0)
        requests = Resources(
            requests.cpu_millicores,
            requests.memory_bytes,
            requests.ephemeral_storage_bytes,
            requests.pods,
            {k: v for k, v in ext.items() if v},
        )
    each = tuple((name, cpu, mem) for name, (cpu, mem) in own.items())
    return msgspec.structs.replace(pod, host_ports=ports, container_requests=each, requests=requests)


def _running(obj: Obj) -> tuple[str, ...]:
    """``Pod.containers`` (a field added after this parser was frozen): the containers whose
    status says running, else the spec's containers and sidecars."""
    status = obj.get("status") or {}
    if status.get("containerStatuses"):
        return tuple(
            c.get("name", "")
            for key in ("containerStatuses", "initContainerStatuses")
            for c in status.get(key) or ()
            if (c.get("state") or {}).get("running") is not None
        )
    spec = obj["spec"]
    return tuple(c.get("name", "") for c in spec.get("containers") or ()) + tuple(
        c.get("name", "") for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"
    )


_QOS = {q.value: q for q in QoSClass}
_EMPTY: Mapping[str, Any] = {}


def _volume(v: Obj) -> Volume:
    """A pod volume: its name, its source kind (the first key other than ``name``; none is an
    emptyDir), the emptyDir medium and the PVC claim name. Shared by both pod parsers."""
    kinds = [k for k in v if k != "name"]
    kind = kinds[0] if kinds else "emptyDir"
    medium = str((v.get("emptyDir") or {}).get("medium") or "") if kind == "emptyDir" else ""
    claim = str((v.get("persistentVolumeClaim") or {}).get("claimName") or "")
    return Volume(str(v.get("name", "")), kind, medium, claim)


def _dicts(v: Any) -> list[Any]:
    """A list of dicts (``None``: empty); raises :class:`_Bail` on anything else."""
    if v is None:
        return []
    if type(v) is not list:
        raise _Bail
    for item in v:
        if type(item) is not dict:
            raise _Bail
    return v


def _labels(v: Any) -> dict[str, str]:
    """A copy of a string-to-string map (``None``: empty); raises :class:`_Bail` otherwise."""
    if v is None:
        return {}
    if type(v) is not dict:
        raise _Bail
    "".join(v)  # TypeError (the caller bails) unless keys and values are all strings
    "".join(v.values())
    return dict(v)


def _stamp(v: Any) -> float:
    if type(v) is not str:
        raise _Bail
    return _rfc3339_seconds(v)  # ValueError: the caller bails


def _parse_pod_fast(obj: Obj) -> Pod:
    """:func:`_parse_pod_general` for well-formed pods, with direct dict lookups; raises (anything)
    on an input it does not expect. It accepts only what the general path accepts, with the
    same result; affinity and spread constraints, which are rarer, use the general helpers."""
    if type(obj) is not dict:
        raise _Bail
    meta = obj.get("metadata")
    spec = obj.get("spec")
    status = obj.get("status")
    if type(meta) is not dict or type(spec) is not dict:
        raise _Bail
    if status is None:
        status = _EMPTY
    elif type(status) is not dict:
        raise _Bail
    name = meta.get("name")
    if type(name) is not str or not name:
        raise _Bail
    namespace = meta.get("namespace") or "default"
    requests, computed_qos, cpu_limit, memory_limit = pod_requests(spec, obj)
    qos_raw = status.get("qosClass")
    qos = _QOS[qos_raw] if qos_raw else computed_qos
    affinity = spec.get("affinity")
    required_node_affinity = None
    pod_aff: list[Any] = []
    anti: list[Any] = []
    if affinity is not None:
        affinity = _map(spec, "affinity", obj)
        node_aff = _map(
            _map(affinity, "nodeAffinity", obj), "requiredDuringSchedulingIgnoredDuringExecution", obj
        )
        required_node_affinity = (
            _node_selector_terms(node_aff.get("nodeSelectorTerms"), obj) if node_aff else None
        )
        pod_aff = _list(
            _map(affinity, "podAffinity", obj), "requiredDuringSchedulingIgnoredDuringExecution", obj
        )
        anti = _list(
            _map(affinity, "podAntiAffinity", obj), "requiredDuringSchedulingIgnoredDuringExecution", obj
        )
    spread: tuple[TopologySpreadConstraint, ...] = ()
    if spec.get("topologySpreadConstraints") is not None:
        spread = _spread_constraints(spec, obj)
    containers = _dicts(spec.get("containers"))
    inits = _dicts(spec.get("initContainers"))
    ports = []
    for c in containers + inits if inits else containers:
        cports = c.get("ports")
        if cports is None:
            continue
        for p in _dicts(cports):
            hp = p.get("hostPort")
            if hp:
                if type(hp) is not int:
                    raise _Bail
                ports.append((str(p.get("protocol") or "TCP"), str(p.get("hostIP") or "0.0.0.0"), hp))
    volumes = [_volume(v) for v in _dicts(spec.get("volumes"))]
    created = meta.get("creationTimestamp")
    deleted = meta.get("deletionTimestamp")
    priority = spec.get("priority")
    if priority is None:
        priority = 0
    elif type(priority) is not int:
        raise _Bail
    tgps = spec.get("terminationGracePeriodSeconds")
    if tgps is None:
        tgps = 30
    elif type(tgps) is not int:
        raise _Bail
    owner = None
    refs = meta.get("ownerReferences")
    if refs is not None:
        for o in _dicts(refs):
            if o.get("controller"):
                owner = OwnerRef(
                    str(o.get("kind", "")),
                    str(o.get("name", "")),
                    str(o.get("uid", "")),
                    str(o.get("apiVersion", "")),
                )
                break
    tolerations = tuple(
        Toleration(
            str(t.get("key") or ""),
            str(t.get("operator") or "Equal"),
            str(t.get("value") or ""),
            str(t.get("effect") or ""),
        )
        for t in _dicts(spec.get("tolerations"))
    )
    return Pod(
        namespace=str(namespace),
        name=name,
        uid=str(meta.get("uid") or f"{namespace}/{name}"),
        node_name=str(spec.get("nodeName") or ""),
        requests=requests,
        labels=_labels(meta.get("labels")),
        annotations=_labels(meta.get("annotations")),
        controller=owner,
        phase=str(status.get("phase") or "Pending"),
        priority=priority,
        has_priority=spec.get("priority") is not None,  # added with the record's field
        qos_class=qos,
        restart_policy=str(spec.get("restartPolicy") or "Always"),
        creation_ts=_stamp(created) if created else None,
        deletion_ts=_stamp(deleted) if deleted else None,
        termination_grace_seconds=tgps,
        tolerations=tolerations,
        node_selector=_labels(spec.get("nodeSelector")),
        required_node_affinity=required_node_affinity,
        required_affinity=_affinity_terms(pod_aff, obj) if pod_aff else (),
        required_anti_affinity=_affinity_terms(anti, obj) if anti else (),
        topology_spread=spread,
        host_ports=tuple(ports),
        volumes=tuple(volumes),
        cpu_limit_millicores=cpu_limit,
        memory_limit_bytes=memory_limit,
    )


def _spread_constraints(spec: Obj, obj: Obj) -> tuple[TopologySpreadConstraint, ...]:
    spread = []
    for c in _list(spec, "topologySpreadConstraints", obj):
        spread.append(
            TopologySpreadConstraint(
                max_skew=_int(c.get("maxSkew", 1), "maxSkew", obj),
                topology_key=str(_required(c, "topologyKey", obj)),
                when_unsatisfiable=str(c.get("whenUnsatisfiable", "DoNotSchedule")),
                label_selector=parse_label_selector(c.get("labelSelector"), obj, "labelSelector"),
                min_domains=c.get("minDomains"),
                node_affinity_policy=str(c.get("nodeAffinityPolicy") or "Honor"),
                node_taints_policy=str(c.get("nodeTaintsPolicy") or "Ignore"),
                match_label_keys=tuple(c.get("matchLabelKeys") or ()),
            )
        )
    return tuple(spread)


def _parse_pod_general(obj: Obj) -> Pod:
    """Parse a v1 Pod, validating every field (the reference for :func:`_parse_pod_fast`)."""
    meta = _map(obj, "metadata", obj)
    spec = _map(obj, "spec", obj)
    status = _map(obj, "status", obj)
    name = _required(meta, "name", obj)
    namespace = meta.get("namespace") or "default"
    requests, computed_qos, cpu_limit, memory_limit = pod_requests(spec, obj)
    qos_raw = status.get("qosClass")
    try:
        qos = QoSClass(qos_raw) if qos_raw else computed_qos
    except ValueError:
        raise ObjectError(f"{_ident(obj)}: unknown qosClass {qos_raw!r}") from None
    affinity = _map(spec, "affinity", obj)
    node_aff = _map(
        _map(affinity, "nodeAffinity", obj), "requiredDuringSchedulingIgnoredDuringExecution", obj
    )
    required_node_affinity = (
        _node_selector_terms(node_aff.get("nodeSelectorTerms"), obj) if node_aff else None
    )
    pod_aff = _list(_map(affinity, "podAffinity", obj), "requiredDuringSchedulingIgnoredDuringExecution", obj)
    anti = _list(
        _map(affinity, "podAntiAffinity", obj), "requiredDuringSchedulingIgnoredDuringExecution", obj
    )
    spread = _spread_constraints(spec, obj)
    ports = []
    for c in _list(spec, "containers", obj) + _list(spec, "initContainers", obj):
        for p in _list(c, "ports", obj):
            hp = p.get("hostPort")
            if hp:
                ports.append(
                    (
                        str(p.get("protocol") or "TCP"),
                        str(p.get("hostIP") or "0.0.0.0"),
                        _int(hp, "hostPort", obj),
                    )
                )
    volumes = [_volume(v) for v in _list(spec, "volumes", obj)]
    created = meta.get("creationTimestamp")
    deleted = meta.get("deletionTimestamp")
    priority = spec.get("priority")
    tgps = spec.get("terminationGracePeriodSeconds")
    return Pod(
        namespace=str(namespace),
        name=str(name),
        uid=str(meta.get("uid") or f"{namespace}/{name}"),
        node_name=str(spec.get("nodeName") or ""),
        requests=requests,
        labels=_str_map(meta, "labels", obj),
        annotations=_str_map(meta, "annotations", obj),
        controller=_controller_ref(meta, obj),
        phase=str(status.get("phase") or "Pending"),
        priority=_int(priority, "spec.priority", obj) if priority is not None else 0,
        has_priority=priority is not None,  # added with the record's field
        qos_class=qos,
        restart_policy=str(spec.get("restartPolicy") or "Always"),
        creation_ts=parse_time(created, "metadata.creationTimestamp", obj) if created else None,
        deletion_ts=parse_time(deleted, "metadata.deletionTimestamp", obj) if deleted else None,
        termination_grace_seconds=_int(tgps, "terminationGracePeriodSeconds", obj)
        if tgps is not None
        else 30,
        tolerations=tuple(
            Toleration(
                str(t.get("key") or ""),
                str(t.get("operator") or "Equal"),
                str(t.get("value") or ""),
                str(t.get("effect") or ""),
            )
            for t in _list(spec, "tolerations", obj)
        ),
        node_selector=_str_map(spec, "nodeSelector", obj),
        required_node_affinity=required_node_affinity,
        required_affinity=_affinity_terms(pod_aff, obj),
        required_anti_affinity=_affinity_terms(anti, obj),
        topology_spread=spread,
        host_ports=tuple(ports),
        volumes=tuple(volumes),
        cpu_limit_millicores=cpu_limit,
        memory_limit_bytes=memory_limit,
    )


def parse_node(obj: Obj) -> Node:
    """Parse a v1 Node.

    Raises:
        ObjectError: missing name or ``status.allocatable``, malformed quantities or taints.
    """
    meta = _map(obj, "metadata", obj)
    spec = _map(obj, "spec", obj)
    status = _map(obj, "status", obj)
    name = _required(meta, "name", obj)
    alloc_raw = _map(status, "allocatable", obj)
    if not alloc_raw:
        raise ObjectError(f"{_ident(obj)}: missing required field 'status.allocatable'")
    allocatable = parse_resources(alloc_raw, obj, "status.allocatable")
    taints = []
    tbd: float | None = None
    for t in _list(spec, "taints", obj):
        key = t.get("key")
        if not key:
            raise ObjectError(f"{_ident(obj)}: taint without key: {t!r}")
        taint = Taint(str(key), str(t.get("value") or ""), str(t.get("effect") or "NoSchedule"))
        taints.append(taint)
        if key == TAINT_TO_BE_DELETED:
            try:
                tbd = float(taint.value)
            except ValueError:
                tbd = 0.0
    ready = False
    ready_ts = 0.0
    for c in _list(status, "conditions", obj):
        if c.get("type") == "Ready":
            ready = c.get("status") == "True"
            if c.get("lastTransitionTime"):
                ready_ts = parse_time(c["lastTransitionTime"], "Ready.lastTransitionTime", obj)
    created = meta.get("creationTimestamp")
    return Node(
        name=str(name),
        allocatable=allocatable,
        labels=_str_map(meta, "labels", obj),
        annotations=_str_map(meta, "annotations", obj),
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
        ready_transition_ts=ready_ts,
        creation_ts=parse_time(created, "metadata.creationTimestamp", obj) if created else 0.0,
        provider_id=str(spec.get("providerID") or ""),
        uid=str(meta.get("uid") or ""),
        to_be_deleted_ts=tbd,
    )


def _usage(obj: Obj, usage: Mapping[str, Any]) -> tuple[int, int]:
    if "cpu" not in usage or "memory" not in usage:
        raise ObjectError(f"{_ident(obj)}: usage must have cpu and memory, got {dict(usage)!r}")
    try:
        return parse_millicores(usage["cpu"]), parse_bytes(usage["memory"])
    except QuantityError as e:
        raise ObjectError(f"{_ident(obj)}: usage: {e}") from None


def _window(obj: Obj) -> float:
    w = obj.get("window")
    if w is None:
        return 0.0
    try:
        return parse_duration_seconds(str(w))
    except ValueError:
        raise ObjectError(f"{_ident(obj)}: invalid window {w!r}") from None


def parse_node_metrics(obj: Obj) -> NodeMetrics:
    """Parse a metrics.k8s.io/v1beta1 NodeMetrics item.

    Raises:
        ObjectError: missing name, timestamp or usage, or malformed quantities.
    """
    meta = _map(obj, "metadata", obj)
    cpu, mem = _usage(obj, _map(obj, "usage", obj))
    return NodeMetrics(
        name=str(_required(meta, "name", obj)),
        timestamp=parse_time(_required(obj, "timestamp", obj), "timestamp", obj),
        window_seconds=_window(obj),
        cpu_millicores=cpu,
        memory_bytes=mem,
    )


def parse_pod_metrics(obj: Obj) -> PodMetrics:
    """Parse a metrics.k8s.io/v1beta1 PodMetrics item, summing its containers' usage.

    Well-formed items take a fast path; anything else the general, validating one.

    Raises:
        ObjectError: missing name, timestamp or container usage, or malformed quantities.
    """
    try:
        m = _parse_pod_metrics_fast(obj)
    except Exception:  # _Bail, or anything the general path will report (or raise) itself
        m = _parse_pod_metrics_general(obj)
    # PodMetrics.containers was added after this parser was frozen.
    return msgspec.structs.replace(m, containers=tuple(c.get("name", "") for c in obj.get("containers") or ()))


def _parse_pod_metrics_fast(obj: Obj) -> PodMetrics:
    if type(obj) is not dict:
        raise _Bail
    meta = obj.get("metadata")
    if type(meta) is not dict:
        raise _Bail
    cpu = mem = 0
    for c in _dicts(obj.get("containers")):
        usage = c.get("usage")
        if type(usage) is not dict:
            raise _Bail
        cpu += parse_millicores(usage["cpu"])
        mem += parse_bytes(usage["memory"])
    name = meta.get("name")
    if type(name) is not str or not name:
        raise _Bail
    return PodMetrics(
        namespace=str(meta.get("namespace") or "default"),
        name=name,
        timestamp=_stamp(obj.get("timestamp")),
        window_seconds=_window(obj),
        cpu_millicores=cpu,
        memory_bytes=mem,
    )


def _parse_pod_metrics_general(obj: Obj) -> PodMetrics:
    meta = _map(obj, "metadata", obj)
    cpu = mem = 0
    for c in _list(obj, "containers", obj):
        c_cpu, c_mem = _usage(obj, _map(c, "usage", obj))
        cpu += c_cpu
        mem += c_mem
    return PodMetrics(
        namespace=str(meta.get("namespace") or "default"),
        name=str(_required(meta, "name", obj)),
        timestamp=parse_time(_required(obj, "timestamp", obj), "timestamp", obj),
        window_seconds=_window(obj),
        cpu_millicores=cpu,
        memory_bytes=mem,
    )


def parse_pdb(obj: Obj) -> PodDisruptionBudget:
    """Parse a policy/v1 PodDisruptionBudget (``status.disruptionsAllowed`` defaults to 0).

    Raises:
        ObjectError: missing name or malformed selector.
    """
    meta = _map(obj, "metadata", obj)
    spec = _map(obj, "spec", obj)
    status = _map(obj, "status", obj)
    allowed = status.get("disruptionsAllowed", 0)
    return PodDisruptionBudget(
        namespace=str(meta.get("namespace") or "default"),
        name=str(_required(meta, "name", obj)),
        selector=parse_label_selector(spec.get("selector"), obj, "spec.selector"),
        disruptions_allowed=_int(allowed, "status.disruptionsAllowed", obj),
    )


def parse_controller(obj: Obj) -> Controller:
    """Parse a workload controller (ReplicaSet, ReplicationController, StatefulSet, DaemonSet,
    Job, Deployment).

    Raises:
        ObjectError: missing name or a non-integer ``spec.replicas``.
    """
    meta = _map(obj, "metadata", obj)
    spec = _map(obj, "spec", obj)
    kind = str(_required(obj, "kind", obj))
    replicas = spec.get("replicas")
    if replicas is None and kind in ("ReplicaSet", "ReplicationController", "StatefulSet", "Deployment"):
        replicas = 1  # API default
    return Controller(
        kind=kind,
        namespace=str(meta.get("namespace") or "default"),
        name=str(_required(meta, "name", obj)),
        uid=str(meta.get("uid") or ""),
        replicas=_int(replicas, "spec.replicas", obj) if replicas is not None else None,
        owner=_controller_ref(meta, obj),
    )


def parse_pv(obj: Obj) -> PersistentVolume:
    """Parse a v1 PersistentVolume (labels and required node affinity).

    Raises:
        ObjectError: missing name or malformed affinity.
    """
    meta = _map(obj, "metadata", obj)
    spec = _map(obj, "spec", obj)
    required = _map(_map(spec, "nodeAffinity", obj), "required", obj)
    return PersistentVolume(
        name=str(_required(meta, "name", obj)),
        labels=_str_map(meta, "labels", obj),
        node_affinity=_node_selector_terms(required.get("nodeSelectorTerms"), obj) if required else None,
    )


def parse_pvc(obj: Obj) -> PersistentVolumeClaim:
    """Parse a v1 PersistentVolumeClaim.

    Raises:
        ObjectError: missing name.
    """
    meta = _map(obj, "metadata", obj)
    spec = _map(obj, "spec", obj)
    return PersistentVolumeClaim(
        namespace=str(meta.get("namespace") or "default"),
        name=str(_required(meta, "name", obj)),
        volume_name=str(spec.get("volumeName") or ""),
    )
