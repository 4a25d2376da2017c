"""Slim, immutable records of the cluster objects the engine reads.

Raw API JSON is decoded once, at the edge (:mod:`scaler.model.decode` into the Structs of
:mod:`scaler.model.wire`, turned into records by :mod:`scaler.model.parse`); the engine only sees
these records. Units are fixed: CPU in millicores, memory and storage in bytes, times in Unix seconds
(float), counts as ints. Kubernetes client model classes never appear here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache

import msgspec

__all__ = [
    "ANNOTATION_DAEMONSET_POD",
    "ANNOTATION_MIRROR",
    "ANNOTATION_SAFE_TO_EVICT",
    "ANNOTATION_SAFE_TO_EVICT_LOCAL_VOLUMES",
    "ANNOTATION_SCALE_DOWN_DISABLED",
    "LABEL_HOSTNAME",
    "LABEL_NODEPOOL",
    "LABEL_ZONE",
    "LABEL_ZONE_BETA",
    "TAINT_DELETION_CANDIDATE",
    "TAINT_TO_BE_DELETED",
    "Controller",
    "LabelSelector",
    "LabelSelectorRequirement",
    "Namespace",
    "Node",
    "NodeMetrics",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "OwnerRef",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Pod",
    "PodAffinityTerm",
    "PodClaim",
    "PodDisruptionBudget",
    "PodMetrics",
    "QoSClass",
    "Resources",
    "Taint",
    "Toleration",
    "TopologySpreadConstraint",
    "Volume",
    "covers",
    "missing_containers",
]

# Well-known keys (cluster-autoscaler's names).
ANNOTATION_SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
"""On a node, ``"true"``: neither scaler nor cluster-autoscaler removes it (``ScaleDownDisabledAnnotation``)."""
ANNOTATION_SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
"""On a pod: ``"true"`` lets it move whatever the drain rules say (PDBs still hold), ``"false"``
keeps its node (``NotSafeToEvictAnnotation``), ``"on-completion"`` keeps its node until it ends
(``BlockedByOnCompletionPod``)."""
ANNOTATION_SAFE_TO_EVICT_LOCAL_VOLUMES = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
"""On a pod: comma-separated local volumes whose data may be lost, so that they do not block its
node (``LocalStorageRequested``)."""
ANNOTATION_DAEMONSET_POD = "cluster-autoscaler.kubernetes.io/daemonset-pod"
"""On a pod, ``"true"``: treated as a DaemonSet pod (not moved, evicted only as DaemonSet pods are)."""
ANNOTATION_MIRROR = "kubernetes.io/config.mirror"
"""On a static pod's mirror: never moved, and a node holding only such pods and DaemonSet pods is empty."""
TAINT_TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"
"""``ToBeDeletedByClusterAutoscaler=<unix ts>:NoSchedule``, put by scaler (or any
cluster-autoscaler) on a node it removes: nothing is placed there, and a node carrying a fresh one
is ``CurrentlyBeingDeleted``."""
TAINT_DELETION_CANDIDATE = "DeletionCandidateOfClusterAutoscaler"
"""cluster-autoscaler's soft ``PreferNoSchedule`` taint on unneeded nodes; scaler never sets it."""
LABEL_NODEPOOL = "cloud.google.com/gke-nodepool"
"""A node's GKE node pool, its node group; a node without it is ``NotAutoscaled``."""
LABEL_ZONE = "topology.kubernetes.io/zone"
"""A node's zone: node-group minimums hold per zone, and topology spread counts by it."""
LABEL_ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
"""The deprecated zone label, read where ``topology.kubernetes.io/zone`` is absent."""
LABEL_HOSTNAME = "kubernetes.io/hostname"
"""A node's hostname label, the usual topology key of pod anti-affinity."""

_EMPTY: Mapping[str, str] = {}
_EMPTY_INT: Mapping[str, int] = {}


@dataclass(frozen=True, slots=True)
class Resources:
    """A resource vector: CPU in millicores, memory and ephemeral storage in bytes, a pod count,
    and extended resources (``nvidia.com/gpu``, ``hugepages-2Mi``, …) as whole units."""

    cpu_millicores: int = 0
    memory_bytes: int = 0
    ephemeral_storage_bytes: int = 0
    pods: int = 0
    extended: Mapping[str, int] = field(default_factory=dict)

    def __add__(self, other: Resources) -> Resources:
        ext = dict(self.extended)
        for k, v in other.extended.items():
            ext[k] = ext.get(k, 0) + v
        return Resources(
            self.cpu_millicores + other.cpu_millicores,
            self.memory_bytes + other.memory_bytes,
            self.ephemeral_storage_bytes + other.ephemeral_storage_bytes,
            self.pods + other.pods,
            ext,
        )

    def __sub__(self, other: Resources) -> Resources:
        ext = dict(self.extended)
        for k, v in other.extended.items():
            ext[k] = ext.get(k, 0) - v
        return Resources(
            self.cpu_millicores - other.cpu_millicores,
            self.memory_bytes - other.memory_bytes,
            self.ephemeral_storage_bytes - other.ephemeral_storage_bytes,
            self.pods - other.pods,
            ext,
        )

    def max(self, other: Resources) -> Resources:
        """Per-resource maximum of two vectors."""
        ext = dict(self.extended)
        for k, v in other.extended.items():
            ext[k] = max(ext.get(k, 0), v)
        return Resources(
            max(self.cpu_millicores, other.cpu_millicores),
            max(self.memory_bytes, other.memory_bytes),
            max(self.ephemeral_storage_bytes, other.ephemeral_storage_bytes),
            max(self.pods, other.pods),
            ext,
        )


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint. ``effect`` is ``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration (``operator`` is ``Equal`` or ``Exists``; empty effect matches all)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """True when this toleration matches ``taint`` (``v1helper.TolerationsTolerateTaint``)."""
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclass(frozen=True, slots=True)
class LabelSelectorRequirement:
    """One ``matchExpressions`` entry of a label selector (In, NotIn, Exists, DoesNotExist)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when ``labels`` satisfy this requirement."""
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A ``metav1.LabelSelector``. An empty selector matches everything; ``None`` where the API
    allows a null selector means "matches nothing" and is modelled by the caller."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when every matchLabels pair and every expression holds for ``labels``."""
        for k, v in self.match_labels.items():
            if labels.get(k) != v:
                return False
        return all(r.matches(labels) for r in self.match_expressions)


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """A node-affinity requirement: In, NotIn, Exists, DoesNotExist, Gt, Lt."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when the node ``labels`` satisfy the requirement (Gt/Lt compare integers)."""
        if self.operator in ("Gt", "Lt"):
            if self.key not in labels or len(self.values) != 1:
                return False
            try:
                have, want = int(labels[self.key]), int(self.values[0])
            except ValueError:
                return False
            return have > want if self.operator == "Gt" else have < want
        return LabelSelectorRequirement(self.key, self.operator, self.values).matches(labels)


_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = re.compile(rf"(?:{_NAME})?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_NAME = re.compile(_NAME)
_INT64 = re.compile(r"[+-]?[0-9]+")


def _valid_label_key(key: str) -> bool:
    """``validation.IsQualifiedName``: ``[prefix/]name``, the prefix a DNS subdomain of at most
    253 characters, the name at most 63 characters of ``[A-Za-z0-9_.-]`` starting and ending
    alphanumeric."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return 0 < len(name) <= 63 and _LABEL_NAME.fullmatch(name) is not None


def _valid_label_value(value: str) -> bool:
    """``validation.IsValidLabelValue``: empty, or at most 63 characters of ``[A-Za-z0-9_.-]``
    starting and ending alphanumeric."""
    return len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None


@lru_cache(maxsize=4096)
def _parses(req: NodeSelectorRequirement, field: bool) -> bool:
    """Whether the scheduler can turn ``req`` into a selector (``nodeaffinity``'s
    ``nodeSelectorRequirementsAsSelector`` / ``…AsFieldSelector``, with ``labels.NewRequirement``'s
    checks): a qualified-name key; In/NotIn with at least one valid label value; Exists and
    DoesNotExist with none; Gt/Lt with one integer. A field requirement must be
    ``metadata.name`` In/NotIn with exactly one value. A term with a requirement that does not
    parse matches no node (``NewLazyErrorNodeSelector``)."""
    op, values = req.operator, req.values
    if field:
        return req.key == "metadata.name" and op in ("In", "NotIn") and len(values) == 1
    if not _valid_label_key(req.key):
        return False
    if op in ("In", "NotIn"):
        return len(values) > 0 and all(_valid_label_value(v) for v in values)
    if op in ("Exists", "DoesNotExist"):
        return not values
    if op in ("Gt", "Lt"):
        return (
            len(values) == 1
            and _INT64.fullmatch(values[0]) is not None
            and -(2**63) <= int(values[0]) < 2**63
        )
    return False


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """A node selector term: all expressions (on labels) and field requirements (on the node
    name, ``metadata.name``) must hold. An empty term matches no node, as in the scheduler, and
    so does a term with a requirement the scheduler cannot parse (an invalid key or label value,
    a wrong number of values: :func:`_parses`)."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        """True when the node named ``node_name`` with ``labels`` satisfies the term."""
        if not self.match_expressions and not self.match_fields:
            return False
        if not all(_parses(r, False) for r in self.match_expressions) or not all(
            _parses(r, True) for r in self.match_fields
        ):
            return False
        if not all(r.matches(labels) for r in self.match_expressions):
            return False
        fields = {"metadata.name": node_name}
        return all(r.matches(fields) for r in self.match_fields)


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A required pod (anti-)affinity term. It selects pods of the namespaces in ``namespaces``
    and of those whose labels match ``namespace_selector``; with neither, the namespace of the
    pod that declares it. ``all_namespaces`` is an empty ``namespaceSelector`` (``{}``): every
    namespace."""

    label_selector: LabelSelector | None
    topology_key: str
    namespaces: tuple[str, ...] = ()
    all_namespaces: bool = False
    namespace_selector: LabelSelector | None = None

    def selects(
        self,
        owner_namespace: str,
        pod: Pod,
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
        unknown: bool = True,
    ) -> bool:
        """True when ``pod`` is matched by this term declared by a pod in ``owner_namespace``
        (kube-scheduler's ``AffinityTerm.Matches``).

        ``namespace_labels`` maps every namespace to its labels, for ``namespace_selector``;
        ``None`` when they are not known, and then a pod outside ``namespaces`` counts as
        selected when ``unknown`` is true. Callers pass whichever answer refuses more
        destinations: ``True`` for anti-affinity (a possible conflict), ``False`` for affinity
        (no proof of a match).
        """
        if self.label_selector is None:
            return False
        if not self.all_namespaces:
            if self.namespace_selector is None:
                allowed = self.namespaces or (owner_namespace,)
                if pod.namespace not in allowed:
                    return False
            elif pod.namespace not in self.namespaces:
                if namespace_labels is None:
                    if not unknown:
                        return False
                elif not self.namespace_selector.matches(namespace_labels.get(pod.namespace, {})):
                    return False
        return self.label_selector.matches(pod.labels)


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    """A pod topology spread constraint (only ``DoNotSchedule`` ones are filters)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: LabelSelector | None
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: tuple[str, ...] = ()


class Volume(msgspec.Struct, frozen=True, gc=False):
    """A pod volume. ``kind`` is the volume source key (``emptyDir``, ``hostPath``,
    ``persistentVolumeClaim``, ``configMap``, …); ``medium`` is the emptyDir medium. A frozen
    Struct, as :class:`Pod` (pods have one or more each)."""

    name: str
    kind: str
    medium: str = ""
    claim_name: str = ""


class OwnerRef(msgspec.Struct, frozen=True, gc=False):
    """The controller owner reference of a pod or workload (a frozen Struct, as :class:`Pod`:
    every pod has one)."""

    kind: str
    name: str
    uid: str = ""
    api_version: str = ""


class PodClaim(msgspec.Struct, frozen=True, gc=False):
    """One ``spec.resourceClaims[]`` entry of a pod, resolved: ``claim`` names the ResourceClaim
    (in the pod's namespace), given (``resourceClaimName``) or made for the pod from
    ``template`` (``resourceClaimTemplateName``, the name read from
    ``status.resourceClaimStatuses``); ``""`` while no claim was made for a template entry yet.
    An entry whose status says no claim is needed is not kept."""

    name: str
    claim: str
    template: str = ""


class QoSClass(StrEnum):
    """Kubernetes pod QoS class."""

    BEST_EFFORT = "BestEffort"
    BURSTABLE = "Burstable"
    GUARANTEED = "Guaranteed"


class Pod(msgspec.Struct, frozen=True, gc=False):
    """A pod as the engine needs it.

    A frozen :class:`msgspec.Struct` rather than a frozen dataclass like the other records: a
    cluster holds hundreds of thousands of pods, and a Struct is built (and copied by
    :func:`msgspec.structs.replace`) in C, four to twenty times faster than a frozen
    dataclass's ``__init__``, which sets each of its 26 fields through ``object.__setattr__``.
    Copy one with :func:`msgspec.structs.replace`, not :func:`dataclasses.replace`. Not
    tracked by the cycle collector (``gc=False``): a pod refers to no pod, so no reference
    cycle can pass through one, and a full collection need not visit every pod.

    ``requests`` is the pod's effective request (containers summed, max with each init
    container, sidecars added, overhead added), with ``pods=1``. ``cpu_limit_millicores`` and
    ``memory_limit_bytes`` are its limits computed the same way (``resourcehelper.PodLimits``),
    ``None`` when the pod has no limit for the resource (a container without one: the kubelet
    then sets no pod cgroup limit). Times are Unix seconds.

    ``containers`` names the containers the pod runs, whose usage its PodMetrics must report:
    those whose ``status.containerStatuses`` (and ``initContainerStatuses``, for sidecars) say
    ``running``; without container statuses, ``spec.containers`` plus the restartable init
    containers (sidecars). Empty for records not read from the API (nothing to check).
    ``container_requests`` holds ``(name, CPU millicores, memory bytes)`` of each regular
    container's and sidecar's own request from the spec (0: none), for a PodMetrics reading that
    lacks a container (:func:`scaler.utilization.pod_load`); empty when not known.

    **In-place resize** (KEP-1287). ``requests`` counts a pod being resized as kube-scheduler
    1.35 does, from its status resources (:func:`scaler.model.requests.resize_requests`);
    ``spec_requests`` is then what its spec alone requests (``None`` when the status changes
    nothing, the usual case). A pod that moves is placed with :attr:`placement_requests`.
    """

    namespace: str
    name: str
    uid: str
    node_name: str
    requests: Resources
    labels: Mapping[str, str] = msgspec.field(default_factory=dict)
    annotations: Mapping[str, str] = msgspec.field(default_factory=dict)
    controller: OwnerRef | None = None
    phase: str = "Running"
    priority: int = 0
    qos_class: QoSClass = QoSClass.BURSTABLE
    restart_policy: str = "Always"
    creation_ts: float | None = None  # None: unknown age (treated as young)
    deletion_ts: float | None = None
    termination_grace_seconds: int = 30
    tolerations: tuple[Toleration, ...] = ()
    node_selector: Mapping[str, str] = msgspec.field(default_factory=dict)
    required_node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    required_affinity: tuple[PodAffinityTerm, ...] = ()
    required_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    topology_spread: tuple[TopologySpreadConstraint, ...] = ()
    host_ports: tuple[tuple[str, str, int], ...] = ()  # (protocol, hostIP, port)
    volumes: tuple[Volume, ...] = ()
    start_ts: float | None = None  # status.startTime: when the kubelet took the pod on
    cpu_limit_millicores: int | None = None  # None: no CPU limit (no CFS quota)
    memory_limit_bytes: int | None = None  # None: no memory limit
    has_priority: bool = True  # spec.priority is set (``priority`` is 0 when it is not)
    containers: tuple[str, ...] = ()  # names of the containers it runs (see below)
    container_requests: tuple[tuple[str, int, int], ...] = ()  # (name, millicores, bytes) (see below)
    spec_requests: Resources | None = None  # requests by the spec alone, when a resize changes them
    resource_claims: tuple[PodClaim, ...] = ()  # spec.resourceClaims (Dynamic Resource Allocation)

    @property
    def placement_requests(self) -> Resources:
        """The requests a destination must fit when the pod moves: :attr:`requests`, or, for a
        pod being resized in place, the larger of them and :attr:`spec_requests` per resource
        (its replacement may be created asking what the spec asks: a resize the node refused
        as ``Infeasible`` still asks it elsewhere)."""
        s = self.spec_requests
        return self.requests if s is None else self.requests.max(s)

    def container_request(self, name: str) -> tuple[int, int]:
        """Container ``name``'s own request ``(CPU millicores, memory bytes)`` from the spec;
        ``(0, 0)`` when it requests nothing or is not known."""
        for c, cpu, mem in self.container_requests:
            if c == name:
                return cpu, mem
        return 0, 0

    @property
    def started(self) -> float | None:
        """When the pod started on its node: ``status.startTime``, else its creation time;
        ``None`` when neither is known (records not read from an API server)."""
        return self.start_ts if self.start_ts is not None else self.creation_ts

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def is_mirror(self) -> bool:
        """A static pod's mirror (``kubernetes.io/config.mirror`` annotation)."""
        return ANNOTATION_MIRROR in self.annotations

    @property
    def is_daemonset(self) -> bool:
        """CA's ``pod_util.IsDaemonSetPod``: DaemonSet controller, or the ``daemonset-pod``
        annotation set to ``"true"``."""
        if self.controller is not None and self.controller.kind == "DaemonSet":
            return True
        return self.annotations.get(ANNOTATION_DAEMONSET_POD) == "true"

    def is_expendable(self, cutoff: int) -> bool:
        """CA's ``IsExpendablePod``: ``spec.priority`` is set and below ``cutoff``
        (``--expendable-pods-priority-cutoff``). A pod without ``spec.priority`` is never
        expendable (the Priority admission plugin sets it on every pod of a real cluster)."""
        return self.has_priority and self.priority < cutoff

    @property
    def is_terminal(self) -> bool:
        """Phase Succeeded or Failed: the pod holds no resources on its node."""
        return self.phase in ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class Node:
    """A node. ``allocatable`` carries the pod capacity in ``pods``. ``node_group`` is the GKE
    node pool (label ``cloud.google.com/gke-nodepool``) or ``""``."""

    name: str
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    ready_transition_ts: float = 0.0
    creation_ts: float = 0.0
    provider_id: str = ""
    uid: str = ""
    to_be_deleted_ts: float | None = None  # value of the ToBeDeleted taint, Unix seconds
    resource_version: str = ""  # set only by the actuator: the version its delete step verified
    node_group: str = field(init=False, repr=False, compare=False)
    """The GKE node pool name (label ``cloud.google.com/gke-nodepool``), or ``""`` when the node
    is not in one; read from ``labels`` when the node is made (every loop reads it per node)."""
    zone: str = field(init=False, repr=False, compare=False)
    """``topology.kubernetes.io/zone`` (or the beta label), or ``""``; read from ``labels`` when
    the node is made."""

    def __post_init__(self) -> None:
        labels = self.labels
        object.__setattr__(self, "node_group", labels.get(LABEL_NODEPOOL, ""))
        object.__setattr__(self, "zone", labels.get(LABEL_ZONE) or labels.get(LABEL_ZONE_BETA, ""))


@dataclass(frozen=True, slots=True)
class Namespace:
    """A namespace and its labels (what a pod affinity term's ``namespaceSelector`` matches)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


class NodeMetrics(msgspec.Struct, frozen=True, gc=False):
    """metrics.k8s.io NodeMetrics: usage at ``timestamp`` (Unix seconds) over ``window_seconds``.
    A frozen Struct, as :class:`Pod` (rebuilt every loop)."""

    name: str
    timestamp: float
    window_seconds: float
    cpu_millicores: int
    memory_bytes: int


class PodMetrics(msgspec.Struct, frozen=True, gc=False):
    """metrics.k8s.io PodMetrics summed over containers. A frozen Struct, as :class:`Pod`: a
    live loop decodes one per pod every ``--scan-interval``.

    ``containers`` names the containers the reading covers (``None``: not known, for readings
    not read from the API); a reading that lacks a container its pod runs is not the pod's
    usage (:func:`covers`)."""

    namespace: str
    name: str
    timestamp: float
    window_seconds: float
    cpu_millicores: int
    memory_bytes: int
    containers: tuple[str, ...] | None = None


def missing_containers(pod: Pod, metrics: PodMetrics) -> tuple[str, ...]:
    """The containers ``pod`` runs (:attr:`Pod.containers`) that ``metrics`` does not report,
    in the pod's order; ``()`` when the reading covers them all (or either side does not know
    its containers)."""
    have = metrics.containers
    want = pod.containers
    if have is None or want is have or not want:
        return ()
    if want == have:
        return ()
    return tuple(c for c in want if c not in have)


def covers(metrics: PodMetrics, pod: Pod) -> bool:
    """True when ``metrics`` reports every container ``pod`` runs (:func:`missing_containers`)."""
    return not missing_containers(pod, metrics)


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    """A policy/v1 PDB. ``selector`` ``None`` (null) selects nothing, as in policy/v1.
    ``disruptions_allowed`` is ``status.disruptionsAllowed``."""

    namespace: str
    name: str
    selector: LabelSelector | None
    disruptions_allowed: int

    def matches(self, pod: Pod) -> bool:
        """True when the PDB covers ``pod`` (same namespace, selector matches labels)."""
        return (
            self.selector is not None
            and pod.namespace == self.namespace
            and self.selector.matches(pod.labels)
        )


@dataclass(frozen=True, slots=True)
class Controller:
    """A workload controller: ReplicaSet, ReplicationController, StatefulSet, DaemonSet, Job or
    Deployment. ``replicas`` is ``spec.replicas`` (``None`` where the kind has none)."""

    kind: str
    namespace: str
    name: str
    uid: str = ""
    replicas: int | None = None
    owner: OwnerRef | None = None


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    """A PV with its zone constraint: the zone labels and any required node affinity."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    """A PVC and the PV it is bound to (``volume_name``, empty while unbound)."""

    namespace: str
    name: str
    volume_name: str = ""
