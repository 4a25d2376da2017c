"""Configuration: every threshold the engine uses, with cluster-autoscaler's names and defaults.

One pydantic model, :class:`ScalerConfig`, is filled from (lowest to highest precedence) its
defaults, a YAML file (``--config``; keys are the flag names without ``--``, e.g.
``scale-down-utilization-threshold``), and command-line flags. Durations are seconds (floats);
the YAML file and flags also accept Go-style strings (``10m``, ``30s``). Fractions are 0–1.
``config/default.yaml`` documents every key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from scaler.model.parse import parse_duration_seconds

__all__ = [
    "DRY_RUN_GROUPS",
    "FLAG_GROUPS",
    "FLAG_HELP",
    "ConfigError",
    "NodeGroupSpec",
    "ScalerConfig",
    "load_config_file",
    "parse_node_group_spec",
]


# Help text of every key, grouped as the README and `scaler dry-run --help` present them.
FLAG_GROUPS: dict[str, dict[str, str]] = {
    "Utilization and eligibility": {
        "scale_down_utilization_threshold": "A node is underutilized when its utilization (max of cpu and memory, "
        "fraction 0-1) is <= this value (CA default 0.5).",
        "utilization_source": "usage: real usage from metrics.k8s.io (default); requests: cluster-autoscaler's "
        "requests-based utilization, for comparison.",
        "ignore_daemonsets_utilization": "Remove DaemonSet pods (their usage, or their requests with "
        "--utilization-source=requests) from numerator and denominator.",
        "ignore_mirror_pods_utilization": "The same for mirror (static) pods.",
        "max_metrics_age": "NodeMetrics older than this (seconds or Go duration, default 2m) count as missing: "
        "the node is MetricsUnavailable, never idle.",
        "scale_down_unready_enabled": "Consider NotReady nodes for scale-down.",
        "scale_down_unneeded_time": "How long a Ready node must stay unneeded before it is deleted (live mode).",
        "scale_down_unready_time": "How long a NotReady node must stay unneeded before it is deleted (live mode).",
        "unremovable_node_recheck_timeout": "A node found unremovable, or whose removal failed, is not re-checked "
        "for this long (live mode).",
        "nodes": "MIN:MAX:POOL size limits of a node group (repeatable). Without it a group's min is 0.",
    },
    "Drain rules": {
        "skip_nodes_with_local_storage": "Block nodes with pods using emptyDir (not Memory) or hostPath volumes.",
        "skip_nodes_with_system_pods": "Block nodes with kube-system pods not covered by a PDB.",
        "skip_nodes_with_custom_controller_pods": "Only RC/RS/Job/StatefulSet-owned pods count as replicated; "
        "check their controllers exist.",
        "min_replica_count": "Block pods whose ReplicaSet/ReplicationController has fewer replicas than this.",
        "blocking_system_pod_disruption_timeout": "A kube-system pod without a PDB stops blocking once older "
        "than this (CA 1.33+).",
        "expendable_pods_priority_cutoff": "Pods with priority below this are ignored: they neither block nor move.",
    },
    "Simulation": {
        "target_cpu_usage": "TargetUsage: a destination's cpu (usage + moved requests + pod request) must stay "
        "<= this fraction of allocatable.",
        "target_memory_usage": "TargetUsage: a destination's memory (usage + moved requests + pod request) must "
        "stay < this fraction of allocatable.",
        "filter_plugins": "Extra Filter plugins (comma-separated entry-point names); default TargetUsage.",
        "score_plugins": "Score plugins (comma-separated entry-point names); default none: first fit.",
    },
    "History and portraits": {
        "history": "Where 24-hour workload profiles (resource portraits, seed 001) come from: none (default; "
        "instantaneous usage only, the portrait plugins then check requests only and score every node alike) "
        "or prometheus (range queries to --prometheus-url).",
        "prometheus_url": "Base URL of the Prometheus query API (the part before /api/v1), e.g. "
        "http://prometheus.monitoring:9090 or, for Google Managed Prometheus, "
        "https://monitoring.googleapis.com/v1/projects/PROJECT/location/global/prometheus.",
        "prometheus_auth_file": "File holding a bearer token, or one 'Header-Name: value' line, sent with every "
        "Prometheus query; read at each refresh (rotated tokens work). Empty: no auth header.",
        "prometheus_selector": 'Extra label matchers added to both Prometheus queries, e.g. cluster="prod" '
        "when one (managed) Prometheus holds several clusters.",
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
        "namespace": "Namespace of the Lease and the status ConfigMap.",
        "instance_name": "Name of this scaler installation; its taints and annotations carry it.",
        "status_config_map_name": "Name of the status ConfigMap written every loop.",
        "address": "host:port of the /metrics and /healthz server.",
        "max_inactivity": "/healthz fails when no loop finished for this long.",
        "log_format": "text or json.",
    },
}
# Groups shown by `scaler dry-run` (the rest belong to `scaler run`).
DRY_RUN_GROUPS = (
    "Utilization and eligibility",
    "Drain rules",
    "Simulation",
    "History and portraits",
    "Actuation budgets",
)
FLAG_HELP: dict[str, str] = {k: v for group in FLAG_GROUPS.values() for k, v in group.items()}


class ConfigError(ValueError):
    """Bad configuration (file or flag); the message names the key and the bad value."""


class NodeGroupSpec(BaseModel):
    """``--nodes=MIN:MAX:POOL``: size limits of one node group (GKE node pool), in nodes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_size: int = Field(ge=0)
    max_size: int = Field(ge=0)
    name: str = Field(min_length=1)


def parse_node_group_spec(value: str) -> NodeGroupSpec:
    """Parse ``MIN:MAX:NAME`` (``NAME`` may be a node-pool name or a MIG URL ending in it).

    Raises:
        ConfigError: malformed spec, negative sizes, or min > max (message names the value).
    """
    m = re.fullmatch(r"(\d+):(\d+):(.+)", value.strip())
    if not m:
        raise ConfigError(f"--nodes: expected MIN:MAX:POOL, got {value!r}")
    lo, hi, name = int(m[1]), int(m[2]), m[3].rstrip("/").rsplit("/", 1)[-1]
    if not name:  # "1:3:/" would otherwise escape as a pydantic ValidationError
        raise ConfigError(f"--nodes: empty node group name in {value!r}")
    if lo > hi:
        raise ConfigError(f"--nodes: min {lo} is greater than max {hi} in {value!r}")
    return NodeGroupSpec(min_size=lo, max_size=hi, name=name)


Duration = float
_DURATION_KEYS = (
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
)
"""Keys holding durations in seconds (the file and flags also take Go strings like ``10m``)."""


class ScalerConfig(BaseModel):
    """All engine settings. Field names are the flag names with ``_`` for ``-``.

    Units: durations in seconds, thresholds as fractions 0–1.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_assignment=True)

    # Utilization and eligibility (CA: config/flags/flags.go)
    scale_down_utilization_threshold: float = Field(0.5, ge=0.0, le=1.0)
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
    history_days: float = Field(7.0, gt=0.0)
    oversell_rate: float = Field(1.0, gt=0.0, le=1.0)
    portrait_target_cpu_usage: float = Field(0.45, gt=0.0, le=1.0)
    portrait_target_memory_usage: float = Field(0.75, gt=0.0, le=1.0)
    portrait_peak: Literal["sum", "gaussian"] = "sum"
    portrait_quantile: float = Field(0.99, gt=0.5, lt=1.0)
    portrait_cpu_weight: float = Field(1.0, ge=0.0)
    portrait_memory_weight: float = Field(1.0, ge=0.0)
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
    namespace: str = "scaler-system"
    instance_name: str = Field("scaler", pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    status_config_map_name: str = "scaler-status"
    address: str = ":8085"
    max_inactivity: Duration = Field(600.0, gt=0)
    log_format: Literal["text", "json"] = "text"

    @field_validator(*_DURATION_KEYS, mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        if isinstance(v, str):
            try:
                return parse_duration_seconds(v)
            except ValueError as e:
                raise ValueError(str(e)) from None
        return v

    @field_validator("nodes", mode="before")
    @classmethod
    def _nodes(cls, v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return tuple(parse_node_group_spec(x) if isinstance(x, str) else x for x in v)
        return v

    @field_validator("filter_plugins", "score_plugins", mode="before")
    @classmethod
    def _names(cls, v: Any) -> Any:
        if isinstance(v, str):
            return tuple(x.strip() for x in v.split(",") if x.strip())
        return v

    def node_group_limits(self, name: str) -> NodeGroupSpec | None:
        """The ``--nodes`` entry named exactly ``name``, if any (see
        :func:`scaler.eligibility.node_group_limits` for MIG names)."""
        for spec in self.nodes:
            if spec.name == name:
                return spec
        return None

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
            data[name], given[name] = v, k
        try:
            return ScalerConfig(**data)
        except ValidationError as e:
            err = e.errors()[0]
            field = str(err["loc"][0]) if err["loc"] else ""
            key = given.get(field, field).replace("_", "-")
            if err["type"] == "extra_forbidden":
                raise ConfigError(f"unknown configuration key {key!r}") from None
            # Name the value as given ("0s"), not as converted by a before-validator (0.0).
            value = data[field] if len(err["loc"]) == 1 and field in data else err.get("input")
            raise ConfigError(f"invalid value {value!r} for {key}: {err['msg']}") from None
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
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return "[" + ", ".join(str(x) for x in value) + "]"
    if key in _DURATION_KEYS and isinstance(value, float):
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
            lines.extend(f"# {line}" for line in textwrap.wrap(text, 96))
            lines.append(f"{key.replace('_', '-')}: {_yaml_value(key, getattr(defaults, key))}")
            lines.append("")
    return "\n".join(lines)
