"""API JSON -> records: pod request computation (resourcehelper.PodRequests), QoS class
(ComputePodQOS), the other kinds, and one-line ObjectError messages for malformed objects."""

from __future__ import annotations

from typing import Any

import pytest

from scaler.model.decode import parse_node, parse_object, parse_pod
from scaler.model.parse import ObjectError, parse_resources, parse_time
from scaler.model.records import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerRef,
    QoSClass,
    Resources,
    Taint,
    Toleration,
    Volume,
)

Ki, Mi, Gi = 2**10, 2**20, 2**30
# Every kind goes through the one converter (the object's kind picks the record).
parse_controller = parse_node_metrics = parse_pdb = parse_pod_metrics = parse_pv = parse_pvc = parse_namespace = (
    parse_object
)
T0 = 1793800800.0  # 2026-11-04T14:00:00Z


def ctr(
    name: str = "c",
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    restart_policy: str | None = None,
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "img"}
    res: dict[str, Any] = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    c["resources"] = res
    if restart_policy is not None:
        c["restartPolicy"] = restart_policy
    return c


def pod(
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    name: str = "web-0",
    namespace: str = "shop",
    **spec: Any,
) -> dict[str, Any]:
    s: dict[str, Any] = {"containers": containers if containers is not None else [ctr()], **spec}
    if init is not None:
        s["initContainers"] = init
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": "uid-1"},
        "spec": s,
        "status": {"phase": "Running"},
    }


def node(name: str = "n1", **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": "node-uid",
            "creationTimestamp": "2026-11-04T14:00:00Z",
            "labels": {
                "cloud.google.com/gke-nodepool": "default-pool",
                "topology.kubernetes.io/zone": "us-central1-a",
            },
        },
        "spec": {"providerID": f"gce://proj/us-central1-a/{name}"},
        "status": {
            "allocatable": {
                "cpu": "3920m",
                "memory": "12880756Ki",
                "ephemeral-storage": "47060071478",
                "pods": "110",
                "hugepages-2Mi": "0",
            },
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-04T13:00:00Z"},
            ],
        },
    }
    obj.update(extra)
    return obj


def requests_of(obj: dict[str, Any]) -> Resources:
    return parse_pod(obj).requests


# --- pod requests -------------------------------------------------------------------------------


def test_plain_containers_are_summed() -> None:
    p = pod(
        [
            ctr("a", {"cpu": "250m", "memory": "64Mi"}),
            ctr("b", {"cpu": "500m", "memory": "128Mi", "ephemeral-storage": "1Gi"}),
        ]
    )
    assert requests_of(p) == Resources(750, 192 * Mi, 1 * Gi, 1, {})


def test_container_without_resources_requests_nothing_but_the_pod_slot() -> None:
    assert requests_of(pod([{"name": "x", "image": "i"}])) == Resources(0, 0, 0, 1, {})
    assert requests_of(pod([])) == Resources(0, 0, 0, 1, {})


def test_init_container_bigger_than_the_sum_wins_per_resource() -> None:
    p = pod(
        [ctr("a", {"cpu": "100m", "memory": "64Mi"}), ctr("b", {"cpu": "100m", "memory": "64Mi"})],
        init=[ctr("migrate", {"cpu": "2", "memory": "32Mi"})],
    )
    # cpu from the init container, memory from the containers' sum
    assert requests_of(p) == Resources(2000, 128 * Mi, 0, 1, {})


def test_init_containers_take_the_max_not_the_sum() -> None:
    p = pod(
        [ctr("a", {"cpu": "100m"})],
        init=[ctr("i1", {"cpu": "700m"}), ctr("i2", {"cpu": "600m"})],
    )
    assert requests_of(p).cpu_millicores == 700


def test_sidecar_is_added_to_steady_state_and_to_later_init_containers() -> None:
    # Kubernetes docs ("Sidecar containers", resource sharing): a restartable init container
    # runs alongside the app containers and alongside every init container started after it.
    p = pod(
        [ctr("app", {"cpu": "3"})],
        init=[ctr("sidecar", {"cpu": "1"}, restart_policy="Always"), ctr("init", {"cpu": "4"})],
    )
    # steady state 3 + 1 = 4; the init container runs with the sidecar: 4 + 1 = 5
    assert requests_of(p).cpu_millicores == 5000


def test_sidecar_adds_to_the_steady_state() -> None:
    p = pod(
        [ctr("app", {"cpu": "3", "memory": "1Gi"})],
        init=[
            ctr("sidecar", {"cpu": "1", "memory": "256Mi"}, restart_policy="Always"),
            ctr("init", {"cpu": "2"}),
        ],
    )
    # steady state 3 + 1 = 4 cpu, 1Gi + 256Mi; the init container needs only 2 + 1 = 3 cpu
    assert requests_of(p) == Resources(4000, 1280 * Mi, 0, 1, {})


def test_sidecar_started_after_an_init_container_does_not_add_to_it() -> None:
    p = pod(
        [ctr("app", {"cpu": "3"})],
        init=[ctr("init", {"cpu": "4"}), ctr("sidecar", {"cpu": "1"}, restart_policy="Always")],
    )
    # init alone 4; steady state 3 + 1 = 4
    assert requests_of(p).cpu_millicores == 4000


def test_several_sidecars_and_init_containers() -> None:
    p = pod(
        [ctr("app", {"cpu": "300m", "memory": "512Mi"})],
        init=[
            ctr("log", {"cpu": "100m", "memory": "64Mi"}, restart_policy="Always"),
            ctr("migrate", {"cpu": "700m", "memory": "256Mi"}),
            ctr("proxy", {"cpu": "200m", "memory": "128Mi"}, restart_policy="Always"),
            ctr("warm", {"cpu": "150m", "memory": "600Mi"}),
        ],
    )
    # steady: 300+100+200 = 600m, 512+64+128 = 704Mi
    # migrate: 700+100 = 800m, 256+64 = 320Mi;  warm: 150+300 = 450m, 600+64+128 = 792Mi
    assert requests_of(p) == Resources(800, 792 * Mi, 0, 1, {})


def test_init_container_with_restart_policy_other_than_always_is_not_a_sidecar() -> None:
    p = pod(
        [ctr("app", {"cpu": "1"})],
        init=[ctr("i", {"cpu": "500m"}, restart_policy="OnFailure")],
    )
    assert requests_of(p).cpu_millicores == 1000


def test_overhead_is_added_after_the_max() -> None:
    p = pod(
        [ctr("a", {"cpu": "100m", "memory": "64Mi"})],
        init=[ctr("i", {"cpu": "1", "memory": "1Mi"})],
        overhead={"cpu": "250m", "memory": "120Mi"},
    )
    assert requests_of(p) == Resources(1250, 184 * Mi, 0, 1, {})


def test_limits_only_container_requests_its_limits() -> None:
    p = pod([ctr("a", limits={"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"})])
    r = parse_pod(p)
    assert r.requests == Resources(1000, 1 * Gi, 0, 1, {"nvidia.com/gpu": 1})
    assert r.qos_class is QoSClass.GUARANTEED


def test_request_below_limit_is_kept() -> None:
    p = pod([ctr("a", {"cpu": "100m"}, {"cpu": "2", "memory": "1Gi"})])
    # cpu request stays 100m; memory request defaults to the 1Gi limit
    assert requests_of(p) == Resources(100, 1 * Gi, 0, 1, {})


def test_pod_level_requests_win_for_cpu_and_memory_only() -> None:
    p = pod(
        [
            ctr("a", {"cpu": "500m", "memory": "256Mi", "ephemeral-storage": "1Gi", "nvidia.com/gpu": "1"}),
            ctr("b", {"cpu": "500m", "memory": "256Mi"}),
        ],
        resources={"requests": {"cpu": "2", "memory": "1Gi", "ephemeral-storage": "5Gi"}},
        overhead={"cpu": "100m", "memory": "10Mi"},
    )
    # pod-level cpu/memory replace the containers' sum, overhead is added on top; ephemeral
    # storage and extended resources keep the containers' values
    assert requests_of(p) == Resources(2100, 1034 * Mi, 1 * Gi, 1, {"nvidia.com/gpu": 1})


def test_pod_level_cpu_only_keeps_container_memory() -> None:
    p = pod(
        [ctr("a", {"cpu": "500m", "memory": "256Mi"})],
        resources={"requests": {"cpu": "1500m"}},
    )
    assert requests_of(p) == Resources(1500, 256 * Mi, 0, 1, {})


def test_pod_level_limit_defaults_the_request_when_no_container_requests_it() -> None:
    p = pod(
        [ctr("a", {"cpu": "500m"}), ctr("b")],
        resources={"limits": {"cpu": "4", "memory": "2Gi"}},
    )
    # cpu: a container requests it, so the containers' aggregate (500m) stands;
    # memory: no container requests it, so the pod-level limit becomes the request
    r = parse_pod(p)
    assert r.requests == Resources(500, 2 * Gi, 0, 1, {})
    assert r.qos_class is QoSClass.BURSTABLE


def test_pod_level_resources_decide_the_qos_class() -> None:
    p = pod(
        [ctr("a", {"cpu": "100m"}), ctr("b")],
        resources={"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
    )
    r = parse_pod(p)
    assert r.requests == Resources(1000, 1 * Gi, 0, 1, {})
    assert r.qos_class is QoSClass.GUARANTEED


def test_pod_level_limits_only_is_guaranteed() -> None:
    p = pod([ctr("a"), ctr("b")], resources={"limits": {"cpu": "2", "memory": "4Gi"}})
    r = parse_pod(p)
    assert r.requests == Resources(2000, 4 * Gi, 0, 1, {})
    assert r.qos_class is QoSClass.GUARANTEED


def test_extended_resources_are_summed_maxed_and_zero_dropped() -> None:
    p = pod(
        [
            ctr("a", limits={"nvidia.com/gpu": "2"}),
            ctr("b", {"nvidia.com/gpu": "1", "hugepages-2Mi": "4Mi", "example.com/foo": "0"}),
        ],
        init=[ctr("i", limits={"nvidia.com/gpu": "4"})],
    )
    assert requests_of(p) == Resources(0, 0, 0, 1, {"nvidia.com/gpu": 4, "hugepages-2Mi": 4 * Mi})


def test_yaml_numbers_are_accepted_as_quantities() -> None:
    p = pod([ctr("a", {"cpu": 0.5, "memory": 1073741824}), ctr("b", {"cpu": 2})])
    assert requests_of(p) == Resources(2500, 1 * Gi, 0, 1, {})


# --- QoS class ----------------------------------------------------------------------------------


def qos_of(obj: dict[str, Any]) -> QoSClass:
    return parse_pod(obj).qos_class


def test_best_effort_without_any_resources() -> None:
    assert qos_of(pod([ctr("a"), {"name": "b", "image": "i"}])) is QoSClass.BEST_EFFORT


@pytest.mark.parametrize(
    "resources",
    [
        {"requests": {"ephemeral-storage": "1Gi"}},
        {"limits": {"nvidia.com/gpu": "1"}},
        {"requests": {"cpu": "0", "memory": "0"}},
        {"requests": {"cpu": "0m"}, "limits": {"example.com/foo": "3"}},
    ],
)
def test_best_effort_when_no_cpu_or_memory_above_zero(resources: dict[str, Any]) -> None:
    # ComputePodQOS only looks at cpu and memory, and only at quantities above zero.
    c = {"name": "a", "image": "i", "resources": resources}
    assert qos_of(pod([c])) is QoSClass.BEST_EFFORT


def test_burstable_when_requests_below_limits() -> None:
    p = pod([ctr("a", {"cpu": "100m", "memory": "64Mi"}, {"cpu": "200m", "memory": "64Mi"})])
    assert qos_of(p) is QoSClass.BURSTABLE


def test_burstable_with_requests_only() -> None:
    assert qos_of(pod([ctr("a", {"cpu": "100m"})])) is QoSClass.BURSTABLE


def test_guaranteed_when_every_container_limits_cpu_and_memory_at_its_request() -> None:
    p = pod(
        [
            ctr("a", {"cpu": "1", "memory": "1Gi"}, {"cpu": "1000m", "memory": "1024Mi"}),
            ctr("b", limits={"cpu": "500m", "memory": "128Mi", "nvidia.com/gpu": "1"}),
        ],
        init=[ctr("i", limits={"cpu": "2", "memory": "2Gi"})],
    )
    assert qos_of(p) is QoSClass.GUARANTEED


def test_one_container_without_limits_makes_the_pod_burstable() -> None:
    p = pod(
        [ctr("a", limits={"cpu": "1", "memory": "1Gi"}), ctr("b", {"cpu": "100m", "memory": "1Mi"})],
    )
    assert qos_of(p) is QoSClass.BURSTABLE


def test_init_container_without_limits_makes_the_pod_burstable() -> None:
    p = pod([ctr("a", limits={"cpu": "1", "memory": "1Gi"})], init=[ctr("i", {"cpu": "1m"})])
    assert qos_of(p) is QoSClass.BURSTABLE


def test_memory_limit_missing_makes_the_pod_burstable() -> None:
    assert qos_of(pod([ctr("a", limits={"cpu": "1"})])) is QoSClass.BURSTABLE


def test_qos_compares_exact_quantities_not_rounded_units() -> None:
    # 1.5m and 2m both round up to 2 millicores, but they are different quantities.
    p = pod([ctr("a", {"cpu": "1.5m", "memory": "1Gi"}, {"cpu": "2m", "memory": "1Gi"})])
    assert qos_of(p) is QoSClass.BURSTABLE


def test_status_qos_class_wins_over_the_computed_one() -> None:
    p = pod([ctr("a")])
    p["status"]["qosClass"] = "Guaranteed"
    assert qos_of(p) is QoSClass.GUARANTEED


def test_unknown_status_qos_class_is_an_error() -> None:
    p = pod([ctr("a")])
    p["status"]["qosClass"] = "Platinum"
    with pytest.raises(ObjectError, match=r"^Pod shop/web-0: unknown qosClass 'Platinum' \(field 'status.qosClass'\)$"):
        parse_pod(p)


# --- the rest of a pod --------------------------------------------------------------------------


def test_full_pod_fields() -> None:
    p = pod(
        [
            {
                "name": "web",
                "image": "i",
                "ports": [
                    {"containerPort": 80, "hostPort": 8080},
                    {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"},
                    {"containerPort": 9090},
                ],
            }
        ],
        nodeName="n1",
        priority=-20,
        restartPolicy="Never",
        terminationGracePeriodSeconds=5,
        nodeSelector={"disk": "ssd"},
        tolerations=[
            {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
            {"operator": "Exists"},
        ],
        volumes=[
            {"name": "scratch", "emptyDir": {}},
            {"name": "shm", "emptyDir": {"medium": "Memory"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
            {"name": "cfg", "configMap": {"name": "cfg"}},
        ],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["3"]}],
                            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
                        }
                    ]
                }
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                    {
                        "labelSelector": {"matchLabels": {"app": "db"}},
                        "topologyKey": "topology.kubernetes.io/zone",
                        "namespaceSelector": {},
                    },
                ]
            },
        },
        topologySpreadConstraints=[
            {
                "maxSkew": 2,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "minDomains": 3,
                "matchLabelKeys": ["pod-template-hash"],
            }
        ],
    )
    p["metadata"].update(
        {
            "labels": {"app": "web", "tier": "1"},
            "annotations": {"kubernetes.io/config.mirror": "abc"},
            "creationTimestamp": "2026-11-04T14:00:00Z",
            "deletionTimestamp": "2026-11-04T14:00:30.5Z",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Service", "name": "not-controller", "uid": "x"},
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": "web",
                    "uid": "ss",
                    "controller": True,
                },
            ],
        }
    )
    r = parse_pod(p)
    assert (r.namespace, r.name, r.uid, r.node_name, r.key) == ("shop", "web-0", "uid-1", "n1", "shop/web-0")
    assert r.labels == {"app": "web", "tier": "1"}
    assert r.is_mirror is True
    assert r.controller == OwnerRef("StatefulSet", "web", "ss", "apps/v1")
    assert (r.phase, r.priority, r.restart_policy, r.termination_grace_seconds) == (
        "Running",
        -20,
        "Never",
        5,
    )
    assert r.creation_ts == T0
    assert r.deletion_ts == T0 + 30.5
    assert r.node_selector == {"disk": "ssd"}
    assert r.tolerations == (
        Toleration("dedicated", "Equal", "gpu", "NoSchedule"),
        Toleration("", "Exists", "", ""),
    )
    assert r.host_ports == (("TCP", "0.0.0.0", 8080), ("UDP", "10.0.0.1", 53))
    assert r.volumes == (
        Volume("scratch", "emptyDir", "", ""),
        Volume("shm", "emptyDir", "Memory", ""),
        Volume("data", "persistentVolumeClaim", "", "data-web-0"),
        Volume("cfg", "configMap", "", ""),
    )
    assert r.required_node_affinity == (
        NodeSelectorTerm(
            (NodeSelectorRequirement("gen", "Gt", ("3",)),),
            (NodeSelectorRequirement("metadata.name", "In", ("n1",)),),
        ),
    )
    assert r.required_affinity == ()
    assert len(r.required_anti_affinity) == 2
    first, second = r.required_anti_affinity
    assert first.label_selector == LabelSelector({"app": "web"})
    assert (first.topology_key, first.namespaces, first.all_namespaces) == (
        "kubernetes.io/hostname",
        (),
        False,
    )
    assert (second.topology_key, second.all_namespaces) == ("topology.kubernetes.io/zone", True)
    (tsc,) = r.topology_spread
    assert (tsc.max_skew, tsc.topology_key, tsc.when_unsatisfiable) == (
        2,
        "topology.kubernetes.io/zone",
        "ScheduleAnyway",
    )
    assert (tsc.min_domains, tsc.node_affinity_policy, tsc.node_taints_policy) == (3, "Honor", "Ignore")
    assert tsc.match_label_keys == ("pod-template-hash",)
    assert tsc.label_selector == LabelSelector({"app": "web"})


def test_pod_defaults() -> None:
    obj = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}
    r = parse_pod(obj)
    assert (r.namespace, r.uid, r.node_name, r.phase, r.priority) == (
        "default",
        "default/p",
        "",
        "Pending",
        0,
    )
    assert (r.restart_policy, r.termination_grace_seconds, r.creation_ts, r.deletion_ts) == (
        "Always",
        30,
        None,  # unknown age
        None,
    )
    assert r.controller is None
    assert r.required_node_affinity is None
    assert r.qos_class is QoSClass.BEST_EFFORT


def test_pod_affinity_term_without_topology_key_is_an_error() -> None:
    p = pod(
        affinity={
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"a": "b"}}}
                ]
            }
        }
    )
    with pytest.raises(ObjectError, match="Pod shop/web-0: pod affinity term without topologyKey"):
        parse_pod(p)


def test_namespace_selector_and_start_time() -> None:
    term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}
    p = pod(
        affinity={
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {**term, "namespaceSelector": {"matchLabels": {"team": "a"}}, "namespaces": ["ops"]},
                    {**term, "namespaceSelector": {}},
                    term,
                ]
            }
        }
    )
    p["status"]["startTime"] = "2026-11-04T14:00:10Z"
    r = parse_pod(p)
    selected, every, own = r.required_affinity
    assert selected.namespace_selector == LabelSelector({"team": "a"}) and selected.namespaces == ("ops",)
    assert not selected.all_namespaces
    assert every.all_namespaces and every.namespace_selector is None
    assert own.namespace_selector is None and not own.all_namespaces
    assert r.start_ts == parse_time("2026-11-04T14:00:10Z")
    ns = parse_namespace({"kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}})
    assert (ns.name, ns.labels) == ("team-a", {"team": "a"})
    with pytest.raises(ObjectError, match="Namespace <unnamed>"):
        parse_namespace({"kind": "Namespace", "metadata": {}})


# --- parse errors -------------------------------------------------------------------------------


def assert_one_line(e: pytest.ExceptionInfo[ObjectError]) -> str:
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_pod_missing_metadata_name() -> None:
    obj = pod()
    del obj["metadata"]["name"]
    with pytest.raises(ObjectError) as e:
        parse_pod(obj)
    assert assert_one_line(e) == "Pod shop/<unnamed>: missing required field 'metadata.name'"


def test_pod_without_metadata_at_all() -> None:
    with pytest.raises(ObjectError) as e:
        parse_pod({"kind": "Pod", "spec": {}})
    assert assert_one_line(e) == "Pod <unnamed>: missing required field 'metadata.name'"


def test_node_missing_status_allocatable() -> None:
    obj = node("n9")
    del obj["status"]["allocatable"]
    with pytest.raises(ObjectError) as e:
        parse_node(obj)
    assert assert_one_line(e) == "Node n9: missing required field 'status.allocatable'"


def test_malformed_quantity_in_a_container_names_pod_container_and_value() -> None:
    p = pod([ctr("ok", {"cpu": "1"}), ctr("app", {"cpu": "100m", "memory": "1.2.3"})])
    with pytest.raises(ObjectError) as e:
        parse_pod(p)
    assert assert_one_line(e) == "Pod shop/web-0: container 'app' resources: invalid quantity '1.2.3'"


def test_malformed_limit_is_reported_even_when_a_request_is_set() -> None:
    p = pod([ctr("app", {"cpu": "100m"}, {"cpu": "lots"})])
    with pytest.raises(ObjectError) as e:
        parse_pod(p)
    assert assert_one_line(e) == "Pod shop/web-0: container 'app' resources: invalid quantity 'lots'"


def test_negative_request_is_rejected() -> None:
    p = pod([ctr("app", {"memory": "-1Gi"})])
    with pytest.raises(ObjectError) as e:
        parse_pod(p)
    assert assert_one_line(e) == "Pod shop/web-0: container 'app' resources: negative byte quantity '-1Gi'"


def test_malformed_overhead_and_pod_level_quantities() -> None:
    with pytest.raises(ObjectError, match=r"^Pod shop/web-0: spec.overhead: invalid quantity 'x'$"):
        parse_pod(pod(overhead={"cpu": "x"}))
    with pytest.raises(
        ObjectError, match=r"^Pod shop/web-0: spec.resources.requests: invalid quantity '1 Gi'$"
    ):
        parse_pod(pod(resources={"requests": {"memory": "1 Gi"}}))
    with pytest.raises(ObjectError, match=r"^Pod shop/web-0: spec.resources.limits: invalid quantity 'y'$"):
        parse_pod(pod(resources={"limits": {"cpu": "y"}}))


def test_bad_timestamp_names_the_value() -> None:
    p = pod()
    p["metadata"]["creationTimestamp"] = "yesterday at noon"
    with pytest.raises(ObjectError) as e:
        parse_pod(p)
    assert (
        assert_one_line(e)
        == "Pod shop/web-0: field 'metadata.creationTimestamp' is not a timestamp: 'yesterday at noon'"
    )


def test_non_integer_priority_names_the_value() -> None:
    for bad in ("high", 1.5, True):
        p = pod(priority=bad)
        with pytest.raises(ObjectError) as e:
            parse_pod(p)
        assert assert_one_line(e) == f"Pod shop/web-0: field 'spec.priority' must be an integer, got {bad!r}"


def test_multi_line_value_still_gives_a_one_line_message() -> None:
    p = pod(priority="1\n2")
    with pytest.raises(ObjectError) as e:
        parse_pod(p)
    assert assert_one_line(e) == "Pod shop/web-0: field 'spec.priority' must be an integer, got '1\\n2'"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("containers", "nginx", "Pod shop/web-0: field 'spec.containers' must be a list, got 'nginx'"),
        ("containers", ["nginx"], "Pod shop/web-0: field 'spec.containers[0]' must be an object, got 'nginx'"),
        ("tolerations", [None], "Pod shop/web-0: field 'spec.tolerations[0]' must be an object, got None"),
        ("volumes", [["x"]], "Pod shop/web-0: field 'spec.volumes[0]' must be an object, got ['x']"),
        ("nodeSelector", ["a"], "Pod shop/web-0: field 'spec.nodeSelector' must be an object, got ['a']"),
        (
            "nodeSelector",
            {"disk": 1},
            "Pod shop/web-0: field 'spec.nodeSelector' must map each key to a string, got {'disk': 1}",
        ),
    ],
)
def test_wrongly_shaped_fields_are_object_errors(field: str, value: Any, message: str) -> None:
    p = pod()
    p["spec"][field] = value
    with pytest.raises(ObjectError) as e:
        parse_pod(p)
    assert assert_one_line(e) == message


def test_non_string_namespace_does_not_crash_the_message() -> None:
    obj = {"kind": "Pod", "metadata": {"namespace": 7}, "spec": {}}
    with pytest.raises(ObjectError) as e:
        parse_pod(obj)
    assert assert_one_line(e) == "Pod 7/<unnamed>: field 'metadata.namespace' must be a string, got 7"


def test_unknown_selector_operator() -> None:
    p = pod(
        topologySpreadConstraints=[
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]},
            }
        ]
    )
    with pytest.raises(
        ObjectError,
        match=r"^Pod shop/web-0: unknown operator 'Near' \(field "
        r"'spec.topologySpreadConstraints\[0\].labelSelector.matchExpressions\[0\].operator'\)$",
    ):
        parse_pod(p)


# --- nodes --------------------------------------------------------------------------------------


def test_node_fields() -> None:
    n = parse_node(node("gke-a"))
    assert n.name == "gke-a"
    assert n.allocatable == Resources(3920, 12880756 * Ki, 47060071478, 110, {"hugepages-2Mi": 0})
    assert (n.node_group, n.zone, n.uid) == ("default-pool", "us-central1-a", "node-uid")
    assert n.provider_id == "gce://proj/us-central1-a/gke-a"
    assert (n.ready, n.ready_transition_ts, n.creation_ts) == (True, T0 - 3600, T0)
    assert (n.unschedulable, n.taints, n.to_be_deleted_ts) == (False, (), None)


def test_node_not_ready_unknown_and_without_conditions() -> None:
    obj = node()
    obj["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    n = parse_node(obj)
    assert (n.ready, n.ready_transition_ts) == (False, 0.0)
    del obj["status"]["conditions"]
    assert parse_node(obj).ready is False


def test_node_taints_and_to_be_deleted() -> None:
    obj = node()
    obj["spec"]["unschedulable"] = True
    obj["spec"]["taints"] = [
        {"key": "ToBeDeletedByClusterAutoscaler", "value": "1793800000", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "gpu", "effect": "NoExecute"},
        {"key": "plain"},
    ]
    n = parse_node(obj)
    assert n.unschedulable is True
    assert n.taints == (
        Taint("ToBeDeletedByClusterAutoscaler", "1793800000", "NoSchedule"),
        Taint("dedicated", "gpu", "NoExecute"),
        Taint("plain", "", "NoSchedule"),
    )
    assert n.to_be_deleted_ts == 1793800000.0


def test_to_be_deleted_taint_without_a_number_is_time_zero() -> None:
    obj = node()
    obj["spec"]["taints"] = [{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}]
    assert parse_node(obj).to_be_deleted_ts == 0.0


def test_taint_without_key_is_an_error() -> None:
    obj = node("n2")
    obj["spec"]["taints"] = [{"effect": "NoSchedule"}]
    with pytest.raises(ObjectError, match=r"^Node n2: taint without key"):
        parse_node(obj)


def test_node_with_bad_allocatable_quantity() -> None:
    obj = node("n3")
    obj["status"]["allocatable"]["memory"] = "12GB"
    with pytest.raises(ObjectError) as e:
        parse_node(obj)
    assert assert_one_line(e) == "Node n3: status.allocatable: invalid quantity '12GB'"


# --- metrics ------------------------------------------------------------------------------------


def test_node_metrics() -> None:
    m = parse_node_metrics(
        {
            "kind": "NodeMetrics",
            "metadata": {"name": "n1"},
            "timestamp": "2026-11-04T13:59:48Z",
            "window": "30s",
            "usage": {"cpu": "1083666664n", "memory": "4649246Ki"},
        }
    )
    assert (m.name, m.timestamp, m.window_seconds) == ("n1", T0 - 12, 30.0)
    assert (m.cpu_millicores, m.memory_bytes) == (1084, 4649246 * Ki)


def test_node_metrics_errors() -> None:
    base = {"kind": "NodeMetrics", "metadata": {"name": "n1"}, "timestamp": "2026-11-04T13:59:48Z"}
    with pytest.raises(ObjectError, match=r"^NodeMetrics n1: usage must have cpu and memory"):
        parse_node_metrics({**base, "usage": {"cpu": "1"}})
    with pytest.raises(ObjectError, match=r"^NodeMetrics n1: usage: invalid quantity 'lots'$"):
        parse_node_metrics({**base, "usage": {"cpu": "lots", "memory": "1"}})
    with pytest.raises(ObjectError, match=r"^NodeMetrics n1: invalid window '30 seconds'$"):
        parse_node_metrics({**base, "window": "30 seconds", "usage": {"cpu": "1", "memory": "1"}})
    with pytest.raises(ObjectError, match=r"^NodeMetrics n1: missing required field 'timestamp'$"):
        parse_node_metrics(
            {"kind": "NodeMetrics", "metadata": {"name": "n1"}, "usage": {"cpu": "1", "memory": "1"}}
        )


def test_pod_metrics_sum_containers() -> None:
    m = parse_pod_metrics(
        {
            "kind": "PodMetrics",
            "metadata": {"name": "web-0", "namespace": "shop"},
            "timestamp": "2026-11-04T13:59:48Z",
            "window": "1m30s",
            "containers": [
                {"name": "a", "usage": {"cpu": "1500000n", "memory": "10Mi"}},
                {"name": "b", "usage": {"cpu": "2m", "memory": "5Mi"}},
            ],
        }
    )
    assert (m.namespace, m.name, m.timestamp, m.window_seconds) == ("shop", "web-0", T0 - 12, 90.0)
    assert (m.cpu_millicores, m.memory_bytes) == (4, 15 * Mi)


# --- PDBs, controllers, volumes -----------------------------------------------------------------


def test_pdb() -> None:
    b = parse_pdb(
        {
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "selector": {
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
                }
            },
            "status": {"disruptionsAllowed": 2},
        }
    )
    assert (b.namespace, b.name, b.disruptions_allowed) == ("shop", "web", 2)
    assert b.selector == LabelSelector({"app": "web"}, (LabelSelectorRequirement("tier", "In", ("a", "b")),))


def test_pdb_null_selector_and_missing_status() -> None:
    b = parse_pdb({"kind": "PodDisruptionBudget", "metadata": {"name": "x"}, "spec": {}})
    assert (b.namespace, b.selector, b.disruptions_allowed) == ("default", None, 0)
    empty = parse_pdb({"kind": "PodDisruptionBudget", "metadata": {"name": "x"}, "spec": {"selector": {}}})
    assert empty.selector == LabelSelector()


def test_pdb_non_integer_disruptions_allowed() -> None:
    with pytest.raises(ObjectError) as e:
        parse_pdb(
            {
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "x", "namespace": "a"},
                "status": {"disruptionsAllowed": "1"},
            }
        )
    assert (
        assert_one_line(e)
        == "PodDisruptionBudget a/x: field 'status.disruptionsAllowed' must be an integer, got '1'"
    )


@pytest.mark.parametrize(
    ("kind", "spec", "replicas"),
    [
        ("Deployment", {}, 1),
        ("ReplicaSet", {"replicas": 0}, 0),
        ("StatefulSet", {"replicas": 5}, 5),
        ("ReplicationController", {}, 1),
        ("DaemonSet", {}, None),
        ("Job", {"parallelism": 3}, None),
    ],
)
def test_controller_replicas(kind: str, spec: dict[str, Any], replicas: int | None) -> None:
    c = parse_controller(
        {"kind": kind, "metadata": {"name": "w", "namespace": "ns", "uid": "u"}, "spec": spec}
    )
    assert (c.kind, c.namespace, c.name, c.uid, c.replicas) == (kind, "ns", "w", "u", replicas)


def test_controller_owner_and_errors() -> None:
    c = parse_controller(
        {
            "kind": "ReplicaSet",
            "metadata": {
                "name": "web-5d4f",
                "ownerReferences": [{"kind": "Deployment", "name": "web", "uid": "d", "controller": True}],
            },
            "spec": {"replicas": 3},
        }
    )
    assert c.owner == OwnerRef("Deployment", "web", "d", "")
    with pytest.raises(ObjectError) as e:
        parse_controller({"kind": "Deployment", "metadata": {"name": "w"}, "spec": {"replicas": "3"}})
    assert assert_one_line(e) == "Deployment w: field 'spec.replicas' must be an integer, got '3'"
    with pytest.raises(ObjectError, match=r"^unsupported object kind None \(w\); a snapshot holds CronJob, "):
        parse_controller({"metadata": {"name": "w"}})


def test_pv_and_pvc() -> None:
    pv = parse_pv(
        {
            "kind": "PersistentVolume",
            "metadata": {"name": "pv1", "labels": {"topology.kubernetes.io/zone": "z1"}},
            "spec": {
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}
                                ]
                            }
                        ]
                    }
                }
            },
        }
    )
    assert pv.name == "pv1"
    assert pv.labels == {"topology.kubernetes.io/zone": "z1"}
    assert pv.node_affinity == (
        NodeSelectorTerm((NodeSelectorRequirement("topology.kubernetes.io/zone", "In", ("z1",)),)),
    )
    assert parse_pv({"kind": "PersistentVolume", "metadata": {"name": "pv2"}}).node_affinity is None
    pvc = parse_pvc(
        {
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"volumeName": "pv1"},
        }
    )
    assert (pvc.namespace, pvc.name, pvc.volume_name) == ("ns", "c", "pv1")


def test_unknown_node_selector_operator() -> None:
    with pytest.raises(
        ObjectError,
        match=r"^PersistentVolume pv: unknown operator 'Near' "
        r"\(field 'spec.nodeAffinity.required.nodeSelectorTerms\[0\].matchFields\[0\].operator'\)$",
    ):
        parse_pv(
            {
                "kind": "PersistentVolume",
                "metadata": {"name": "pv"},
                "spec": {
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [{"matchFields": [{"key": "k", "operator": "Near"}]}]
                        }
                    }
                },
            }
        )


def test_label_selector_bad_shape() -> None:
    obj = {"kind": "PodDisruptionBudget", "metadata": {"name": "x", "namespace": "a"}, "spec": {"selector": "app=web"}}
    with pytest.raises(
        ObjectError, match=r"^PodDisruptionBudget a/x: field 'spec.selector' must be an object, got 'app=web'$"
    ):
        parse_pdb(obj)


def test_parse_resources_skips_storage_and_keeps_extended() -> None:
    r = parse_resources(
        {"cpu": "2", "storage": "garbage-ignored", "pods": "8", "example.com/dongle": "3"}, "X x", "f"
    )
    assert r == Resources(2000, 0, 0, 8, {"example.com/dongle": 3})


# --- times and durations ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-04T14:00:00Z", T0),
        ("2026-11-04T14:00:00z", T0),
        ("2026-11-04T14:00:00+00:00", T0),
        ("2026-11-04T16:00:00+02:00", T0),
        ("2026-11-04T14:00:00.250000Z", T0 + 0.25),
        ("2026-11-04T14:00:00.123456789Z", T0 + 0.123456),
        ("2026-11-04T14:00:00", T0),
    ],
)
def test_parse_time(text: str, expected: float) -> None:
    assert parse_time(text) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("value", ["", "2026-13-01T00:00:00Z", "noon", "1793800800", 1793800800, None])
def test_parse_time_rejects(value: Any) -> None:
    with pytest.raises(ObjectError) as e:
        parse_time(value, "ts", "Pod p")
    assert assert_one_line(e) == f"Pod p: field 'ts' is not a timestamp: {value!r}"
