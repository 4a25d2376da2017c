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

__all__ = ["ConfigError", "NodeGroupSpec", "ScalerConfig", "load_config_file", "parse_node_group_spec"]


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
    if lo > hi:
        raise ConfigError(f"--nodes: min {lo} is greater than max {hi} in {value!r}")
    return NodeGroupSpec(min_size=lo, max_size=hi, name=name)


Duration = float


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
    # Actuation budgets (used by the planner's min-size accounting and by `scaler run`)
    max_scale_down_parallelism: int = Field(10, ge=1)
    max_drain_parallelism: int = Field(1, ge=1)

    @field_validator(
        "max_metrics_age",
        "scale_down_unneeded_time",
        "scale_down_unready_time",
        "unremovable_node_recheck_timeout",
        "blocking_system_pod_disruption_timeout",
        mode="before",
    )
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
        """The ``--nodes`` entry for node group ``name``, if any."""
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
        data = {k.replace("-", "_"): v for k, v in values.items()}
        # CA spells this flag "distruption"; accept its spelling too.
        if "blocking_system_pod_distruption_timeout" in data:
            data["blocking_system_pod_disruption_timeout"] = data.pop(
                "blocking_system_pod_distruption_timeout"
            )
        try:
            return ScalerConfig(**data)
        except ValidationError as e:
            err = e.errors()[0]
            key = "-".join(str(p) for p in err["loc"][:1]).replace("_", "-")
            if err["type"] == "extra_forbidden":
                raise ConfigError(f"unknown configuration key {key!r}") from None
            raise ConfigError(f"invalid value {err.get('input')!r} for {key}: {err['msg']}") from None
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
