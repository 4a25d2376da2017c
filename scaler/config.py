"""Configuration: every threshold the engine uses, with cluster-autoscaler's names and defaults.

One pydantic model, :class:`ScalerConfig`, is filled from (lowest to highest precedence) its
defaults, a YAML file (``--config``; keys are the flag names without ``--``, e.g.
``scale-down-utilization-threshold``), and command-line flags. Durations are seconds (floats);
the YAML file and flags also accept Go-style strings (``10m``, ``30s``). Fractions are 0–1.
``config/default.yaml`` documents every key.

Each key is declared once, as a field of :class:`ScalerConfig` made by :func:`setting`; its flag
(:func:`flag_name`), ``--help`` group and text (:data:`FLAG_GROUPS`), whether ``scaler dry-run``
takes it (:data:`DRY_RUN_KEYS`), its duration parsing (:data:`DURATION_KEYS`), its other
spellings (:data:`KEY_ALIASES`) and its per-pool override (:data:`POOL_KEYS`,
:data:`NodePoolSettings`, :meth:`ScalerConfig.for_pool`) are derived from that declaration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

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
    "KEY_ALIASES",
    "POOL_KEYS",
    "SETTINGS",
    "ConfigError",
    "DisruptionReasonName",
    "NodeGroupSpec",
    "NodePoolSettings",
    "ScaleDownBudget",
    "ScalerConfig",
    "Setting",
    "flag_name",
    "load_config_file",
    "parse_budget_spec",
    "parse_node_group_spec",
    "setting",
]


# ---- how a key is declared ---------------------------------------------------------------------
#
# Each key is one field of ScalerConfig, declared with `setting(...)`: type, default, bounds, and
# what the flag, the config file, `--help` and the docs show. To add a key, add one field:
#
#     my_new_threshold: float = setting(0.5, _SIMULATION, ge=0.0, le=1.0, help="What it does.")
#
# `per_pool=True` lets a `node-pools` entry override it; `live_only=True` keeps it out of
# `scaler dry-run` (a timer of the live loop); a duration's type is `Duration`.

_UTILIZATION = "Utilization and eligibility"
_DRAIN = "Drain rules"
_SIMULATION = "Simulation"
_HISTORY = "History and portraits"
_BUDGETS = "Disruption budgets and node pools"
_RELIEF = "Hot-node relief"
_SAVINGS = "Savings"
_ACTUATION_BUDGETS = "Actuation budgets"
_TIMERS = "Timers and cooldowns (scaler run)"
_ACTUATION = "Actuation (scaler run)"
_OPERATIONS = "Operations (scaler run)"

DRY_RUN_GROUPS = (_UTILIZATION, _DRAIN, _SIMULATION, _HISTORY, _BUDGETS, _RELIEF, _SAVINGS)
"""Groups whose keys affect ``scaler dry-run`` (the rest only affect ``scaler run``)."""


@dataclass(frozen=True, slots=True)
class Setting:
    """How one :class:`ScalerConfig` key is presented (kept in its field's metadata).

    Attributes:
        group: its ``--help`` group (and section of the generated reference pages).
        help: its help text; ``{pool_keys}`` is replaced by the per-pool keys' names.
        per_pool: a ``node-pools`` entry may override it (:data:`POOL_KEYS`).
        live_only: read only by ``scaler run``'s loop, never by one evaluation (no
            ``scaler dry-run`` flag), although its group's other keys are.
        metavar: the flag's metavar when its type does not say it (``FILE``, ``URL``).
        flag: the flag when it is not ``--`` + the key (``None``: config file only).
        aliases: other spellings accepted as keys (and as hidden flags when they look like one).
        example: lines shown under the key in ``config/default.yaml``.
    """

    group: str
    help: str
    per_pool: bool = False
    live_only: bool = False
    metavar: str | None = None
    flag: str | None = ""
    aliases: tuple[str, ...] = ()
    example: str = ""


def setting(
    default: Any,
    group: str,
    *,
    help: str,
    per_pool: bool = False,
    live_only: bool = False,
    metavar: str | None = None,
    flag: str | None = "",
    aliases: tuple[str, ...] = (),
    example: str = "",
    **constraints: Any,
) -> Any:
    """Declare one configuration key: a pydantic ``Field(default, **constraints)`` (``ge``,
    ``le``, ``gt``, ``lt``, ``pattern``, ``validate_default``) carrying a :class:`Setting` with
    the rest (see its attributes)."""
    field: FieldInfo = Field(default, **constraints)
    field.metadata.append(Setting(group, help, per_pool, live_only, metavar, flag, aliases, example))
    return field


def _parse_duration(v: Any) -> Any:
    """A Go duration string (``10m``) as seconds; anything else as given, for pydantic to check."""
    if isinstance(v, str):
        return parse_duration_seconds(v)
    return v


Duration = Annotated[float, BeforeValidator(_parse_duration)]
"""Seconds; the config file and flags also take Go strings (``10m``, ``1h30m``)."""


class _PoolSizes(BaseModel):
    """The part of :data:`NodePoolSettings` that is no global key: the pool's size limits."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", populate_by_name=True, alias_generator=lambda s: s.replace("_", "-")
    )

    min_size: int | None = Field(None, ge=0)
    max_size: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _sizes(self) -> _PoolSizes:
        if self.min_size is not None and self.max_size is not None and self.min_size > self.max_size:
            raise ValueError(f"min-size {self.min_size} is greater than max-size {self.max_size}")
        return self


_BUDGETS_EXAMPLE = """Example: no drain in business hours in Amsterdam, at most 1 node of pool batch at a time:
budgets:
  - name: business-hours
    nodes: 0
    schedule: "0 9 * * 1-5"
    duration: 9h
    timeZone: Europe/Amsterdam
    reasons: [underutilized, unready]
  - nodes: 1
    nodePools: [batch]"""
_NODE_POOLS_EXAMPLE = """Example:
node-pools:
  batch:
    scale-down-utilization-threshold: 0.7
    scale-down-unneeded-time: 5m
    target-cpu-usage: 0.6
    usage-aggregation: max
    min-size: 1
    max-size: 20"""


class ScalerConfig(BaseModel):
    """All engine settings. Field names are the flag names with ``_`` for ``-``.

    Units: durations in seconds, thresholds as fractions 0–1. Each field is declared once, with
    :func:`setting`: its type, default and bounds, its ``--help`` group and text, and whether a
    ``node-pools`` entry may override it; the flag, the config key, the per-pool key, the generated
    reference pages and ``config/default.yaml`` all derive from that declaration.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_assignment=True, allow_inf_nan=False)
    _pools: dict[str, ScalerConfig] = PrivateAttr(default_factory=dict)

    # fmt: off
    scale_down_utilization_threshold: float = setting(0.5, _UTILIZATION, ge=0.0, le=1.0, per_pool=True, help=
        "A node is underutilized when its utilization (max of cpu and memory, fraction 0-1) is <= this value.")
    scale_down_gpu_utilization_threshold: float = setting(0.5, _UTILIZATION, ge=0.0, le=1.0, help=
        "A GPU node (nvidia.com/gpu allocatable, or the cloud.google.com/gke-accelerator label) is judged by "
        "its GPUs alone, as cluster-autoscaler judges it: underutilized when requested GPUs / allocatable "
        "GPUs (fraction 0-1), and with --history prometheus also its real GPU usage (DCGM_FI_DEV_GPU_UTIL), "
        "are <= this value; cpu and memory are ignored.")
    utilization_source: Literal["usage", "requests"] = setting("usage", _UTILIZATION, help=
        "usage: real usage from metrics.k8s.io (default); requests: cluster-autoscaler's requests-based "
        "utilization, for comparison.")
    ignore_daemonsets_utilization: bool = setting(False, _UTILIZATION, help=
        "Remove DaemonSet pods (their usage, or their requests with --utilization-source=requests) from "
        "numerator and denominator.")
    ignore_mirror_pods_utilization: bool = setting(False, _UTILIZATION, help=
        "The same for mirror (static) pods.")
    max_metrics_age: Duration = setting(120.0, _UTILIZATION, gt=0, help=
        "NodeMetrics older than this (seconds or Go duration) count as missing: the node is "
        "MetricsUnavailable, never idle.")
    scale_down_unready_enabled: bool = setting(True, _UTILIZATION, help=
        "Consider NotReady nodes for scale-down.")
    scale_down_unneeded_time: Duration = setting(600.0, _UTILIZATION, ge=0, per_pool=True, live_only=True, help=
        "How long a Ready node must stay unneeded before it is deleted (live mode).")
    scale_down_unready_time: Duration = setting(1200.0, _UTILIZATION, ge=0, per_pool=True, live_only=True, help=
        "How long a NotReady node must stay unneeded before it is deleted (live mode).")
    unremovable_node_recheck_timeout: Duration = setting(300.0, _UTILIZATION, ge=0, live_only=True, help=
        "A node found unremovable, or whose removal failed, is not re-checked for this long (live mode).")
    nodes: tuple[NodeGroupSpec, ...] = setting((), _UTILIZATION, metavar="MIN:MAX:NAME", help=
        "MIN:MAX:NAME size limits (repeatable). NAME is a node pool, whose limits then hold in each of its "
        "zones, as GKE's own --min-nodes/--max-nodes do (one MIG per zone), or one of its MIGs "
        "(gke-CLUSTER-POOL-HASH-grp or its URL), then limited on its own; a MIG's entry wins over its "
        "pool's. Without it the min is 0.")

    skip_nodes_with_local_storage: bool = setting(True, _DRAIN, help=
        "Block nodes with pods using emptyDir (not Memory) or hostPath volumes.")
    skip_nodes_with_system_pods: bool = setting(True, _DRAIN, help=
        "Block nodes with kube-system pods not covered by a PDB.")
    skip_nodes_with_custom_controller_pods: bool = setting(True, _DRAIN, help=
        "Only RC/RS/Job/StatefulSet-owned pods count as replicated; check their controllers exist.")
    min_replica_count: int = setting(0, _DRAIN, ge=0, help=
        "Block pods whose ReplicaSet/ReplicationController has fewer replicas than this.")
    blocking_system_pod_disruption_timeout: Duration = setting(3600.0, _DRAIN, ge=0,
        aliases=("blocking-system-pod-distruption-timeout",), help=  # CA's own spelling, accepted
        "A kube-system pod without a PDB stops blocking once older than this (CA 1.33+).")
    expendable_pods_priority_cutoff: int = setting(-10, _DRAIN, help=
        "Pods whose spec.priority is set and below this are ignored: they neither block nor move. A pod "
        "without spec.priority never is.")

    target_cpu_usage: float = setting(0.45, _SIMULATION, gt=0.0, le=1.0, per_pool=True, help=
        "TargetUsage: a destination's cpu (its usage + the load of every pod moved there + this pod's load, "
        "a pod's load being max(request, real usage)) must stay <= this fraction of allocatable.")
    target_memory_usage: float = setting(0.75, _SIMULATION, gt=0.0, le=1.0, per_pool=True, help=
        "TargetUsage: a destination's memory (its usage + the load of every pod moved there + this pod's "
        "load, a pod's load being max(request, real usage)) must stay < this fraction of allocatable.")
    filter_plugins: tuple[str, ...] = setting(("TargetUsage",), _SIMULATION, help=
        "Extra Filter plugins (comma-separated entry-point names).")
    score_plugins: tuple[str, ...] = setting((), _SIMULATION, help=
        "Score plugins (comma-separated entry-point names); default none: first fit.")

    history: Literal["none", "prometheus"] = setting("none", _HISTORY, help=
        "Where 24-hour workload profiles (resource portraits) come from: none (default; instantaneous usage "
        "only, the portrait plugins then check requests only and score every node alike) or prometheus "
        "(range queries to --prometheus-url).")
    prometheus_url: str = setting("", _HISTORY, metavar="URL", help=
        "Base URL of the Prometheus query API (the part before /api/v1), e.g. "
        "http://prometheus.monitoring:9090 or, for Google Managed Prometheus, "
        "https://monitoring.googleapis.com/v1/projects/PROJECT/location/global/prometheus. No credentials in "
        "it (user:password@, a query string): they are refused; use prometheus-auth-file.")
    prometheus_auth_file: str = setting("", _HISTORY, metavar="FILE", help=
        "File holding a bearer token, or one 'Header-Name: value' line, sent with every Prometheus query; "
        "read at each refresh (rotated tokens work). Empty: no auth header.")
    prometheus_selector: str = setting("", _HISTORY, pattern=r"^[^{}]*$", metavar="MATCHERS", help=
        "Extra label matchers added to both Prometheus queries, e.g. cluster=\"prod\" when one (managed) "
        "Prometheus holds several clusters.")
    prometheus_metrics: Literal["cadvisor", "gke-system", "auto"] = setting("auto", _HISTORY, help=
        "Which usage history --prometheus-url holds: cadvisor (the kubelet's container_cpu_usage_seconds_total "
        "and container_memory_working_set_bytes, scraped by your Prometheus), gke-system (GKE system metrics in "
        "Cloud Monitoring: kubernetes_io:container_cpu_core_usage_time, kubernetes_io:container_memory_used_bytes "
        "non-evictable, kubernetes_io:container_accelerator_duty_cycle), or auto (asks the endpoint which one has "
        "series for the selector; cadvisor when both have).")
    prometheus_auth: Literal["auto", "google", "none"] = setting("auto", _HISTORY, help=
        "How Prometheus queries authenticate: auto (prometheus-auth-file when set, else Google Application "
        "Default Credentials for https://monitoring.googleapis.com, else none), google (Application Default "
        "Credentials whatever the URL) or none.")
    prometheus_timeout: Duration = setting(60.0, _HISTORY, gt=0, help=
        "Deadline of each Prometheus call, whole (connect, wait and read the answer): a slower answer is a "
        "failed refresh (seconds or Go duration).")
    history_days: float = setting(7.0, _HISTORY, gt=0.0, help=
        "Profiles cover the last this many days of usage.")
    oversell_rate: float = setting(1.0, _HISTORY, gt=0.0, le=1.0, help=
        "PodFitsResourceOnPortrait's hard limit: a destination's cpu requests must stay <= allocatable x "
        "this (memory requests <= allocatable, never oversold). At most 1: evicted pods are re-placed by "
        "kube-scheduler, by requests.")
    portrait_target_cpu_usage: float = setting(0.45, _HISTORY, gt=0.0, le=1.0, help=
        "PodFitsResourceOnPortrait's soft limit: a destination's hourly cpu portrait peak must stay <= this "
        "fraction of allocatable in every hour of the day.")
    portrait_target_memory_usage: float = setting(0.75, _HISTORY, gt=0.0, le=1.0, help=
        "PodFitsResourceOnPortrait's soft limit: a destination's hourly memory portrait peak must stay <= "
        "this fraction of allocatable in every hour of the day.")
    portrait_peak: Literal["sum", "gaussian"] = setting("sum", _HISTORY, help=
        "PodFitsResourceOnPortrait: how a destination's hourly peak is estimated: sum (the sum of its pods' "
        "hourly peaks, as if they all coincided; default) or gaussian (the --portrait-quantile of the node's "
        "hourly load, pods' means and variances added; never above the sum).")
    portrait_quantile: float = setting(0.99, _HISTORY, gt=0.5, lt=1.0, help=
        "With --portrait-peak=gaussian: the quantile of the node's hourly load held to the portrait targets "
        "(0.99: mean + 2.33 standard deviations).")
    portrait_cpu_weight: float = setting(1.0, _HISTORY, ge=0.0, help=
        "ResourceBalanceOnPortrait: weight of the normalised cpu score.")
    portrait_memory_weight: float = setting(1.0, _HISTORY, ge=0.0, help=
        "ResourceBalanceOnPortrait: weight of the normalised memory score.")

    budgets: tuple[ScaleDownBudget, ...] = setting((), _BUDGETS, flag="--scale-down-budget", metavar="BUDGET",
        aliases=("scale-down-budget",), example=_BUDGETS_EXAMPLE, help=
        "Scheduled disruption budgets (Karpenter's NodePool budgets, plus a time zone and a pool scope): how "
        "many nodes of each node pool may be disrupted at once (a count, or a percentage of the pool's nodes "
        "rounded up), always or in cron windows, for some reasons and pools; NotReady nodes and nodes being "
        "removed count as disrupted. The most restrictive active budget wins; nodes: 0 blocks. Flag "
        "(repeatable): --scale-down-budget "
        "'NODES[;schedule=CRON;duration=D][;timeZone=ZONE][;reasons=R,...][;nodePools=P,...][;name=NAME]'. "
        "Default: none (only the parallelism flags limit).")
    node_pools: dict[str, NodePoolSettings] = setting({}, _BUDGETS, flag=None, aliases=("nodePools",),
        example=_NODE_POOLS_EXAMPLE, help=
        "Per node pool overrides of {pool_keys}, and the pool's min-size and max-size (as --nodes: in each "
        "zone; a --nodes entry for the same pool wins). Config file only.")

    hot_node_relief: bool = setting(False, _RELIEF, help=
        "Relieve hot nodes (off by default): a node whose usage, aggregated as scale-down candidates are, "
        "stays above --hot-node-cpu-threshold or --hot-node-memory-threshold (for --hot-node-time) gets the "
        "soft taint scaler.io/hot=<unix ts>:PreferNoSchedule and loses, through the Eviction API, the fewest "
        "pods whose real usage brings it back under the waterline (crane's precise eviction), each only if "
        "the simulation finds it a destination passing the scheduler filters and TargetUsage. Needs "
        "TargetUsage in --filter-plugins.")
    hot_node_cpu_threshold: float = setting(0.80, _RELIEF, gt=0.0, le=1.0, help=
        "Hot-node relief's cpu waterline: a node is hot while its cpu usage is above this fraction of "
        "allocatable (koordinator LowNodeLoad's highThresholds).")
    hot_node_memory_threshold: float = setting(0.90, _RELIEF, gt=0.0, le=1.0, help=
        "Hot-node relief's memory waterline: a node is hot while its memory usage is above this fraction of "
        "allocatable.")
    hot_node_time: Duration = setting(300.0, _RELIEF, ge=0, live_only=True, help=
        "How long a node must stay above a waterline before it is relieved, and stay under both before its "
        "scaler.io/hot taint is removed (live mode).")
    max_relief_evictions_per_loop: int = setting(5, _RELIEF, ge=1, help=
        "Maximum pods evicted by hot-node relief per loop, over all nodes.")

    prices: str = setting("", _SAVINGS, metavar="FILE", help=
        "YAML price table merged over the bundled one (machine type, region, on-demand or Spot; USD per "
        "hour) for the monthly cost of removable nodes. Empty: the bundled table.")

    max_scale_down_parallelism: int = setting(10, _ACTUATION_BUDGETS, ge=1, help=
        "Maximum nodes deleted at once.")
    max_drain_parallelism: int = setting(1, _ACTUATION_BUDGETS, ge=1, help=
        "Maximum non-empty nodes drained at once.")

    scan_interval: Duration = setting(10.0, _TIMERS, gt=0, help=
        "How often the controller loop runs (seconds or Go duration).")
    usage_aggregation: Literal["max", "p95", "ewma"] = setting("p95", _TIMERS, per_pool=True, help=
        "How node usage is aggregated over --scale-down-unneeded-time before judging a node: max (any spike "
        "counts), p95 (isolated spikes ignored; default), ewma (smoothed).")
    scale_down_delay_after_add: Duration = setting(600.0, _TIMERS, ge=0, help=
        "No deletion for this long after a node was added (a scale-up).")
    scale_down_delay_after_delete: Duration = setting(0.0, _TIMERS, ge=0, help=
        "No deletion for this long after a loop that started deletions.")
    scale_down_delay_after_failure: Duration = setting(180.0, _TIMERS, ge=0, help=
        "No deletion for this long after a failed scale-down (any step).")

    max_graceful_termination_sec: int = setting(600, _ACTUATION, ge=0, help=
        "Cap on a pod's terminationGracePeriodSeconds during drain (seconds).")
    max_pod_eviction_time: Duration = setting(120.0, _ACTUATION, gt=0, help=
        "How long one pod's eviction is retried (every 10s on 429/5xx).")
    node_delete_delay_after_taint: Duration = setting(5.0, _ACTUATION, ge=0, help=
        "Wait between tainting a node and draining or deleting it.")
    daemonset_eviction_for_empty_nodes: bool = setting(False, _ACTUATION, help=
        "Evict DaemonSet pods (best effort) before deleting an empty node.")
    daemonset_eviction_for_occupied_nodes: bool = setting(True, _ACTUATION, help=
        "Evict DaemonSet pods (best effort) when draining a node.")
    cloud_provider: Literal["gke", "kubernetes"] = setting("gke", _ACTUATION, help=
        "gke: delete through the MIG (deleteInstances); kubernetes: delete the Node object.")
    gke_project: str = setting("", _ACTUATION, metavar="NAME", help=
        "GCP project of the cluster (default: from the GKE metadata server).")
    gke_location: str = setting("", _ACTUATION, metavar="NAME", help=
        "Cluster location, region or zone (default: from the metadata server).")
    gke_cluster: str = setting("", _ACTUATION, metavar="NAME", help=
        "Cluster name (default: from the metadata server).")

    leader_elect: bool = setting(True, _OPERATIONS, help=
        "Run leader election on a coordination.k8s.io Lease; only the leader acts.")
    leader_elect_lease_duration: Duration = setting(15.0, _OPERATIONS, gt=0, help=
        "How long a follower waits after the last renewal it saw before it takes the Lease over: the longest "
        "a stopped leader can hold it (must be longer than the renew deadline).")
    leader_elect_renew_deadline: Duration = setting(10.0, _OPERATIONS, gt=0, validate_default=True, help=
        "The leader stops (exits 1) when it could not renew the Lease for this long; a write goes out only "
        "within this time of the last renewal (must be longer than the retry period).")
    leader_elect_retry_period: Duration = setting(2.0, _OPERATIONS, gt=0, validate_default=True, help=
        "How often the leader renews the Lease and a follower tries to take it.")
    namespace: str = setting("scaler-system", _OPERATIONS, help=
        "Namespace of the Lease and the status ConfigMap.")
    instance_name: str = setting("scaler", _OPERATIONS, pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", help=
        "Name of this scaler installation; its taints and annotations carry it.")
    status_config_map_name: str = setting("scaler-status", _OPERATIONS, help=
        "Name of the status ConfigMap written every loop.")
    address: str = setting(":8085", _OPERATIONS, help=
        "host:port of the /metrics and /healthz server.")
    max_inactivity: Duration = setting(600.0, _OPERATIONS, gt=0, help=
        "/healthz fails when no loop finished for this long.")
    log_format: Literal["text", "json"] = setting("text", _OPERATIONS, help=
        "text or json.")
    write_node_status: bool | Literal["auto"] = setting("auto", _OPERATIONS, help=
        "Write each node's verdict on the node: annotation scaler.io/scale-down-status (status, reason, "
        "detail, since) and a label of the same name (the reason, or removable-empty/-drain), only when it "
        "changes. auto: true, but false with --dry-run (a dry-run writes nothing to the nodes unless this is "
        "set to true).")
    # fmt: on

    def writes_node_status(self, dry_run: bool) -> bool:
        """Whether ``scaler run`` writes the nodes' verdicts: ``write_node_status``, where
        ``auto`` means yes for an active controller and no with ``--dry-run``."""
        return (not dry_run) if self.write_node_status == "auto" else bool(self.write_node_status)

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

    @model_validator(mode="after")
    def _pool_configs(self) -> ScalerConfig:
        # The configuration each node pool with settings sees, built once (the model is frozen).
        self._pools = {
            pool: self.model_copy(
                update={
                    "node_pools": {},
                    **{k: v for k in POOL_KEYS if (v := getattr(settings, k)) is not None},
                }
            )
            for pool, settings in self.node_pools.items()
        }
        return self

    def for_pool(self, pool: str) -> ScalerConfig:
        """The configuration as node pool ``pool`` sees it: its ``node-pools`` entry's values of
        :data:`POOL_KEYS` where it sets them, else the global ones. Every lookup of those keys by
        a node's (or destination's) pool goes through here; read only those keys of the result
        (it has no ``node-pools`` of its own)."""
        return self._pools.get(pool, self)

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
            name = KEY_ALIASES.get(name, name)  # CA's "distruption", nodePools, scale-down-budget
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


# ---- what derives from the declarations ------------------------------------------------------------


def _setting(name: str) -> Setting:
    return next(m for m in ScalerConfig.model_fields[name].metadata if isinstance(m, Setting))


SETTINGS: dict[str, Setting] = {name: _setting(name) for name in ScalerConfig.model_fields}
"""Every key's :class:`Setting`, in declaration order."""

POOL_KEYS: tuple[str, ...] = tuple(k for k, s in SETTINGS.items() if s.per_pool)
"""The :class:`ScalerConfig` keys a ``node-pools`` entry may override (with ``min-size`` and
``max-size``, which feed the node group limits)."""

DURATION_KEYS: tuple[str, ...] = tuple(
    k
    for k, f in ScalerConfig.model_fields.items()
    if any(isinstance(m, BeforeValidator) and m.func is _parse_duration for m in f.metadata)
)
"""Keys holding durations in seconds (the file and flags also take Go strings like ``10m``)."""


def _help(setting: Setting) -> str:
    names = [k.replace("_", "-") for k in POOL_KEYS]
    return setting.help.replace("{pool_keys}", ", ".join(names[:-1]) + " and " + names[-1])


FLAG_GROUPS: dict[str, dict[str, str]] = {}
"""Help text of every key, grouped as ``--help`` and the generated docs/reference/flags.md present
them."""
for _key, _s in SETTINGS.items():
    FLAG_GROUPS.setdefault(_s.group, {})[_key] = _help(_s)

FLAG_HELP: dict[str, str] = {k: v for group in FLAG_GROUPS.values() for k, v in group.items()}

DRY_RUN_KEYS: frozenset[str] = frozenset(
    k for k, s in SETTINGS.items() if s.group in DRY_RUN_GROUPS and not s.live_only
)
"""Keys one evaluation reads (``scaler dry-run`` has a flag for each): the timers of the live loop
and the actuation budgets are not among them."""

KEY_ALIASES: dict[str, str] = {alias.replace("-", "_"): k for k, s in SETTINGS.items() for alias in s.aliases}
"""Other spellings of a key (``-`` or ``_``) → the key: cluster-autoscaler's
``blocking-system-pod-distruption-timeout``, the flag name ``scale-down-budget`` of ``budgets``,
and the camelCase ``nodePools``."""


def flag_name(key: str) -> str | None:
    """The command-line flag of configuration key ``key`` (``--`` + the key with ``-``), or
    ``None`` for ``node-pools`` (a map: config file only). ``budgets`` is the repeatable
    ``--scale-down-budget``."""
    flag = SETTINGS[key].flag
    return "--" + key.replace("_", "-") if flag == "" else flag


def _pool_field(key: str) -> tuple[Any, FieldInfo]:
    """A ``node-pools`` entry's field for global key ``key``: the same type and bounds, optional
    (``None``: the global value)."""
    field = ScalerConfig.model_fields[key]
    return (Optional[field.annotation], FieldInfo.merge_field_infos(field, default=None))  # noqa: UP045


if TYPE_CHECKING:
    NodePoolSettings = _PoolSizes
else:
    NodePoolSettings = create_model(
        "NodePoolSettings",
        __base__=_PoolSizes,
        __module__=__name__,
        __doc__="""Overrides for one GKE node pool (``node-pools: {POOL: {...}}``); ``None``: the global
        value.

        Keys are the flag names of :data:`POOL_KEYS` (``scale-down-utilization-threshold``,
        ``target-cpu-usage``, ...), with the global keys' types and bounds, plus ``min-size`` /
        ``max-size`` (nodes). Cluster-autoscaler has the same idea in its per-node-group options
        (``config.NodeGroupAutoscalingOptions``: utilization threshold, unneeded and unready
        times), set through cloud-specific tags; on GKE they are not settable.""",
        **{k: _pool_field(k) for k in POOL_KEYS},
    )
ScalerConfig.model_rebuild()


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
        # libyaml's parser when installed: the same safe load, and a nesting limit of its own
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: invalid YAML: {getattr(e, 'problem', e)}") from None
    except RecursionError:
        raise ConfigError(
            f"{p}: invalid YAML: nested too deeply (deeper than the parser's recursion limit)"
        ) from None
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
            lines.extend(f"#   {line}".rstrip() for line in SETTINGS[key].example.splitlines())
            lines.append(f"{key.replace('_', '-')}: {_yaml_value(key, getattr(defaults, key))}")
            lines.append("")
    return "\n".join(lines)
