"""The msgspec decoders give the records the two-stage parser gave (property tests).

``tests/legacy_parse.py`` is the dict-based parser as it was before the decoders replaced it
(orjson -> dicts -> ``scaler/model/parse.py``), frozen here as the reference. Hypothesis builds API
objects of every kind; each one goes through the new paths (JSON bytes ->
:func:`scaler.model.decode.decode_object`, a List of them -> ``records_of_document``, and the
plain-dict path :func:`scaler.model.parse.parse_object`) and must give the legacy record, or fail
where the legacy parser failed.
"""

from __future__ import annotations

import json
from typing import Any

import legacy_parse as legacy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaler.model.decode import decode_document, decode_list, decode_object, document_records, parse_object
from scaler.model.parse import ObjectError


def records_of_document(data: bytes, source: str) -> Any:
    return document_records(decode_document(data), source)

QUANTITIES = ["100m", "250m", "1", "2", "1.5", "0", "0m", "1.5m", "64Mi", "1Gi", "512Ki", "1e3", "2k", "1G", "1500000n", "999n", "0n", "4649246Ki", "1.5Ki", "\uff11n"]
BAD_QUANTITIES = ["1.2.3", "12GB", "-1", " 1"]
quantity = st.one_of(
    st.sampled_from(QUANTITIES),
    st.integers(min_value=0, max_value=2**40),
    st.sampled_from([0.5, 1.25, 3.0]),
)
names = st.text("abcdefghij-0123", min_size=1, max_size=12)
label_maps = st.dictionaries(st.sampled_from(["app", "tier", "pod-template-hash", "k"]), names, max_size=3)
resource_names = st.sampled_from(["cpu", "memory", "ephemeral-storage", "nvidia.com/gpu", "hugepages-2Mi", "storage"])
resource_lists = st.dictionaries(resource_names, quantity, max_size=4)
timestamps = st.sampled_from(
    ["2026-11-04T14:00:00Z", "2026-11-04T13:59:48.5Z", "2026-11-04T16:00:00+02:00", "2026-11-04T14:00:00"]
)


def _opt(d: dict[str, Any], key: str, strategy: Any, draw: Any) -> None:
    if draw(st.booleans()):
        d[key] = draw(strategy)


@st.composite
def resources(draw: Any) -> dict[str, Any]:
    r: dict[str, Any] = {}
    _opt(r, "requests", resource_lists, draw)
    _opt(r, "limits", resource_lists, draw)
    return r


@st.composite
def containers(draw: Any, init: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": draw(names), "image": "img"}
    _opt(c, "resources", resources(), draw)
    if init:
        _opt(c, "restartPolicy", st.sampled_from(["Always", "OnFailure"]), draw)
    _opt(
        c,
        "ports",
        st.lists(
            st.fixed_dictionaries(
                {"containerPort": st.integers(1, 9000)},
                optional={
                    "hostPort": st.integers(0, 9000),
                    "protocol": st.sampled_from(["TCP", "UDP"]),
                    "hostIP": st.sampled_from(["10.0.0.1", ""]),
                },
            ),
            max_size=2,
        ),
        draw,
    )
    return c


selector_reqs = st.lists(
    st.fixed_dictionaries(
        {"key": names, "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"])},
        optional={"values": st.lists(names, max_size=2)},
    ),
    max_size=2,
)
label_selectors = st.fixed_dictionaries({}, optional={"matchLabels": label_maps, "matchExpressions": selector_reqs})
node_reqs = st.lists(
    st.fixed_dictionaries(
        {"key": names, "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])},
        optional={"values": st.lists(st.sampled_from(["1", "3", "a"]), max_size=2)},
    ),
    max_size=2,
)
node_selectors = st.fixed_dictionaries(
    {
        "nodeSelectorTerms": st.lists(
            st.fixed_dictionaries({}, optional={"matchExpressions": node_reqs, "matchFields": node_reqs}),
            max_size=2,
        )
    }
)
affinity_terms = st.lists(
    st.fixed_dictionaries(
        {"topologyKey": st.sampled_from(["kubernetes.io/hostname", "topology.kubernetes.io/zone"])},
        # namespaceSelector changed meaning after the legacy parser (Namespace labels are read
        # now): tests/test_parse.py covers it.
        optional={"labelSelector": label_selectors, "namespaces": st.lists(names, max_size=2)},
    ),
    max_size=2,
)
affinities = st.fixed_dictionaries(
    {},
    optional={
        "nodeAffinity": st.fixed_dictionaries(
            {}, optional={"requiredDuringSchedulingIgnoredDuringExecution": node_selectors}
        ),
        "podAffinity": st.fixed_dictionaries(
            {}, optional={"requiredDuringSchedulingIgnoredDuringExecution": affinity_terms}
        ),
        "podAntiAffinity": st.fixed_dictionaries(
            {}, optional={"requiredDuringSchedulingIgnoredDuringExecution": affinity_terms}
        ),
    },
)
spreads = st.lists(
    st.fixed_dictionaries(
        {"topologyKey": st.sampled_from(["zone", "kubernetes.io/hostname"])},
        optional={
            "maxSkew": st.integers(1, 3),
            "whenUnsatisfiable": st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]),
            "labelSelector": label_selectors,
            "minDomains": st.integers(1, 3),
            "nodeAffinityPolicy": st.sampled_from(["Honor", "Ignore"]),
            "nodeTaintsPolicy": st.sampled_from(["Honor", "Ignore"]),
            "matchLabelKeys": st.lists(names, max_size=2),
        },
    ),
    max_size=2,
)
volumes = st.lists(
    st.one_of(
        st.builds(lambda n: {"name": n}, names),
        st.builds(lambda n: {"name": n, "emptyDir": {}}, names),
        st.builds(lambda n, m: {"name": n, "emptyDir": {"medium": m}}, names, st.sampled_from(["Memory", ""])),
        st.builds(lambda n: {"name": n, "hostPath": {"path": "/x"}}, names),
        st.builds(lambda n, c: {"name": n, "persistentVolumeClaim": {"claimName": c}}, names, names),
        st.builds(lambda n: {"name": n, "configMap": {"name": "c"}}, names),
        st.builds(lambda n: {"name": n, "projected": {"sources": []}}, names),
        st.builds(lambda n: {"name": n, "downwardAPI": {"items": []}}, names),
    ),
    max_size=3,
)
owner_refs = st.lists(
    st.fixed_dictionaries(
        {"kind": st.sampled_from(["ReplicaSet", "StatefulSet", "DaemonSet", "Job", "Service"]), "name": names},
        optional={"uid": names, "apiVersion": st.just("apps/v1"), "controller": st.booleans()},
    ),
    max_size=2,
)


@st.composite
def metadata(draw: Any, namespaced: bool = True) -> dict[str, Any]:
    m: dict[str, Any] = {"name": draw(names)}
    if namespaced:
        _opt(m, "namespace", names, draw)
    _opt(m, "uid", names, draw)
    _opt(m, "labels", label_maps, draw)
    _opt(m, "annotations", label_maps, draw)
    _opt(m, "ownerReferences", owner_refs, draw)
    _opt(m, "creationTimestamp", timestamps, draw)
    return m


@st.composite
def pods(draw: Any, bad: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": draw(st.lists(containers(), max_size=3))}
    _opt(spec, "initContainers", st.lists(containers(init=True), max_size=3), draw)
    _opt(spec, "resources", resources(), draw)
    _opt(spec, "overhead", resource_lists, draw)
    _opt(spec, "nodeName", names, draw)
    _opt(spec, "priority", st.integers(-100, 10**9), draw)
    _opt(spec, "terminationGracePeriodSeconds", st.integers(0, 3600), draw)
    _opt(spec, "restartPolicy", st.sampled_from(["Always", "Never", "OnFailure"]), draw)
    _opt(spec, "nodeSelector", label_maps, draw)
    _opt(
        spec,
        "tolerations",
        st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "key": names,
                    "operator": st.sampled_from(["Equal", "Exists"]),
                    "value": names,
                    "effect": st.sampled_from(["NoSchedule", "NoExecute", ""]),
                },
            ),
            max_size=2,
        ),
        draw,
    )
    _opt(spec, "affinity", affinities, draw)
    _opt(spec, "topologySpreadConstraints", spreads, draw)
    _opt(spec, "volumes", volumes, draw)
    meta = draw(metadata())
    _opt(meta, "deletionTimestamp", timestamps, draw)
    status: dict[str, Any] = {}
    _opt(status, "phase", st.sampled_from(["Running", "Pending", "Succeeded", "Failed"]), draw)
    _opt(status, "qosClass", st.sampled_from(["Guaranteed", "Burstable", "BestEffort"]), draw)
    container_status = st.fixed_dictionaries(
        {"name": names, "state": st.sampled_from([{"running": {}}, {"waiting": {"reason": "x"}}, {}])}
    )
    _opt(status, "containerStatuses", st.lists(container_status, max_size=3), draw)
    _opt(status, "initContainerStatuses", st.lists(container_status, max_size=2), draw)
    if bad:
        c = {"name": "bad", "resources": {draw(st.sampled_from(["requests", "limits"])): {"cpu": draw(st.sampled_from(BAD_QUANTITIES))}}}
        spec["containers"] = [*spec["containers"], c]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


@st.composite
def nodes(draw: Any) -> dict[str, Any]:
    alloc = draw(resource_lists.filter(bool))
    spec: dict[str, Any] = {}
    _opt(spec, "unschedulable", st.booleans(), draw)
    _opt(spec, "providerID", names, draw)
    _opt(
        spec,
        "taints",
        st.lists(
            st.fixed_dictionaries(
                {"key": st.sampled_from(["ToBeDeletedByClusterAutoscaler", "dedicated", "x"])},
                optional={"value": st.sampled_from(["1793800000", "gpu", ""]), "effect": st.sampled_from(["NoSchedule", "NoExecute"])},
            ),
            max_size=2,
        ),
        draw,
    )
    conditions = draw(
        st.lists(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["Ready", "MemoryPressure"]), "status": st.sampled_from(["True", "False", "Unknown"])},
                optional={"lastTransitionTime": timestamps},
            ),
            max_size=2,
        )
    )
    return {
        "kind": "Node",
        "metadata": draw(metadata(namespaced=False)),
        "spec": spec,
        "status": {"allocatable": alloc, "conditions": conditions},
    }


usage = st.fixed_dictionaries({"cpu": quantity, "memory": quantity})


@st.composite
def metrics(draw: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": draw(metadata()), "timestamp": draw(timestamps)}
    _opt(obj, "window", st.sampled_from(["30s", "1m30s", "500ms", "15"]), draw)
    if draw(st.booleans()):
        obj["kind"] = "NodeMetrics"
        obj["usage"] = draw(usage)
    else:
        obj["kind"] = "PodMetrics"
        obj["containers"] = draw(st.lists(st.fixed_dictionaries({"name": names, "usage": usage}), max_size=3))
    return obj


@st.composite
def others(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["PodDisruptionBudget", "PersistentVolume", "PersistentVolumeClaim", "ReplicaSet", "ReplicationController", "StatefulSet", "DaemonSet", "Job", "Deployment", "CronJob"]))
    obj: dict[str, Any] = {"kind": kind, "metadata": draw(metadata(namespaced=kind != "PersistentVolume"))}
    spec: dict[str, Any] = {}
    if kind == "PodDisruptionBudget":
        _opt(spec, "selector", label_selectors, draw)
        if draw(st.booleans()):
            obj["status"] = {"disruptionsAllowed": draw(st.integers(0, 5))}
    elif kind == "PersistentVolume":
        if draw(st.booleans()):
            spec["nodeAffinity"] = {"required": draw(node_selectors)}
    elif kind == "PersistentVolumeClaim":
        _opt(spec, "volumeName", names, draw)
    else:
        _opt(spec, "replicas", st.integers(0, 50), draw)
    obj["spec"] = spec
    return obj


LEGACY = {
    "Pod": legacy.parse_pod,
    "Node": legacy.parse_node,
    "NodeMetrics": legacy.parse_node_metrics,
    "PodMetrics": legacy.parse_pod_metrics,
    "PodDisruptionBudget": legacy.parse_pdb,
    "PersistentVolume": legacy.parse_pv,
    "PersistentVolumeClaim": legacy.parse_pvc,
}


def _legacy(obj: dict[str, Any]) -> Any:
    return LEGACY.get(obj["kind"], legacy.parse_controller)(obj)


def _same_everywhere(obj: dict[str, Any]) -> None:
    """The legacy record, or a failure on every path where the legacy parser failed."""
    try:
        expected = _legacy(obj)
    except legacy.ObjectError:
        expected = None
    data = json.dumps(obj).encode()
    item = {k: v for k, v in obj.items() if k != "kind"}
    list_kind = f"{obj['kind']}List"
    paths = {
        "decode_object": lambda: decode_object(data),
        "List item without kind": lambda: next(
            records_of_document(json.dumps({"kind": list_kind, "items": [item]}).encode(), "f")
        )[0],
        "v1 List": lambda: next(records_of_document(json.dumps({"kind": "List", "items": [obj]}).encode(), "f"))[0],
        "parse_object": lambda: parse_object(obj),
    }
    for label, run in paths.items():
        if expected is None:
            with pytest.raises(ObjectError):
                run()
        else:
            assert run() == expected, label


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(pods())
def test_pods_decode_as_before(obj: dict[str, Any]) -> None:
    _same_everywhere(obj)


@SETTINGS
@given(pods(bad=True))
def test_pods_with_bad_quantities_fail_as_before(obj: dict[str, Any]) -> None:
    with pytest.raises(legacy.ObjectError):
        _legacy(obj)
    _same_everywhere(obj)


@SETTINGS
@given(nodes())
def test_nodes_decode_as_before(obj: dict[str, Any]) -> None:
    _same_everywhere(obj)


@SETTINGS
@given(metrics())
def test_metrics_decode_as_before(obj: dict[str, Any]) -> None:
    _same_everywhere(obj)


@SETTINGS
@given(others())
def test_other_kinds_decode_as_before(obj: dict[str, Any]) -> None:
    _same_everywhere(obj)


pod_metrics_items = st.lists(metrics().filter(lambda o: o["kind"] == "PodMetrics"), max_size=6)


@SETTINGS
@given(pod_metrics_items, st.sampled_from(["1500000n", "7n", "250m", "1"]), st.sampled_from(["1024Ki", "3Ki", "1Gi"]))
def test_a_pod_metrics_list_decodes_as_its_items_did_one_by_one(
    objs: list[dict[str, Any]], cpu: str, memory: str
) -> None:
    """The LIST's own loop (:func:`scaler.model.parse.pod_metrics_records`: metrics-server's
    usual spelling read inline, stamps alike read once), for a LIST answer and for a
    ``pod-metrics.json`` file alike, gives the legacy parser's records."""
    for i, obj in enumerate(objs):
        if i % 2:  # metrics-server's spelling: nanocores and kibibytes
            obj["containers"] = [*obj["containers"], {"name": "usual", "usage": {"cpu": cpu, "memory": memory}}]
    items = [{k: v for k, v in o.items() if k != "kind"} for o in objs]
    data = json.dumps({"kind": "PodMetricsList", "items": items}).encode()
    from_file = lambda: [rec for rec, _ in records_of_document(data, "pod-metrics.json")]  # noqa: E731
    try:
        expected = [legacy.parse_pod_metrics(o) for o in objs]
    except legacy.ObjectError:
        for decode in (lambda: decode_list(data, "PodMetrics"), from_file):
            with pytest.raises(ObjectError):
                decode()
        return
    assert decode_list(data, "PodMetrics").records == expected
    assert from_file() == expected
