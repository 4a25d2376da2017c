"""The dry-run report's JSON schema (version ``scaler.io/v1alpha1``, kind ``DryRunReport``).

The report is self-contained: besides each node's verdict it carries the facts a reader needs to
check every proposed move without the cluster (allocatable, requests and usage of each node, its
labels and taints, and each moved pod's requests, tolerations and nodeSelector). Units are in the
field names: millicores, bytes, fractions 0–1. ``scaler/report/schema.json`` is generated from
these models (``scaler schema``) and a test keeps it in sync.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "API_VERSION",
    "BlockingPodModel",
    "ComparisonModel",
    "CostModel",
    "DryRunReport",
    "GpuModel",
    "HotNodeModel",
    "MoveModel",
    "NodeReport",
    "ReliefEvictionModel",
    "ReliefKeptModel",
    "ReliefModel",
    "RemovalOutcomeModel",
    "RequestsBoundModel",
    "ResourceFigures",
    "SavingsModel",
    "SummaryModel",
    "TaintModel",
    "TolerationModel",
    "UtilizationModel",
    "WorkloadRequestsModel",
]

API_VERSION = "scaler.io/v1alpha1"


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)


class UtilizationModel(_Model):
    """Utilization fractions 0–1 (``null`` when unknown: no fresh metrics on a non-empty node, or
    no allocatable of the resource to divide by)."""

    cpu: float | None
    memory: float | None
    value: float | None = Field(description="max(cpu, memory)")
    resource: str = Field(description="cpu or memory: the dominant resource")
    source: str = Field(
        description="usage (metrics.k8s.io), requests (cluster-autoscaler), or requests (NotReady): a NotReady "
        "node without usage judged by its requests"
    )


class RequestUtilizationModel(_Model):
    """cluster-autoscaler's requests-based utilization, fractions 0–1 (``null`` for a resource
    the node has no allocatable of: a fraction of zero is unknown, never 0)."""

    cpu: float | None
    memory: float | None
    value: float | None


class ResourceFigures(_Model):
    """Absolute figures: CPU in millicores, memory in bytes, pods as a count."""

    cpu_millicores: int | None = Field(alias="cpuMillicores")
    memory_bytes: int | None = Field(alias="memoryBytes")
    pods: int | None = None


class TaintModel(_Model):
    """A node taint."""

    key: str
    value: str = ""
    effect: str


class TolerationModel(_Model):
    """A pod toleration."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


class BlockingPodModel(_Model):
    """The pod that blocks the node's drain and CA's ``BlockingPodReason``."""

    namespace: str
    name: str
    reason: str
    detail: str = ""


class MoveModel(_Model):
    """One pod re-placed on ``destination``, with what is needed to re-check the placement."""

    pod: str = Field(description="namespace/name")
    destination: str
    priority: int = 0
    requests: ResourceFigures
    tolerations: list[TolerationModel] = Field(default_factory=list)
    node_selector: dict[str, str] = Field(default_factory=dict, alias="nodeSelector")


class PodCounts(_Model):
    """Pods counted on the node (terminal and expendable pods excluded)."""

    total: int
    daemon_set: int = Field(alias="daemonSet")
    mirror: int
    to_move: int = Field(alias="toMove")


class CostModel(_Model):
    """What the node costs, from the price table (``--prices``; bundled: us-central1 on-demand).
    Prices are ``null`` when the table has none for the node's machine type, region and kind:
    unknown, never 0."""

    machine_type: str = Field(alias="machineType", description="node.kubernetes.io/instance-type")
    region: str
    pricing: str = Field(description="on-demand or spot (cloud.google.com/gke-spot or gke-preemptible)")
    hourly_usd: float | None = Field(alias="hourlyUsd")
    monthly_usd: float | None = Field(alias="monthlyUsd", description="hourly x 730 hours")


class SavingsModel(_Model):
    """Monthly cost of the removable nodes (what removing them saves), with the price table's
    source and date."""

    monthly_usd: float | None = Field(
        alias="monthlyUsd",
        description="sum over the removable nodes with a known price; null when some are removable and "
        "none has one",
    )
    priced_nodes: int = Field(alias="pricedNodes")
    unpriced_nodes: int = Field(alias="unpricedNodes", description="removable nodes of unknown price")
    price_source: str = Field(alias="priceSource")
    price_date: str = Field(alias="priceDate")


class GpuModel(_Model):
    """A GPU node's GPUs, as cluster-autoscaler judges them plus their real usage."""

    allocatable: int = Field(description="allocatable nvidia.com/gpu (0 while the GPUs are not ready)")
    requested: int = Field(description="nvidia.com/gpu requested by the node's counted pods")
    request_utilization: float = Field(
        alias="requestUtilization",
        description="requested / allocatable GPUs as cluster-autoscaler computes it, fraction 0-1",
    )
    usage: float | None = Field(
        description="real GPU usage from DCGM_FI_DEV_GPU_UTIL (--history prometheus), fraction 0-1 of the "
        "allocatable GPUs; null when unknown"
    )
    judged_by: str = Field(
        alias="judgedBy",
        description="requests (no real GPU usage known) or requests and usage: what was compared with "
        "--scale-down-gpu-utilization-threshold",
    )


class DraPoolModel(_Model):
    """One pool of a node's own DRA devices."""

    driver: str
    pool: str
    utilization: float = Field(
        description="allocated / total devices of the pool's newest generation, fraction 0-1"
    )


class DraModel(_Model):
    """A node's devices from Dynamic Resource Allocation drivers, as cluster-autoscaler judges
    them (its highest pool), plus the real GPU usage where known."""

    utilization: float = Field(
        description="the highest pool's utilization (cluster-autoscaler's HighestDynamicResourceUtilization), "
        "fraction 0-1"
    )
    resource: str = Field(description="that pool, driver/pool")
    pools: list[DraPoolModel]
    usage: float | None = Field(
        description="real GPU usage from DCGM_FI_DEV_GPU_UTIL (--history prometheus), fraction 0-1; null when unknown"
    )
    judged_by: str = Field(
        alias="judgedBy",
        description="allocations, or allocations and usage: what was compared with "
        "--scale-down-gpu-utilization-threshold",
    )
    error: str = Field(
        description="why the utilization cannot be computed (an incomplete pool, a claim not allocated)"
    )


class NodeReport(_Model):
    """The verdict on one node and the facts behind it."""

    name: str
    node_group: str = Field(alias="nodeGroup")
    zone: str
    status: str = Field(description="removable-empty, removable-drain or unremovable")
    removable: bool
    empty: bool = Field(description="only DaemonSet or mirror pods")
    reason: str = Field(description="UnremovableReason; NoReason when removable")
    detail: str
    rank: int | None = Field(None, description="0-based position in the removal order")
    utilization: UtilizationModel
    request_utilization: RequestUtilizationModel = Field(alias="requestUtilization")
    metrics: str = Field(description="ok, missing or stale")
    allocatable: ResourceFigures
    requested: ResourceFigures = Field(description="Σ requests of counted pods before any move")
    usage: ResourceFigures = Field(
        description="usage the node is judged by: NodeMetrics plus the pods started after their window "
        "(null when unknown: metrics missing or stale)"
    )
    labels: dict[str, str]
    taints: list[TaintModel]
    unschedulable: bool
    pods: PodCounts
    blocking_pod: BlockingPodModel | None = Field(None, alias="blockingPod")
    moves: list[MoveModel] = Field(default_factory=list)
    cost: CostModel
    gpu: GpuModel | None = Field(None, description="set on GPU nodes only")
    dra: DraModel | None = Field(
        None, exclude_if=lambda v: v is None, description="set on nodes with devices of DRA drivers only"
    )


class SummaryModel(_Model):
    """Totals over all nodes. Freed figures are the removable nodes' allocatable."""

    nodes: int
    removable: int
    removable_empty: int = Field(alias="removableEmpty")
    removable_drain: int = Field(alias="removableDrain")
    unremovable: int
    pods_to_move: int = Field(alias="podsToMove")
    freed_cpu_millicores: int = Field(alias="freedCpuMillicores")
    freed_memory_bytes: int = Field(alias="freedMemoryBytes")
    unremovable_by_reason: dict[str, int] = Field(alias="unremovableByReason")
    savings: SavingsModel


class RemovalOutcomeModel(_Model):
    """What one scale-down rule removes from the same snapshot. Freed figures are the removable
    nodes' allocatable."""

    rule: str = Field(description="cluster-autoscaler or scaler")
    settings: list[str] = Field(description="flags that turn this report's evaluation into this rule")
    removable: int
    removable_empty: int = Field(alias="removableEmpty")
    removable_drain: int = Field(alias="removableDrain")
    pods_to_move: int = Field(alias="podsToMove")
    freed_cpu_millicores: int = Field(alias="freedCpuMillicores")
    freed_memory_bytes: int = Field(alias="freedMemoryBytes")
    nodes: list[str] = Field(description="removable nodes in removal order")


class ComparisonModel(_Model):
    """cluster-autoscaler's requests rule beside scaler, both evaluated on this snapshot."""

    cluster_autoscaler: RemovalOutcomeModel = Field(alias="clusterAutoscaler")
    scaler: RemovalOutcomeModel
    additional_nodes: int = Field(alias="additionalNodes", description="scaler's removable minus CA's")


class WorkloadRequestsModel(_Model):
    """One workload's requests against its real usage (sums over its pods), and the per-pod
    p95 usage its requests are set to in the re-evaluation."""

    namespace: str
    kind: str = Field(description="Deployment, StatefulSet, DaemonSet, Job, …; Pod for a bare pod")
    name: str
    pods: int
    requested: ResourceFigures
    used: ResourceFigures = Field(description="PodMetrics usage summed over the pods")
    p95_per_pod: ResourceFigures = Field(
        alias="p95PerPod", description="95th percentile (nearest rank) of the pods' usage"
    )


class RequestsBoundModel(_Model):
    """What keeps nodes that real usage would let go (a cluster bound by requests)."""

    threshold: float = Field(description="--scale-down-utilization-threshold, fraction 0-1")
    underused_nodes: int = Field(
        alias="underusedNodes", description="unremovable nodes whose real usage is at or below the threshold"
    )
    underused_by_reason: dict[str, int] = Field(alias="underusedByReason")
    kept_by_requests: int = Field(
        alias="keptByRequests",
        description="underused nodes that become removable when every workload requests its p95 usage",
    )
    workloads: list[WorkloadRequestsModel] = Field(
        description="workloads whose requests exceed their usage the most (share of cluster allocatable)"
    )
    removable_if_rightsized: int = Field(
        alias="removableIfRightsized",
        description="removable nodes when every workload requests its p95 usage",
    )
    nodes_if_rightsized: list[str] = Field(
        alias="nodesIfRightsized", description="nodes removable only when requests match p95 usage"
    )


class ReliefEvictionModel(_Model):
    """A pod hot-node relief would evict, where the simulation put it, and the usage it takes off
    the node (its PodMetrics)."""

    pod: str = Field(description="namespace/name")
    destination: str
    cpu_millicores: int | None = Field(alias="cpuMillicores")
    memory_bytes: int | None = Field(alias="memoryBytes")


class ReliefKeptModel(_Model):
    """A pod relief tried and left on its node, and why."""

    pod: str = Field(description="namespace/name")
    reason: str


class HotNodeModel(_Model):
    """A node above a hot-node waterline and its relief."""

    name: str
    utilization: UtilizationModel = Field(description="usage / allocatable, fractions 0-1")
    usage: ResourceFigures = Field(description="the usage it is judged by, as scale-down candidates are")
    waterline: ResourceFigures = Field(description="the thresholds times allocatable")
    evictions: list[ReliefEvictionModel] = Field(description="pods to evict, in eviction order")
    kept: list[ReliefKeptModel] = Field(description="pods tried that stay, in the order tried")
    remaining_gap: ResourceFigures = Field(
        alias="remainingGap", description="usage above the waterlines once the pods are gone (<= 0: none)"
    )
    gap_closed: bool = Field(alias="gapClosed")
    capped: bool = Field(description="--max-relief-evictions-per-loop stopped the choice")
    held: str = Field(description="why nothing of this node is relieved; empty when it is")
    detail: str


class ReliefModel(_Model):
    """Hot-node relief (``--hot-node-relief``) on this snapshot, as if every hot node had been hot
    for ``--hot-node-time``."""

    cpu_threshold: float = Field(alias="cpuThreshold", description="--hot-node-cpu-threshold, fraction 0-1")
    memory_threshold: float = Field(
        alias="memoryThreshold", description="--hot-node-memory-threshold, fraction 0-1"
    )
    max_evictions_per_loop: int = Field(alias="maxEvictionsPerLoop")
    evictions: int = Field(description="pods to evict, over all nodes")
    hot_nodes: list[HotNodeModel] = Field(alias="hotNodes", description="hottest first")


class DryRunReport(_Model):
    """Top-level document printed by ``scaler dry-run --output json``."""

    api_version: str = Field(API_VERSION, alias="apiVersion")
    kind: str = "DryRunReport"
    generated_at: str = Field(alias="generatedAt", description="evaluation time (RFC 3339)")
    source: str = Field(description="where the cluster state came from")
    nodes: list[NodeReport]
    summary: SummaryModel
    comparison: ComparisonModel | None = Field(
        None, description="cluster-autoscaler's requests rule beside scaler on the same snapshot"
    )
    requests_bound: RequestsBoundModel | None = Field(
        None, alias="requestsBound", description="what keeps nodes that real usage would let go"
    )
    relief: ReliefModel | None = Field(
        None, description="hot-node relief (with --hot-node-relief): hot nodes and the pods that relieve them"
    )
    flags: dict[str, Any] = Field(
        description="effective configuration, flag names as keys; node-pools: the effective per-pool "
        "values of every node pool"
    )
