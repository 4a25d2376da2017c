"""The Kubernetes API objects as msgspec Structs: only the fields scaler reads.

JSON (a snapshot file, a LIST page, a WATCH event, a metrics LIST) is decoded straight into these
typed Structs in one pass by :mod:`msgspec`; fields not declared here (``managedFields``, env,
images, probes, most of ``status``) are skipped without being built. Each kind is a Struct tagged
by its ``kind`` field, so a ``v1 List`` mixing kinds decodes item by item into the right type
(:data:`scaler.model.wire_kinds.KIND_TYPES`). Field names follow the API's camelCase
(``rename="camel"``; the few acronyms, ``providerID``, ``hostIP``, are named explicitly).

Types are as strict as the API schema: a string where the schema has one, integers for
integers, ``bool`` for booleans; quantities are :data:`Quantity` (a string, or a number as a
YAML file may write it). :mod:`scaler.model.parse` turns these Structs into the engine's records.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from msgspec import Struct, field

__all__ = [
    "CONTROLLER_TYPES",
    "ContainerW",
    "ControllerW",
    "LabelSelectorW",
    "MetaW",
    "NameMetaW",
    "NamespaceW",
    "NodeMetricsW",
    "NodeSelectorTermW",
    "NodeW",
    "ObjectW",
    "OwnerReferenceW",
    "PersistentVolumeClaimW",
    "PersistentVolumeW",
    "PodAffinityTermW",
    "PodConditionW",
    "PodDisruptionBudgetW",
    "PodMetricsW",
    "PodW",
    "Quantity",
    "ResourceRequirementsW",
    "TopologySpreadConstraintW",
    "UsageW",
    "VolumeW",
]

Quantity = str | int | float
"""A resource quantity as JSON or YAML holds it: ``"250m"``, ``"1Gi"``, or a bare number."""

ResourceList = dict[str, Quantity]

SelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
NodeSelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]


class _W(Struct, frozen=True, rename="camel", gc=False):
    """Base of the Structs below: immutable, camelCase names, not tracked by the cycle collector
    (they hold no cycles: decoding a million of them then costs no collection passes)."""


class OwnerReferenceW(_W, frozen=True):
    """``metadata.ownerReferences[]``."""

    kind: str = ""
    name: str = ""
    uid: str = ""
    api_version: str = ""
    controller: bool | None = None


class MetaW(_W, frozen=True):
    """``metadata``: what scaler reads of ``ObjectMeta``."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReferenceW] | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None


_NO_META = MetaW()


class NameMetaW(_W, frozen=True):
    """``metadata`` of a metrics object: only its identity. metrics-server copies the pod's
    labels into every PodMetrics; nothing reads them, and skipping them halves the decoding of
    a PodMetrics list (150,000 pods: 0.11 s instead of 0.25 s)."""

    name: str = ""
    namespace: str = ""


_NO_NAME = NameMetaW()


class LabelSelectorRequirementW(_W, frozen=True):
    """``matchExpressions[]`` of a label selector."""

    key: str = ""
    operator: SelectorOperator = "In"
    values: list[str] | None = None


class LabelSelectorW(_W, frozen=True):
    """``metav1.LabelSelector``."""

    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirementW] | None = None


class NodeSelectorRequirementW(_W, frozen=True):
    """``matchExpressions[]``/``matchFields[]`` of a node selector term."""

    key: str = ""
    operator: NodeSelectorOperator = "In"
    values: list[str] | None = None


class NodeSelectorTermW(_W, frozen=True):
    """``nodeSelectorTerms[]``."""

    match_expressions: list[NodeSelectorRequirementW] | None = None
    match_fields: list[NodeSelectorRequirementW] | None = None


class NodeSelectorW(_W, frozen=True):
    """``v1.NodeSelector``."""

    node_selector_terms: list[NodeSelectorTermW] | None = None


class ResourceRequirementsW(_W, frozen=True):
    """``resources`` of a container or of the pod."""

    requests: ResourceList | None = None
    limits: ResourceList | None = None


class ContainerPortW(_W, frozen=True):
    """``ports[]`` of a container."""

    host_port: int | None = None
    protocol: str = ""
    host_ip: str = field(default="", name="hostIP")


class ContainerW(_W, frozen=True):
    """A container or init container."""

    name: str = ""
    resources: ResourceRequirementsW | None = None
    restart_policy: str | None = None
    ports: list[ContainerPortW] | None = None


class TolerationW(_W, frozen=True):
    """``spec.tolerations[]``."""

    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""


class PodAffinityTermW(_W, frozen=True):
    """A required pod (anti-)affinity term."""

    label_selector: LabelSelectorW | None = None
    topology_key: str = ""
    namespaces: list[str] | None = None
    namespace_selector: LabelSelectorW | None = None


class PodAffinityW(_W, frozen=True):
    """``podAffinity`` / ``podAntiAffinity`` (only the required terms)."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTermW] | None = None


class NodeAffinityW(_W, frozen=True):
    """``nodeAffinity`` (only the required selector)."""

    required_during_scheduling_ignored_during_execution: NodeSelectorW | None = None


class AffinityW(_W, frozen=True):
    """``spec.affinity``."""

    node_affinity: NodeAffinityW | None = None
    pod_affinity: PodAffinityW | None = None
    pod_anti_affinity: PodAffinityW | None = None


class TopologySpreadConstraintW(_W, frozen=True):
    """``spec.topologySpreadConstraints[]``."""

    max_skew: int = 1
    topology_key: str = ""
    when_unsatisfiable: str = "DoNotSchedule"
    label_selector: LabelSelectorW | None = None
    min_domains: int | None = None
    node_affinity_policy: str = ""
    node_taints_policy: str = ""
    match_label_keys: list[str] | None = None


class _Source(_W, frozen=True):
    """A volume source whose content scaler does not read (only that it is there)."""


class EmptyDirW(_W, frozen=True):
    """``emptyDir``."""

    medium: str = ""


class ClaimSourceW(_W, frozen=True):
    """``persistentVolumeClaim``."""

    claim_name: str = ""


class VolumeW(_W, frozen=True):
    """``spec.volumes[]``: its name and which source it has (:data:`VOLUME_SOURCES`)."""

    name: str = ""
    projected: _Source | None = None
    config_map: _Source | None = None
    secret: _Source | None = None
    empty_dir: EmptyDirW | None = None
    host_path: _Source | None = None
    persistent_volume_claim: ClaimSourceW | None = None
    downward_api: _Source | None = field(default=None, name="downwardAPI")
    ephemeral: _Source | None = None
    csi: _Source | None = None
    image: _Source | None = None
    nfs: _Source | None = None
    gce_persistent_disk: _Source | None = None
    aws_elastic_block_store: _Source | None = None
    azure_disk: _Source | None = None
    azure_file: _Source | None = None
    git_repo: _Source | None = None
    iscsi: _Source | None = None
    glusterfs: _Source | None = None
    rbd: _Source | None = None
    flex_volume: _Source | None = None
    cinder: _Source | None = None
    cephfs: _Source | None = None
    flocker: _Source | None = None
    fc: _Source | None = None
    vsphere_volume: _Source | None = None
    quobyte: _Source | None = None
    photon_persistent_disk: _Source | None = None
    portworx_volume: _Source | None = None
    scale_io: _Source | None = field(default=None, name="scaleIO")
    storageos: _Source | None = None


VOLUME_SOURCES: tuple[tuple[str, str], ...] = tuple(
    (f.name, f.encode_name) for f in msgspec.structs.fields(VolumeW) if f.name != "name"
)
"""(attribute, API name) of every volume source :class:`VolumeW` knows, the most common first: a
volume's kind is the first one it has (a valid volume has exactly one)."""


class PodResourceClaimW(_W, frozen=True):
    """``spec.resourceClaims[]`` of a Pod: a ResourceClaim by name, or one made for the pod from a
    ResourceClaimTemplate (its name is then in ``status.resourceClaimStatuses``)."""

    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodResourceClaimStatusW(_W, frozen=True):
    """``status.resourceClaimStatuses[]``: the claim made for a template entry (``null``: none
    was needed)."""

    name: str = ""
    resource_claim_name: str | None = None


class PodSpecW(_W, frozen=True):
    """``spec`` of a Pod."""

    node_name: str = ""
    containers: list[ContainerW] | None = None
    init_containers: list[ContainerW] | None = None
    resources: ResourceRequirementsW | None = None
    overhead: ResourceList | None = None
    priority: int | None = None
    termination_grace_period_seconds: int | None = None
    restart_policy: str = ""
    node_selector: dict[str, str] | None = None
    tolerations: list[TolerationW] | None = None
    affinity: AffinityW | None = None
    topology_spread_constraints: list[TopologySpreadConstraintW] | None = None
    volumes: list[VolumeW] | None = None
    resource_claims: list[PodResourceClaimW] | None = None


class ContainerStateRunningW(_W, frozen=True):
    """``state.running`` of a container status (only its presence is read)."""


class ContainerStateW(_W, frozen=True):
    """``state`` of a container status: which of running, waiting, terminated it is."""

    running: ContainerStateRunningW | None = None


class StatusResourcesW(_W, frozen=True):
    """``resources`` of a container status: only the requests the runtime applies are read."""

    requests: ResourceList | None = None


class ContainerStatusW(_W, frozen=True):
    """``status.containerStatuses[]`` / ``initContainerStatuses[]``: the name, whether the
    container runs, and what the kubelet has allocated to it and the runtime applies
    (``allocatedResources``, ``resources.requests``; in-place resize, KEP-1287)."""

    name: str = ""
    state: ContainerStateW | None = None
    resources: StatusResourcesW | None = None
    allocated_resources: ResourceList | None = None


class PodConditionW(_W, frozen=True):
    """``status.conditions[]`` of a Pod: only its type and reason are read (``PodResizePending``
    with reason ``Infeasible`` or ``Deferred``)."""

    type: str = ""
    reason: str = ""


class PodStatusW(_W, frozen=True):
    """``status`` of a Pod. ``resize`` is the resize state of clusters before 1.33
    (``Proposed``, ``InProgress``, ``Deferred``, ``Infeasible``), replaced by the
    ``PodResizePending`` and ``PodResizeInProgress`` conditions."""

    phase: str = ""
    qos_class: Literal["", "BestEffort", "Burstable", "Guaranteed"] = ""
    start_time: str | None = None
    container_statuses: list[ContainerStatusW] | None = None
    init_container_statuses: list[ContainerStatusW] | None = None
    conditions: list[PodConditionW] | None = None
    resize: str = ""
    resource_claim_statuses: list[PodResourceClaimStatusW] | None = None


_NO_POD_STATUS = PodStatusW()


class ObjectW(_W, frozen=True, tag_field="kind"):
    """An API object of a kind scaler reads; the subclasses are tagged by ``kind``."""

    metadata: MetaW = _NO_META


class PodW(ObjectW, frozen=True, tag="Pod"):
    """A v1 Pod. ``spec`` is required: a pod without one is not a pod."""

    spec: PodSpecW | None = None
    status: PodStatusW = _NO_POD_STATUS


class TaintW(_W, frozen=True):
    """``spec.taints[]`` of a Node."""

    key: str = ""
    value: str = ""
    effect: str = ""


class NodeSpecW(_W, frozen=True):
    """``spec`` of a Node."""

    taints: list[TaintW] | None = None
    unschedulable: bool | None = None
    provider_id: str = field(default="", name="providerID")


class NodeConditionW(_W, frozen=True):
    """``status.conditions[]`` of a Node."""

    type: str = ""
    status: str = ""
    last_transition_time: str | None = None


class NodeStatusW(_W, frozen=True):
    """``status`` of a Node."""

    allocatable: ResourceList | None = None
    conditions: list[NodeConditionW] | None = None


_NO_NODE_SPEC = NodeSpecW()
_NO_NODE_STATUS = NodeStatusW()


class NodeW(ObjectW, frozen=True, tag="Node"):
    """A v1 Node."""

    spec: NodeSpecW = _NO_NODE_SPEC
    status: NodeStatusW = _NO_NODE_STATUS


class UsageW(_W, frozen=True):
    """``usage`` of a NodeMetrics or of a PodMetrics' container: the two resources metrics-server
    reports. A Struct, not a :data:`ResourceList`: no dict is built per container (450,000 pods:
    0.1 s less to decode, and two attribute reads instead of two lookups)."""

    cpu: Quantity | None = None
    memory: Quantity | None = None

    def present(self) -> dict[str, Quantity]:
        """The resources given, as a ``ResourceList`` (for messages)."""
        return {k: v for k, v in (("cpu", self.cpu), ("memory", self.memory)) if v is not None}


class ContainerMetricsW(_W, frozen=True):
    """``containers[]`` of a PodMetrics."""

    name: str = ""
    usage: UsageW | None = None


class NodeMetricsW(ObjectW, frozen=True, tag="NodeMetrics"):
    """A metrics.k8s.io/v1beta1 NodeMetrics."""

    metadata: NameMetaW = _NO_NAME  # type: ignore[assignment]  # only the identity is read

    timestamp: str | None = None
    window: str | None = None
    usage: UsageW | None = None


class PodMetricsW(ObjectW, frozen=True, tag="PodMetrics"):
    """A metrics.k8s.io/v1beta1 PodMetrics."""

    metadata: NameMetaW = _NO_NAME  # type: ignore[assignment]  # only the identity is read

    timestamp: str | None = None
    window: str | None = None
    containers: list[ContainerMetricsW] | None = None


class PDBSpecW(_W, frozen=True):
    """``spec`` of a PodDisruptionBudget."""

    selector: LabelSelectorW | None = None


class PDBStatusW(_W, frozen=True):
    """``status`` of a PodDisruptionBudget."""

    disruptions_allowed: int = 0


class PodDisruptionBudgetW(ObjectW, frozen=True, tag="PodDisruptionBudget"):
    """A policy/v1 PodDisruptionBudget."""

    spec: PDBSpecW = PDBSpecW()
    status: PDBStatusW = PDBStatusW()


class ControllerSpecW(_W, frozen=True):
    """``spec`` of a workload controller."""

    replicas: int | None = None


class ControllerW(ObjectW, frozen=True):
    """A workload controller; one tagged subclass per kind (:data:`CONTROLLER_TYPES`)."""

    spec: ControllerSpecW = ControllerSpecW()


class ReplicaSetW(ControllerW, frozen=True, tag="ReplicaSet"):
    """apps/v1 ReplicaSet."""


class ReplicationControllerW(ControllerW, frozen=True, tag="ReplicationController"):
    """v1 ReplicationController."""


class StatefulSetW(ControllerW, frozen=True, tag="StatefulSet"):
    """apps/v1 StatefulSet."""


class DaemonSetW(ControllerW, frozen=True, tag="DaemonSet"):
    """apps/v1 DaemonSet."""


class JobW(ControllerW, frozen=True, tag="Job"):
    """batch/v1 Job."""


class DeploymentW(ControllerW, frozen=True, tag="Deployment"):
    """apps/v1 Deployment."""


class CronJobW(ControllerW, frozen=True, tag="CronJob"):
    """batch/v1 CronJob."""


class PVSpecW(_W, frozen=True):
    """``spec`` of a PersistentVolume."""

    node_affinity: VolumeNodeAffinityW | None = None


class VolumeNodeAffinityW(_W, frozen=True):
    """``spec.nodeAffinity`` of a PersistentVolume."""

    required: NodeSelectorW | None = None


class PersistentVolumeW(ObjectW, frozen=True, tag="PersistentVolume"):
    """A v1 PersistentVolume."""

    spec: PVSpecW = PVSpecW()


class PVCSpecW(_W, frozen=True):
    """``spec`` of a PersistentVolumeClaim."""

    volume_name: str = ""


class PersistentVolumeClaimW(ObjectW, frozen=True, tag="PersistentVolumeClaim"):
    """A v1 PersistentVolumeClaim."""

    spec: PVCSpecW = PVCSpecW()


class NamespaceW(ObjectW, frozen=True, tag="Namespace"):
    """A v1 Namespace (its labels, for pod affinity's ``namespaceSelector``)."""


CONTROLLER_TYPES: tuple[type[ControllerW], ...] = (
    ReplicaSetW,
    ReplicationControllerW,
    StatefulSetW,
    DaemonSetW,
    JobW,
    DeploymentW,
    CronJobW,
)
