"""ScalerConfig: cluster-autoscaler's defaults, Go durations, flag-named keys, --nodes specs and
ConfigError messages naming the key and the value."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from scaler.config import (
    ConfigError,
    NodeGroupSpec,
    ScalerConfig,
    load_config_file,
    parse_node_group_spec,
)

REPO = Path(__file__).resolve().parents[1]


# --- defaults -----------------------------------------------------------------------------------


def test_defaults_are_cluster_autoscalers() -> None:
    c = ScalerConfig()
    assert c.scale_down_utilization_threshold == 0.5
    assert c.scale_down_unneeded_time == 600.0
    assert c.scale_down_unready_time == 1200.0
    assert c.scale_down_unready_enabled is True
    assert c.unremovable_node_recheck_timeout == 300.0
    assert c.max_metrics_age == 120.0
    assert c.target_cpu_usage == 0.45
    assert c.target_memory_usage == 0.75
    assert c.skip_nodes_with_local_storage is True
    assert c.skip_nodes_with_system_pods is True
    assert c.skip_nodes_with_custom_controller_pods is True
    assert c.min_replica_count == 0
    assert c.expendable_pods_priority_cutoff == -10
    assert c.blocking_system_pod_disruption_timeout == 3600.0
    assert c.ignore_daemonsets_utilization is False
    assert c.ignore_mirror_pods_utilization is False
    assert c.utilization_source == "usage"
    assert c.nodes == ()
    assert c.filter_plugins == ("TargetUsage",)
    assert c.score_plugins == ()
    assert c.max_scale_down_parallelism == 10
    assert c.max_drain_parallelism == 1
    # component-base's leader election flags, as CA registers them
    assert (c.leader_elect_lease_duration, c.leader_elect_renew_deadline, c.leader_elect_retry_period) == (15, 10, 2)


def test_each_key_is_declared_once() -> None:
    """A key's name appears once in scaler/config.py outside ScalerConfig's validators: its field
    declaration, from which the flag, the help, the per-pool key and the generated pages derive."""
    import inspect

    import scaler.config as module

    text = inspect.getsource(module)
    for member in vars(ScalerConfig).values():
        func = getattr(member, "__func__", member)
        wrapped = getattr(func, "__wrapped__", func)  # pydantic's decorator info keeps the function
        if inspect.isfunction(wrapped) and wrapped.__module__ == module.__name__:
            text = text.replace(inspect.getsource(wrapped), "")
    decorators = ScalerConfig.__pydantic_decorators__
    for info in [*decorators.field_validators.values(), *decorators.model_validators.values()]:
        text = text.replace(inspect.getsource(info.func), "")
    for key in ScalerConfig.model_fields:
        if "_" in key:  # one-word keys (nodes, budgets) are also words of help texts
            found = re.findall(rf"(?<![\w-]){key}(?![\w-])", text)
            assert len(found) == 1, f"{key} is written {len(found)} times in scaler/config.py"
    assert module.POOL_KEYS[0] == "scale_down_utilization_threshold"
    assert "scale_down_utilization_threshold" in module.NodePoolSettings.model_fields


def test_empty_mapping_gives_the_defaults() -> None:
    assert ScalerConfig.from_mapping({}) == ScalerConfig()


def test_config_is_frozen() -> None:
    c = ScalerConfig()
    with pytest.raises(ValidationError):
        c.scale_down_utilization_threshold = 0.7  # type: ignore[misc]


def test_documented_default_file_matches_the_model_defaults() -> None:
    path = REPO / "config" / "default.yaml"
    data = load_config_file(path)
    assert {k.replace("-", "_") for k in data} == set(ScalerConfig.model_fields)
    assert ScalerConfig.from_mapping(data) == ScalerConfig()


# --- durations and keys -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("10m", 600.0),
        ("1h30m", 5400.0),
        ("500ms", 0.5),
        ("2m30s", 150.0),
        ("1.5h", 5400.0),
        ("45", 45.0),
        (45, 45.0),
        (0.25, 0.25),
    ],
)
def test_go_durations(value: Any, seconds: float) -> None:
    c = ScalerConfig.from_mapping({"scale-down-unneeded-time": value, "max-metrics-age": value})
    assert c.scale_down_unneeded_time == seconds
    assert c.max_metrics_age == seconds


def test_every_duration_field_accepts_go_strings() -> None:
    c = ScalerConfig.from_mapping(
        {
            "max-metrics-age": "1m",
            "scale-down-unneeded-time": "2m",
            "scale-down-unready-time": "3m",
            "unremovable-node-recheck-timeout": "4m",
            "blocking-system-pod-disruption-timeout": "5m",
        }
    )
    assert (
        c.max_metrics_age,
        c.scale_down_unneeded_time,
        c.scale_down_unready_time,
        c.unremovable_node_recheck_timeout,
        c.blocking_system_pod_disruption_timeout,
    ) == (60.0, 120.0, 180.0, 240.0, 300.0)


def test_dash_and_underscore_keys() -> None:
    c = ScalerConfig.from_mapping(
        {
            "scale-down-utilization-threshold": 0.6,
            "skip_nodes_with_system_pods": False,
            "skip-nodes-with-local-storage": "false",
            "min-replica-count": 2,
            "expendable-pods-priority-cutoff": -100,
            "utilization-source": "requests",
            "target-cpu-usage": 0.9,
            "target-memory-usage": 1.0,
        }
    )
    assert c.scale_down_utilization_threshold == 0.6
    assert c.skip_nodes_with_system_pods is False
    assert c.skip_nodes_with_local_storage is False
    assert c.min_replica_count == 2
    assert c.expendable_pods_priority_cutoff == -100
    assert c.utilization_source == "requests"
    assert (c.target_cpu_usage, c.target_memory_usage) == (0.9, 1.0)


def test_cluster_autoscalers_misspelled_key_is_accepted() -> None:
    c = ScalerConfig.from_mapping({"blocking-system-pod-distruption-timeout": "30m"})
    assert c.blocking_system_pod_disruption_timeout == 1800.0
    c = ScalerConfig.from_mapping({"blocking_system_pod_distruption_timeout": 60})
    assert c.blocking_system_pod_disruption_timeout == 60.0


def test_plugin_lists_from_comma_separated_strings() -> None:
    c = ScalerConfig.from_mapping(
        {"filter-plugins": "TargetUsage, Other ,", "score-plugins": "MostAllocated"}
    )
    assert c.filter_plugins == ("TargetUsage", "Other")
    assert c.score_plugins == ("MostAllocated",)
    assert ScalerConfig.from_mapping({"filter-plugins": ""}).filter_plugins == ()
    assert ScalerConfig.from_mapping({"score-plugins": ["A", "B"]}).score_plugins == ("A", "B")


# --- errors -------------------------------------------------------------------------------------


def config_error(values: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as e:
        ScalerConfig.from_mapping(values)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_out_of_range_threshold_names_key_and_value() -> None:
    msg = config_error({"scale-down-utilization-threshold": 1.5})
    assert msg.startswith("invalid value 1.5 for scale-down-utilization-threshold: ")
    assert "less than or equal to 1" in msg


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("scale-down-utilization-threshold", -0.1),
        ("target-cpu-usage", 0),
        ("target-memory-usage", 1.01),
        ("max-metrics-age", "0s"),
        ("scale-down-unneeded-time", -1),
        ("min-replica-count", -1),
        ("min-replica-count", 2.5),
        ("max-scale-down-parallelism", 0),
        ("max-drain-parallelism", 0),
        ("utilization-source", "guess"),
        ("skip-nodes-with-system-pods", "perhaps"),
    ],
)
def test_invalid_values_name_key_and_value(key: str, value: Any) -> None:
    assert config_error({key: value}).startswith(f"invalid value {value!r} for {key}: ")


@pytest.mark.parametrize("value", ["10 minutes", "1h 30m", "-5m", "forever", "nan", "inf", ""])
def test_invalid_durations_name_key_and_value(value: str) -> None:
    msg = config_error({"scale-down-unneeded-time": value})
    assert msg.startswith("invalid value ")
    assert "for scale-down-unneeded-time: " in msg
    assert repr(value) in msg


def test_unknown_key() -> None:
    assert config_error({"scale-down-delay-after-ad": "10m"}) == (
        "unknown configuration key 'scale-down-delay-after-ad'"
    )
    assert config_error({"bogus_key": 1}) == "unknown configuration key 'bogus-key'"


# --- --nodes ------------------------------------------------------------------------------------


def test_node_group_spec() -> None:
    assert parse_node_group_spec("1:10:default-pool") == NodeGroupSpec(
        min_size=1, max_size=10, name="default-pool"
    )
    assert parse_node_group_spec(" 0:0:highmem-pool ") == NodeGroupSpec(
        min_size=0, max_size=0, name="highmem-pool"
    )
    assert parse_node_group_spec("3:3:p") == NodeGroupSpec(min_size=3, max_size=3, name="p")


def test_node_group_spec_mig_url_keeps_the_last_segment() -> None:
    url = "https://www.googleapis.com/compute/v1/projects/acme/zones/us-central1-a/instanceGroups/gke-prod-default-pool-3e629681-grp"
    assert parse_node_group_spec(f"1:10:{url}") == NodeGroupSpec(
        min_size=1, max_size=10, name="gke-prod-default-pool-3e629681-grp"
    )
    assert parse_node_group_spec("2:5:https://example.com/groups/pool-b/").name == "pool-b"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("5:1:x", "--nodes: min 5 is greater than max 1 in '5:1:x'"),
        ("a:b:c", "--nodes: expected MIN:MAX:NAME, got 'a:b:c'"),
        ("1:10", "--nodes: expected MIN:MAX:NAME, got '1:10'"),
        ("1:10:", "--nodes: expected MIN:MAX:NAME, got '1:10:'"),
        ("-1:10:x", "--nodes: expected MIN:MAX:NAME, got '-1:10:x'"),
        ("1.5:10:x", "--nodes: expected MIN:MAX:NAME, got '1.5:10:x'"),
        ("default-pool", "--nodes: expected MIN:MAX:NAME, got 'default-pool'"),
        ("1:3:/", "--nodes: empty node group name in '1:3:/'"),
    ],
)
def test_bad_node_group_specs(spec: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_node_group_spec(spec)
    assert str(e.value) == message


def test_nodes_in_from_mapping_and_lookup() -> None:
    c = ScalerConfig.from_mapping({"nodes": ["1:10:default-pool", "0:3:highmem-pool"]})
    assert c.nodes == (
        NodeGroupSpec(min_size=1, max_size=10, name="default-pool"),
        NodeGroupSpec(min_size=0, max_size=3, name="highmem-pool"),
    )
    assert c.node_group_limits("highmem-pool") == NodeGroupSpec(min_size=0, max_size=3, name="highmem-pool")
    assert c.node_group_limits("other") is None


def test_nodes_as_mappings() -> None:
    c = ScalerConfig.from_mapping({"nodes": [{"min_size": 2, "max_size": 4, "name": "p"}]})
    assert c.nodes == (NodeGroupSpec(min_size=2, max_size=4, name="p"),)


def test_bad_nodes_in_from_mapping_is_a_config_error() -> None:
    msg = config_error({"nodes": ["5:1:x"]})
    assert msg.startswith("invalid value ['5:1:x'] for nodes: ")
    assert "--nodes: min 5 is greater than max 1 in '5:1:x'" in msg
    msg = config_error({"nodes": ["a:b:c"]})
    assert "--nodes: expected MIN:MAX:NAME, got 'a:b:c'" in msg


# --- config files -------------------------------------------------------------------------------


def test_load_config_file(tmp_path: Path) -> None:
    f = tmp_path / "scaler.yaml"
    f.write_text(
        "scale-down-utilization-threshold: 0.6\n"
        "scale-down-unneeded-time: 5m\n"
        "blocking-system-pod-distruption-timeout: 2h\n"
        "nodes:\n- 1:10:default-pool\n"
    )
    data = load_config_file(f)
    assert data == {
        "scale-down-utilization-threshold": 0.6,
        "scale-down-unneeded-time": "5m",
        "blocking-system-pod-distruption-timeout": "2h",
        "nodes": ["1:10:default-pool"],
    }
    c = ScalerConfig.from_mapping(data)
    assert (c.scale_down_utilization_threshold, c.scale_down_unneeded_time) == (0.6, 300.0)
    assert c.blocking_system_pod_disruption_timeout == 7200.0
    assert c.nodes == (NodeGroupSpec(min_size=1, max_size=10, name="default-pool"),)


def test_empty_config_file(tmp_path: Path) -> None:
    f = tmp_path / "empty.yaml"
    f.write_text("# nothing\n")
    assert load_config_file(f) == {}


def test_config_file_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(ConfigError, match=f"^{re.escape(str(missing))}: cannot read config file: "):
        load_config_file(missing)
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match=f"^{re.escape(str(bad))}: invalid YAML: "):
        load_config_file(bad)
    seq = tmp_path / "seq.yaml"
    seq.write_text("- a\n- b\n")
    with pytest.raises(ConfigError) as e:
        load_config_file(seq)
    assert str(e.value) == f"{seq}: config file must be a mapping of keys to values"


def test_error_names_the_value_and_key_as_given() -> None:
    # the value before a duration is converted, and CA's spelling of the key when that was used
    assert config_error({"blocking-system-pod-distruption-timeout": "-1h"}).startswith(
        "invalid value '-1h' for blocking-system-pod-distruption-timeout: "
    )
    assert config_error({"max-metrics-age": "0s"}) == (
        "invalid value '0s' for max-metrics-age: Input should be greater than 0"
    )

