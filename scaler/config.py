"""Configuration: every threshold the engine uses, with cluster-autoscaler's names and defaults.

One pydantic model, :class:`ScalerConfig`, is filled from (lowest to highest precedence) its
defaults, a YAML file (``--config``; keys are the flag names without ``--``, e.g.
``scale-down-utilization-threshold``), and command-line flags. Durations are seconds (floats);
the YAML file and flags also accept Go-style strings (``10m``, ``30s``). Fractions are 0–1.
``config/default.yaml`` documents every key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from scaler.model.times import format_duration, parse_duration_seconds
from scaler.specs import (
    ConfigError,
    DisruptionReasonName,
    NodeGroupSpec,
    ScaleDownBudget,
    parse_budget_spec,
    parse_node_group_spec,
    prometheus_url_problem,
)

__all__ = [
    "DRY_RUN_GROUPS",
    "DRY_RUN_KEYS",
    "DURATION_KEYS",
    "FLAG_GROUPS",
    "FLAG_HELP",
    "POOL_KEYS",
    "ConfigError",
    "DisruptionReasonName",
    "NodeGroupSpec",
    "NodePoolSettings",
    "PoolConfig",
    "ScaleDownBudget",
    "ScalerConfig",
    "flag_name",
    "load_config_file",
    "parse_budget_spec",
    "parse_node_group_spec",
]


# Help text of every key, grouped as `--help` and the generated docs/reference/flags.md present them.
FLAG_GROUPS: dict[str, dict[str, str]] = {
    "Utilization and eligibility": {
        "scale_down_utilization_threshold": "A node is underutilized when its utilization (max of cpu and memory, "
        "fraction 0-1) is <= this value.",
        "scale_down_gpu_utilization_threshold": "A GPU node (nvidia.com/gpu allocatable, or the "
        "cloud.google.com/gke-accelerator label) is judged by its GPUs alone, as cluster-autoscaler judges it: "
        "underutilized when requested GPUs / allocatable GPUs (fraction 0-1), and with --history prometheus also "
        "its real GPU usage (DCGM_FI_DEV_GPU_UTIL), are <= this value; cpu and memory are ignored.",
        "utilization_source": "usage: real usage from metrics.k8s.io (default); requests: cluster-autoscaler's "
        "requests-based utilization, for comparison.",
        "ignore_daemonsets_utilization": "Remove DaemonSet pods (their usage, or their requests with "
        "--utilization-source=requests) from numerator and denominator.",
        "ignore_mirror_pods_utilization": "The same for mirror (static) pods.",
        "max_metrics_age": "NodeMetrics older than this (seconds or Go duration) count as missing: "
        "the node is MetricsUnavailable, never idle.",
        "scale_down_unready_enabled": "Consider NotReady nodes for scale-down.",
        "scale_down_unneeded_time": "How long a Ready node must stay unneeded before it is deleted (live mode).",
        "scale_down_unready_time": "How long a NotReady node must stay unneeded before it is deleted (live mode).",
        "unremovable_node_recheck_timeout": "A node found unremovable, or whose removal failed, is not re-checked "
        "for this long (live mode).",
        "nodes": "MIN:MAX:NAME size limits (repeatable). NAME is a node pool, whose limits then hold in each of "
        "its zones, as GKE's own --min-nodes/--max-nodes do (one MIG per zone), or one of its MIGs "
        "(gke-CLUSTER-POOL-HASH-grp or its URL), then limited on its own; a MIG's entry wins over its pool's. "
        "Without it the min is 0.",
    },
    "Drain rules": {
        "skip_nodes_with_local_storage": "Block nodes with pods using emptyDir (not Memory) or hostPath volumes.",
        "skip_nodes_with_system_pods": "Block nodes with kube-system pods not covered by a PDB.",
        "skip_nodes_with_custom_controller_pods": "Only RC/RS/Job/StatefulSet-owned pods count as replicated; "
        "check their controllers exist.",
        "min_replica_count": "Block pods whose ReplicaSet/ReplicationController has fewer replicas than this.",
        "blocking_system_pod_disruption_timeout": "A kube-system pod without a PDB stops blocking once older "
        "than this (CA 1.33+).",
        "expendable_pods_priority_cutoff": "Pods whose spec.priority is set and below this are ignored: they "
        "neither block nor move. A pod without spec.priority never is.",
    },
    "Simulation": {
        "target_cpu_usage": "TargetUsage: a destination's cpu (its usage + the load of every pod moved there + this "
        "pod's load, a pod's load being max(request, real usage)) must stay <= this fraction of allocatable.",
        "target_memory_usage": "TargetUsage: a destination's memory (its usage + the load of every pod moved there + "
        "this pod's load, a pod's load being max(request, real usage)) must stay < this fraction of allocatable.",
        "filter_plugins": "Extra Filter plugins (comma-separated entry-point names).",
        "score_plugins": "Score plugins (comma-separated entry-point names); default none: first fit.",
    },
    "History and portraits": {
        "history": "Where 24-hour workload profiles (resource portraits) come from: none (default; "
        "instantaneous usage only, the portrait plugins then check requests only and score every node alike) "
        "or prometheus (range queries to --prometheus-url).",
        "prometheus_url": "Base URL of the Prometheus query API (the part before /api/v1), e.g. "
        "http://prometheus.monitoring:9090 or, for Google Managed Prometheus, "
        "https://monitoring.googleapis.com/v1/projects/PROJECT/location/global/prometheus. No credentials in "
        "it (user:password@, a query string): they are refused; use prometheus-auth-file.",
        "prometheus_auth_file": "File holding a bearer token, or one 'Header-Name: value' line, sent with every "
        "Prometheus query; read at each refresh (rotated tokens work). Empty: no auth header.",
        "prometheus_selector": 'Extra label matchers added to both Prometheus queries, e.g. cluster="prod" '
        "when one (managed) Prometheus holds several clusters.",
        "prometheus_metrics": "Which usage history --prometheus-url holds: cadvisor (the kubelet's "
        "container_cpu_usage_seconds_total and container_memory_working_set_bytes, scraped by your Prometheus), "
        "gke-system (GKE system metrics in Cloud Monitoring: kubernetes_io:container_cpu_core_usage_time, "
        "kubernetes_io:container_memory_used_bytes non-evictable, kubernetes_io:container_accelerator_duty_cycle), "
        "or auto (asks the endpoint which one has series for the selector; cadvisor when both have).",
        "prometheus_auth": "How Prometheus queries authenticate: auto (prometheus-auth-file when set, else Google "
        "Application Default Credentials for https://monitoring.googleapis.com, else none), google (Application "
        "Default Credentials whatever the URL) or none.",
        "prometheus_timeout": "Deadline of each Prometheus call, whole (connect, wait and read the answer): "
        "a slower answer is a failed refresh (seconds or Go duration).",
        "history_days": "Profiles cover the last this many days of usage.",
        "oversell_rate": "PodFitsResourceOnPortrait's hard limit: a destination's cpu requests must stay <= "
        "allocatable x this (memory requests <= allocatable, never oversold). At most 1: evicted pods are "
        "re-placed by kube-scheduler, by requests.",
        "portrait_target_cpu_usage": "PodFitsResourceOnPortrait's soft limit: a destination's hourly cpu portrait "
        "peak must stay <= this fraction of allocatable in every hour of the day.",
        "portrait_target_memory_usage": "PodFitsResourceOnPortrait's soft limit: a destination's hourly memory "
        "portrait peak must stay <= this fraction of allocatable in every hour of the day.",
        "portrait_peak": "PodFitsResourceOnPortrait: how a destination's hourly peak is estimated: sum (the sum of "
        "its pods' hourly peaks, as if they all coincided; default) or gaussian (the --portrait-quantile of the "
        "node's hourly load, pods' means and variances added; never above the sum).",
        "portrait_quantile": "With --portrait-peak=gaussian: the quantile of the node's hourly load held to the "
        "portrait targets (0.99: mean + 2.33 standard deviations).",
        "portrait_cpu_weight": "ResourceBalanceOnPortrait: weight of the normalised cpu score.",
        "portrait_memory_weight": "ResourceBalanceOnPortrait: weight of the normalised memory score.",
    },
    "Disruption budgets and node pools": {
        "budgets": "Scheduled disruption budgets (Karpenter's NodePool budgets, plus a time zone and a pool scope): "
        "how many nodes of each node pool may be disrupted at once (a count, or a percentage of the pool's nodes "
        "rounded up), always or in cron windows, for some reasons and pools; NotReady nodes and nodes being "
        "removed count as disrupted. The most restrictive active budget wins; nodes: 0 blocks. Flag (repeatable): "
        "--scale-down-budget 'NODES[;schedule=CRON;duration=D][;timeZone=ZONE][;reasons=R,...][;nodePools=P,...]"
        "[;name=NAME]'. Default: none (only the parallelism flags limit).",
        "node_pools": "Per node pool overrides of scale-down-utilization-threshold, scale-down-unneeded-time, "
        "scale-down-unready-time, target-cpu-usage, target-memory-usage and usage-aggregation, and the pool's "
        "min-size and max-size (as --nodes: in each zone; a --nodes entry for the same pool wins). Config file only.",
    },
    "Hot-node relief": {
        "hot_node_relief": "Relieve hot nodes (off by default): a node whose usage, aggregated as scale-down "
        "candidates are, stays above --hot-node-cpu-threshold or --hot-node-memory-threshold (for --hot-node-time) "
        "gets the soft taint scaler.io/hot=<unix ts>:PreferNoSchedule and loses, through the Eviction API, the "
        "fewest pods whose real usage brings it back under the waterline (crane's precise eviction), each only "
        "if the simulation finds it a destination passing the scheduler filters and TargetUsage. Needs "
        "TargetUsage in --filter-plugins.",
        "hot_node_cpu_threshold": "Hot-node relief's cpu waterline: a node is hot while its cpu usage is above "
        "this fraction of allocatable (koordinator LowNodeLoad's highThresholds).",
        "hot_node_memory_threshold": "Hot-node relief's memory waterline: a node is hot while its memory usage "
        "is above this fraction of allocatable.",
        "hot_node_time": "How long a node must stay above a waterline before it is relieved, and stay under "
        "both before its scaler.io/hot taint is removed (live mode).",
        "max_relief_evictions_per_loop": "Maximum pods evicted by hot-node relief per loop, over all nodes.",
    },
    "Savings": {
        "prices": "YAML price table merged over the bundled one (machine type, region, on-demand or Spot; USD per "
        "hour) for the monthly cost of removable nodes. Empty: the bundled table.",
    },
    "Actuation budgets": {
        "max_scale_down_parallelism": "Maximum nodes deleted at once.",
        "max_drain_parallelism": "Maximum non-empty nodes drained at once.",
    },
    "Timers and cooldowns (scaler run)": {
        "scan_interval": "How often the controller loop runs (seconds or Go duration).",
        "usage_aggregation": "How node usage is aggregated over --scale-down-unneeded-time before judging a "
        "node: max (any spike counts), p95 (isolated spikes ignored; default), ewma (smoothed).",
        "scale_down_delay_after_add": "No deletion for this long after a node was added (a scale-up).",
        "scale_down_delay_after_delete": "No deletion for this long after a loop that started deletions.",
        "scale_down_delay_after_failure": "No deletion for this long after a failed scale-down (any step).",
    },
    "Actuation (scaler run)": {
        "max_graceful_termination_sec": "Cap on a pod's terminationGracePeriodSeconds during drain (seconds).",
        "max_pod_eviction_time": "How long one pod's eviction is retried (every 10s on 429/5xx).",
        "node_delete_delay_after_taint": "Wait between tainting a node and draining or deleting it.",
        "daemonset_eviction_for_empty_nodes": "Evict DaemonSet pods (best effort) before deleting an empty node.",
        "daemonset_eviction_for_occupied_nodes": "Evict DaemonSet pods (best effort) when draining a node.",
        "cloud_provider": "gke: delete through the MIG (deleteInstances); kubernetes: delete the Node object.",
        "gke_project": "GCP project of the cluster (default: from the GKE metadata server).",
        "gke_location": "Cluster location, region or zone (default: from the metadata server).",
        "gke_cluster": "Cluster name (default: from the metadata server).",
    },
    "Operations (scaler run)": {
        "leader_elect": "Run leader election on a coordination.k8s.io Lease; only the leader acts.",
        "leader_elect_lease_duration": "How long a follower waits after the last renewal it saw before it takes "
        "the Lease over: the longest a stopped leader can hold it (must be longer than the renew deadline).",
        "leader_elect_renew_deadline": "The leader stops (exits 1) when it could not renew the Lease for this long; "
        "a write goes out only within this time of the last renewal (must be longer than the retry period).",
        "leader_elect_retry_period": "How often the leader renews the Lease and a follower tries to take it.",
        "namespace": "Namespace of the Lease and the status ConfigMap.",
        "instance_name": "Name of this scaler installation; its taints and annotations carry it.",
        "status_config_map_name": "Name of the status ConfigMap written every loop.",
        "address": "host:port of the /metrics and /healthz server.",
        "max_inactivity": "/healthz fails when no loop finished for this long.",
        "log_format": "text or json.",
        "write_node_status": "Write each node's verdict on the node: annotation scaler.io/scale-down-status (status, "
        "reason, detail, since) and a label of the same name (the reason, or removable-empty/-drain), only when "
        "it changes. auto: true, but false with --dry-run (a dry-run writes nothing to the nodes unless this is "
        "set to true).",
    },
}
# Groups whose keys affect `scaler dry-run` (the rest only affect `scaler run`).
DRY_RUN_GROUPS = (
    "Utilization and eligibility",
    "Drain rules",
    "Simulation",
    "History and portraits",
    "Disruption budgets and node pools",
    "Hot-node relief",
    "Savings",
)
_LIVE_ONLY_KEYS = frozenset(
    {
        "scale_down_unneeded_time",
        "scale_down_unready_time",
        "unremovable_node_recheck_timeout",
        "hot_node_time",
    }
)
DRY_RUN_KEYS: frozenset[str] = frozenset(
    k for title in DRY_RUN_GROUPS for k in FLAG_GROUPS[title] if k not in _LIVE_ONLY_KEYS
)
"""Keys one evaluation reads (``scaler dry-run`` has a flag for each): the timers of the live loop
and the actuation budgets are not among them."""
FLAG_HELP: dict[str, str] = {k: v for group in FLAG_GROUPS.values() for k, v in group.items()}


def flag_name(key: str) -> str | None:
    """The command-line flag of configuration key ``key`` (``--`` + the key with ``-``), or
    ``None`` for ``node_pools`` (a map: config file only). ``budgets`` is the repeatable
    ``--scale-down-budget``."""
    if key == "node_pools":
        return None
    if key == "budgets":
        return "--scale-down-budget"
    return "--" + key.replace("_", "-")


class NodePoolSettings(BaseModel):
    """Overrides for one GKE node pool (``node-pools: {POOL: {...}}``); ``None``: the global value.

    Keys are the flag names (``scale-down-utilization-threshold``, ``target-cpu-usage``, ...),
    plus ``min-size`` / ``max-size`` (nodes). Cluster-autoscaler has the same idea in its
    per-node-group options (``config.NodeGroupAutoscalingOptions``: utilization threshold,
    unneeded and unready times), set through cloud-specific tags; on GKE they are not settable.
    The bounds are the global keys' (a test keeps them equal).
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", populate_by_name=True, alias_generator=lambda s: s.replace("_", "-")
    )

    scale_down_utilization_threshold: float | None = Field(None, ge=0.0, le=1.0)
    scale_down_unneeded_time: float | None = Field(None, ge=0)
    scale_down_unready_time: float | None = Field(None, ge=0)
    target_cpu_usage: float | None = Field(None, gt=0.0, le=1.0)
    target_memory_usage: float | None = Field(None, gt=0.0, le=1.0)
    usage_aggregation: Literal["max", "p95", "ewma"] | None = None
    min_size: int | None = Field(None, ge=0)
    max_size: int | None = Field(None, ge=0)

    @field_validator("scale_down_unneeded_time", "scale_down_unready_time", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        if isinstance(v, str):
            return parse_duration_seconds(v)
        return v

    @model_validator(mode="after")
    def _sizes(self) -> NodePoolSettings:
        if self.min_size is not None and self.max_size is not None and self.min_size > self.max_size:
            raise ValueError(f"min-size {self.min_size} is greater than max-size {self.max_size}")
        return self


POOL_KEYS = (
    "scale_down_utilization_threshold",
    "scale_down_unneeded_time",
    "scale_down_unready_time",
    "target_cpu_usage",
    "target_memory_usage",
    "usage_aggregation",
)
"""The :class:`ScalerConfig` keys a ``node-pools`` entry may override (with ``min-size`` and
``max-size``, which feed the node group limits)."""


@dataclass(frozen=True, slots=True)
class PoolConfig:
    """The effective values of :data:`POOL_KEYS` for one node pool (:meth:`ScalerConfig.for_pool`).

    Units as in :class:`ScalerConfig`: fractions 0-1, seconds.
    """

    scale_down_utilization_threshold: float
    scale_down_unneeded_time: float
    scale_down_unready_time: float
    target_cpu_usage: float
    target_memory_usage: float
    usage_aggregation: str


Duration = float
DURATION_KEYS = (
    "max_metrics_age",
    "scale_down_unneeded_time",
    "scale_down_unready_time",
    "unremovable_node_recheck_timeout",
    "blocking_system_pod_disruption_timeout",
    "scan_interval",
    "scale_down_delay_after_add",
    "scale_down_delay_after_delete",
    "scale_down_delay_after_failure",
    "max_pod_eviction_time",
    "node_delete_delay_after_taint",
    "max_inactivity",
    "hot_node_time",
    "leader_elect_lease_duration",
    "leader_elect_renew_deadline",
    "leader_elect_retry_period",
    "prometheus_timeout",
)
"""Keys holding durations in seconds (the file and flags also take Go strings like ``10m``)."""


class ScalerConfig(BaseModel):
    """All engine settings. Field names are the flag names with ``_`` for ``-``.

    Units: durations in seconds, thresholds as fractions 0–1.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_assignment=True, allow_inf_nan=False)

    # Utilization and eligibility (CA: config/flags/flags.go)
    scale_down_utilization_threshold: float = Field(0.5, ge=0.0, le=1.0)
    scale_down_gpu_utilization_threshold: float = Field(0.5, ge=0.0, le=1.0)
    utilization_source: Literal["usage", "requests"] = "usage"
    ignore_daemonsets_utilization: bool = False
    ignore_mirror_pods_utilization: bool = False
    max_metrics_age: Duration = Field(120.0, gt=0)
    scale_down_unready_enabled: bool = True
    scale_down_unneeded_time: Duration = Field(600.0, ge=0)
    scale_down_unready_time: Duration = Field(1200.0, ge=0)
    unremovable_node_recheck_timeout: Duration = Field(300.0, ge=0)
    nodes: tuple[NodeGroupSpec, ...] = ()
    # Drain rules
    skip_nodes_with_local_storage: bool = True
    skip_nodes_with_system_pods: bool = True
    skip_nodes_with_custom_controller_pods: bool = True
    min_replica_count: int = Field(0, ge=0)
    blocking_system_pod_disruption_timeout: Duration = Field(3600.0, ge=0)
    expendable_pods_priority_cutoff: int = -10
    # Simulation
    target_cpu_usage: float = Field(0.45, gt=0.0, le=1.0)
    target_memory_usage: float = Field(0.75, gt=0.0, le=1.0)
    filter_plugins: tuple[str, ...] = ("TargetUsage",)
    score_plugins: tuple[str, ...] = ()
    # History and portraits (seed 001)
    history: Literal["none", "prometheus"] = "none"
    prometheus_url: str = ""
    prometheus_auth_file: str = ""
    prometheus_selector: str = Field("", pattern=r"^[^{}]*$")
    prometheus_timeout: Duration = Field(60.0, gt=0)
    prometheus_metrics: Literal["cadvisor", "gke-system", "auto"] = "auto"
    prometheus_auth: Literal["auto", "google", "none"] = "auto"
    history_days: float = Field(7.0, gt=0.0)
    oversell_rate: float = Field(1.0, gt=0.0, le=1.0)
    portrait_target_cpu_usage: float = Field(0.45, gt=0.0, le=1.0)
    portrait_target_memory_usage: float = Field(0.75, gt=0.0, le=1.0)
    portrait_peak: Literal["sum", "gaussian"] = "sum"
    portrait_quantile: float = Field(0.99, gt=0.5, lt=1.0)
    portrait_cpu_weight: float = Field(1.0, ge=0.0)
    portrait_memory_weight: float = Field(1.0, ge=0.0)
    # Disruption budgets, per-pool settings, savings
    budgets: tuple[ScaleDownBudget, ...] = ()
    node_pools: dict[str, NodePoolSettings] = Field(default_factory=dict)
    # Hot-node relief (koordinator LowNodeLoad's high thresholds; crane's precise eviction)
    hot_node_relief: bool = False
    hot_node_cpu_threshold: float = Field(0.80, gt=0.0, le=1.0)
    hot_node_memory_threshold: float = Field(0.90, gt=0.0, le=1.0)
    hot_node_time: Duration = Field(300.0, ge=0)
    max_relief_evictions_per_loop: int = Field(5, ge=1)
    prices: str = ""
    # Actuation budgets (used by the planner's min-size accounting and by `scaler run`)
    max_scale_down_parallelism: int = Field(10, ge=1)
    max_drain_parallelism: int = Field(1, ge=1)
    # Timers and cooldowns (CA: config/flags/flags.go)
    scan_interval: Duration = Field(10.0, gt=0)
    usage_aggregation: Literal["max", "p95", "ewma"] = "p95"
    scale_down_delay_after_add: Duration = Field(600.0, ge=0)
    scale_down_delay_after_delete: Duration = Field(0.0, ge=0)
    scale_down_delay_after_failure: Duration = Field(180.0, ge=0)
    # Actuation (CA: actuation/drain.go, actuator.go)
    max_graceful_termination_sec: int = Field(600, ge=0)
    max_pod_eviction_time: Duration = Field(120.0, gt=0)
    node_delete_delay_after_taint: Duration = Field(5.0, ge=0)
    daemonset_eviction_for_empty_nodes: bool = False
    daemonset_eviction_for_occupied_nodes: bool = True
    cloud_provider: Literal["gke", "kubernetes"] = "gke"
    gke_project: str = ""
    gke_location: str = ""
    gke_cluster: str = ""
    # Operations
    leader_elect: bool = True
    # client-go / component-base leader election (CA's --leader-elect-* flags and defaults)
    leader_elect_lease_duration: Duration = Field(15.0, gt=0)
    leader_elect_renew_deadline: Duration = Field(10.0, gt=0, validate_default=True)
    leader_elect_retry_period: Duration = Field(2.0, gt=0, validate_default=True)
    namespace: str = "scaler-system"
    instance_name: str = Field("scaler", pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    status_config_map_name: str = "scaler-status"
    address: str = ":8085"
    max_inactivity: Duration = Field(600.0, gt=0)
    log_format: Literal["text", "json"] = "text"
    write_node_status: bool | Literal["auto"] = "auto"

    def writes_node_status(self, dry_run: bool) -> bool:
        """Whether ``scaler run`` writes the nodes' verdicts: ``write_node_status``, where
        ``auto`` means yes for an active controller and no with ``--dry-run``."""
        return (not dry_run) if self.write_node_status == "auto" else bool(self.write_node_status)

    @field_validator(*DURATION_KEYS, mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        if isinstance(v, str):
            try:
                return parse_duration_seconds(v)
            except ValueError as e:
                raise ValueError(str(e)) from None
        return v

    @field_validator("prometheus_url", mode="after")
    @classmethod
    def _prometheus_url(cls, v: str) -> str:
        # No credentials in the URL: they would be printed and stored (prometheus_url_problem).
        problem = prometheus_url_problem(v) if v else ""
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("nodes", mode="before")
    @classmethod
    def _nodes(cls, v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return tuple(parse_node_group_spec(x) if isinstance(x, str) else x for x in v)
        return v

    @field_validator("budgets", mode="before")
    @classmethod
    def _budgets(cls, v: Any) -> Any:
        if isinstance(v, (str, Mapping)):
            v = [v]
        if isinstance(v, (list, tuple)):
            return tuple(parse_budget_spec(x) if isinstance(x, str) else x for x in v)
        return v

    @field_validator("budgets", mode="after")
    @classmethod
    def _budget_names(cls, v: tuple[ScaleDownBudget, ...]) -> tuple[ScaleDownBudget, ...]:
        named = tuple(
            b if b.name else b.model_copy(update={"name": f"budget-{i}"}) for i, b in enumerate(v, 1)
        )
        seen: set[str] = set()
        for b in named:
            if b.name in seen:
                raise ValueError(f"budget name {b.name!r} used twice")
            seen.add(b.name)
        return named

    @field_validator("leader_elect_renew_deadline", mode="after")
    @classmethod
    def _renew_deadline(cls, v: float, info: ValidationInfo) -> float:
        # client-go's NewLeaderElector: "leaseDuration must be greater than renewDeadline".
        duration = info.data.get("leader_elect_lease_duration")
        if duration is not None and not v < duration:
            raise ValueError(
                f"must be shorter than --leader-elect-lease-duration ({format_duration(duration)})"
            )
        return v

    @field_validator("leader_elect_retry_period", mode="after")
    @classmethod
    def _retry_period(cls, v: float, info: ValidationInfo) -> float:
        # client-go's NewLeaderElector asks renewDeadline > 1.2 x retryPeriod (its jitter factor);
        # scaler's elector does not jitter: a renewal must get at least one retry in the deadline.
        deadline = info.data.get("leader_elect_renew_deadline")
        if deadline is not None and not v < deadline:
            raise ValueError(
                f"must be shorter than --leader-elect-renew-deadline ({format_duration(deadline)})"
            )
        return v

    @field_validator("filter_plugins", "score_plugins", mode="before")
    @classmethod
    def _names(cls, v: Any) -> Any:
        if isinstance(v, str):
            return tuple(x.strip() for x in v.split(",") if x.strip())
        return v

    @field_validator("hot_node_relief", mode="after")
    @classmethod
    def _relief_needs_target_usage(cls, v: bool, info: ValidationInfo) -> bool:
        # Relief moves load off a hot node; without TargetUsage the destination check is requests
        # only, and the pods could land on nodes as busy as the one they leave.
        if v and "TargetUsage" not in info.data.get("filter_plugins", ("TargetUsage",)):
            raise ValueError("needs TargetUsage in --filter-plugins (relieved pods go only where it allows)")
        return v

    def node_group_limits(self, name: str) -> NodeGroupSpec | None:
        """The ``--nodes`` entry named exactly ``name``, if any (see
        :func:`scaler.limits.node_group_limits` for MIG names)."""
        for spec in self.nodes:
            if spec.name == name:
                return spec
        return None

    def for_pool(self, pool: str) -> PoolConfig:
        """The effective per-pool values (:data:`POOL_KEYS`) for node pool ``pool``: its
        ``node-pools`` entry where it sets a key, else the global value. Every lookup of those
        keys by a node's (or destination's) pool goes through here."""
        settings = self.node_pools.get(pool)

        def pick(key: str) -> Any:
            value = getattr(settings, key) if settings is not None else None
            return getattr(self, key) if value is None else value

        return PoolConfig(*(pick(k) for k in POOL_KEYS))

    @staticmethod
    def from_mapping(values: Mapping[str, Any]) -> ScalerConfig:
        """Build a config from flag-named keys (``-`` or ``_``).

        Raises:
            ConfigError: unknown key or invalid value; the message names the first one.
        """
        data: dict[str, Any] = {}
        given: dict[str, str] = {}  # field name -> the key as given, for error messages
        for k, v in values.items():
            name = k.replace("-", "_")
            # CA spells this flag "distruption"; accept its spelling too.
            if name == "blocking_system_pod_distruption_timeout":
                name = "blocking_system_pod_disruption_timeout"
            elif name == "nodePools":  # the camelCase spelling of node-pools
                name = "node_pools"
            elif name == "scale_down_budget":  # the flag's name as a key
                name = "budgets"
            data[name], given[name] = v, k
        budgets = data.get("budgets")
        if isinstance(budgets, str):
            budgets = [budgets]
        if isinstance(budgets, (list, tuple)):  # the flag's compact form: its own one-line errors
            data["budgets"] = [parse_budget_spec(b) if isinstance(b, str) else b for b in budgets]
        try:
            return ScalerConfig(**data)
        except ValidationError as e:
            err = e.errors()[0]
            field = str(err["loc"][0]) if err["loc"] else ""
            key = given.get(field, field).replace("_", "-")
            # Nested keys: budgets[0].timeZone, node-pools.web.target-cpu-usage.
            key += "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"][1:])
            if err["type"] == "extra_forbidden":
                raise ConfigError(f"unknown configuration key {key!r}") from None
            # Name the value as given ("0s"), not as converted by a before-validator (0.0).
            value = data[field] if len(err["loc"]) == 1 and field in data else err.get("input")
            msg = str(err["msg"]).removeprefix("Value error, ")
            if field == "prometheus_url":  # the message names the URL redacted; never the value as given
                raise ConfigError(msg) from None
            if field not in data and field in DURATION_KEYS and isinstance(value, (int, float)):
                # A default checked against a given key (--leader-elect-lease-duration=8s).
                raise ConfigError(
                    f"invalid value {format_duration(value)} (the default) for {key}: {msg}"
                ) from None
            if err["type"] == "finite_number":  # allow_inf_nan=False: "nan" is no number, "inf" no finite one
                nan = isinstance(value, float) and math.isnan(value)
                nan = nan or str(value).strip().lower().lstrip("+-") == "nan"
                msg = "not a number" if nan else "not a finite number"
            raise ConfigError(f"invalid value {value!r} for {key}: {msg}") from None
        except ConfigError:
            raise
        except ValueError as e:
            raise ConfigError(str(e)) from None


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML configuration file into a flag-named mapping (validated later).

    Raises:
        ConfigError: unreadable file, invalid YAML, or not a mapping (names the file).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: cannot read config file: {e}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: invalid YAML: {getattr(e, 'problem', e)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: config file must be a mapping of keys to values")
    return {str(k): v for k, v in data.items()}


def _yaml_value(key: str, value: Any) -> str:
    if isinstance(value, dict):
        return "{}" if not value else str(value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return "[" + ", ".join(str(x) for x in value) + "]"
    if key in DURATION_KEYS and isinstance(value, float):
        seconds = int(value)
        if seconds == value and seconds and seconds % 3600 == 0:
            return f"{seconds // 3600}h"
        if seconds == value and seconds and seconds % 60 == 0:
            return f"{seconds // 60}m"
        return f"{seconds}s" if seconds == value else f"{value}s"
    if isinstance(value, str) and (value == "" or value.startswith(":")):
        return f'"{value}"'
    return str(value)


_EXAMPLES = {
    "budgets": """Example: no drain in business hours in Amsterdam, at most 1 node of pool batch at a time:
budgets:
  - name: business-hours
    nodes: 0
    schedule: "0 9 * * 1-5"
    duration: 9h
    timeZone: Europe/Amsterdam
    reasons: [underutilized, unready]
  - nodes: 1
    nodePools: [batch]""",
    "node_pools": """Example:
node-pools:
  batch:
    scale-down-utilization-threshold: 0.7
    scale-down-unneeded-time: 5m
    target-cpu-usage: 0.6
    usage-aggregation: max
    min-size: 1
    max-size: 20""",
}


def render_default_config() -> str:
    """The text of ``config/default.yaml``: every key, its help text and its default."""
    import textwrap

    defaults = ScalerConfig()
    lines = [
        "# scaler configuration: every key, with its default.",
        "# Keys are the flag names without '--'. Flags given on the command line win over this file.",
        "# Durations: seconds or Go-style strings (30s, 10m, 1h). Fractions: 0-1.",
        "# Defaults are cluster-autoscaler's where CA has the same setting.",
        "# Generated by scaler.config.render_default_config(); a test keeps it in sync.",
        "",
    ]
    for title, keys in FLAG_GROUPS.items():
        lines.append(f"# --- {title} ---")
        for key, text in keys.items():
            lines.extend(f"# {line}" for line in textwrap.wrap(text, 96, break_on_hyphens=False))
            lines.extend(f"#   {line}".rstrip() for line in _EXAMPLES.get(key, "").splitlines())
            lines.append(f"{key.replace('_', '-')}: {_yaml_value(key, getattr(defaults, key))}")
            lines.append("")
    return "\n".join(lines)
