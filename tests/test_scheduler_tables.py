"""kube-scheduler 1.35's own test tables for what changed since 1.28, as drain cases.

Each entry of upstream's table becomes a drain: the table's pod runs on ``src``, an underused
node, and must move; the table's node (its allocatable, its pods) is ``dst``, the only
destination (``scale-down-disabled``, so it stays). The table says *fits* → ``src`` is removable;
*Insufficient …* or a port conflict → ``src`` stays, ``NoPlaceToMovePods`` with the scheduler's
words. Only kube-scheduler's filters run (no TargetUsage), so the verdict is the Filter's.

Tables, each entry cited by its test name:

* ``pkg/scheduler/framework/plugins/noderesources/fit_test.go``: ``TestEnoughRequests`` (the
  pod-level resources entries, huge pages included) and ``TestRestartableInitContainers``
  (sidecars). Node: ``makeAllocatableResources(10, 20, 32, 5, 20, 5)``: 10 millicores, 20 bytes,
  32 pods, 5 ``example.com/aaa``, 20 bytes of ephemeral storage, 5 ``hugepages-2Mi``; sidecar
  entries: 2 millicores, 1 pod.
* ``pkg/scheduler/framework/types_test.go``: ``TestCalculatePodResourcesWithResize`` (in-place
  resize: the requests the scheduler counts for a pod from its status), each entry both as the
  pod's requests and as a drain where the resized pod sits on the destination. Its entries with
  pod-level *status* resources (``InPlacePodLevelResourcesVerticalScaling``, alpha and off in
  1.35) hold here because the pod-level spec already decides them.
* ``pkg/scheduler/framework/plugins/nodeports/node_ports_test.go``: ``TestNodePorts``, the
  init-container entries (a plain init container's ``hostPort`` is released when it ends; a
  sidecar's is held, ``GetHostPorts``).
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import make_node

from scaler.config import ScalerConfig
from scaler.engine import NodeResult, evaluate
from scaler.model.decode import parse_pod
from scaler.model.records import ANNOTATION_SCALE_DOWN_DISABLED, PodMetrics, Resources
from scaler.model.snapshot import ClusterSnapshot
from scaler.reasons import UnremovableReason

MI = 2**20
NOW = 1_800_000_000.0
HP = "hugepages-2Mi"
FIT_NODE = Resources(10, 20, 20, 32, {"example.com/aaa": 5, HP: 5})
SIDECAR_NODE = Resources(2, 0, 0, 1)
# Only the scheduler's filters; judged by requests, so no metrics are needed.
CONFIG = ScalerConfig(filter_plugins=(), utilization_source="requests")


def container(name: str, requests: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, **extra}
    if requests is not None:
        c["resources"] = {"requests": {k: str(v) for k, v in requests.items()}}
    return c


def res(cpu_m: int = 0, mem: int = 0, **scalar: int) -> dict[str, Any]:
    """A request list as fit_test.go's ``framework.Resource{MilliCPU, Memory, ScalarResources}``."""
    out: dict[str, Any] = {"cpu": f"{cpu_m}m", "memory": str(mem)}
    out.update(scalar)
    return out


def pod(
    name: str,
    node: str,
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    pod_requests: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": node, "containers": containers or [container("c")]}
    if init:
        spec["initContainers"] = init
    if pod_requests is not None:
        spec["resources"] = {"requests": {k: str(v) for k, v in pod_requests.items()}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "controller": True}],
        },
        "spec": spec,
        "status": {"phase": "Running", **(status or {})},
    }


def drain(moving: dict[str, Any], residents: list[dict[str, Any]], dst: Resources) -> NodeResult:
    """The verdict on ``src`` when ``moving`` must go to ``dst`` (allocatable ``dst``, running
    ``residents``)."""
    nodes = [
        make_node("src", allocatable=Resources(64_000, 256 * 2**30, 100 * 2**30, 110, {"example.com/aaa": 100, HP: 100})),
        make_node("dst", allocatable=dst, annotations={ANNOTATION_SCALE_DOWN_DISABLED: "true"}),
    ]
    pods = [parse_pod(moving), *(parse_pod(p) for p in residents)]
    # Measured and idle: a pod without requests moves by its (zero) usage, never unknown.
    readings = [PodMetrics(p.namespace, p.name, NOW, 30.0, 0, 0) for p in pods]
    snapshot = ClusterSnapshot.create(now=NOW, nodes=nodes, pods=pods, pod_metrics=readings)
    return next(r for r in evaluate(snapshot, CONFIG).nodes if r.node.name == "src")


def verdict(result: NodeResult) -> str:
    """``fits`` when ``src`` can go, else the filter's refusal (``Insufficient cpu``...)."""
    if result.removable:
        return "fits"
    assert result.reason is UnremovableReason.NoPlaceToMovePods, (result.reason, result.detail)
    # "pod default/p fits nowhere: NodeResourcesFit: Insufficient cpu (1 node)"
    return result.detail.split("fits nowhere: ", 1)[1].rsplit(" (", 1)[0]


# ---- noderesources: TestEnoughRequests, pod-level resources ------------------------------------

POD_LEVEL = [
    (  # "skip checking resource request with quantity zero"
        pod("p", "src", [container("c", {"cpu": 0, "memory": 0, "example.com/aaa": 1})]),
        [pod("r", "dst", [container("c", {"cpu": "20m", "memory": 30, "example.com/aaa": 1})])],
        "fits",
    ),
    (  # "both pod-level and container-level resources fit"
        pod("p", "src", [container("c", res(1, 1))], pod_requests={"cpu": "1m", "memory": 2}),
        [pod("r", "dst", [container("c", res(5, 5))])],
        "fits",
    ),
    (  # "pod-level cpu resource not fit"
        pod("p", "src", [container("c", res(1, 1))], pod_requests={"cpu": "7m", "memory": 2}),
        [pod("r", "dst", [container("c", res(5, 5))])],
        "NodeResourcesFit: Insufficient cpu",
    ),
    (  # "pod-level memory resource not fit"
        pod("p", "src", [container("c", res(1, 1))], pod_requests={"cpu": "3m", "memory": 2}),
        [pod("r", "dst", [container("c", res(5, 19))])],
        "NodeResourcesFit: Insufficient memory",
    ),
    (  # "pod-level hugepages resource fit"
        pod("p", "src", [container("c")], pod_requests={"cpu": "3m", "memory": 2, HP: 5}),
        [],
        "fits",
    ),
    (  # "both pod-level and container-level hugepages resource fit"
        pod("p", "src", [container("c", {**res(1, 1), HP: 3})], pod_requests={"cpu": "3m", "memory": 2, HP: 5}),
        [],
        "fits",
    ),
    (  # "pod-level hugepages resource not fit"
        pod("p", "src", [container("c")], pod_requests={"cpu": "3m", "memory": 2, HP: 10}),
        [],
        f"NodeResourcesFit: Insufficient {HP}",
    ),
    (  # "one pod-level cpu resource fits and all init and non-init containers resources fit"
        pod("p", "src", [container("c", res(1, 1))], [container("i", res(1, 1))], pod_requests={"cpu": "3m", "memory": 2}),
        [pod("r", "dst", [container("c", res(5, 19))])],
        "NodeResourcesFit: Insufficient memory",
    ),
]


@pytest.mark.parametrize(("moving", "residents", "expected"), POD_LEVEL)
def test_fit_test_pod_level_resources(moving: dict[str, Any], residents: list[dict[str, Any]], expected: str) -> None:
    """``TestEnoughRequests``' pod-level entries (node ``makeAllocatableResources(10, 20, 32, 5,
    20, 5)``)."""
    assert verdict(drain(moving, residents, FIT_NODE)) == expected


# ---- noderesources: TestRestartableInitContainers ----------------------------------------------

SIDECAR = {"restartPolicy": "Always"}
SIDECARS = [
    (  # "allow pod with restartable init containers if sidecar containers is enabled"
        pod("p", "src", [container("regular")], [container("restartable-init", **SIDECAR)]),
        "fits",
    ),
    (  # "allow pod if the total requested resources do not exceed the node's allocatable resources"
        pod("p", "src", [container("regular", {"cpu": "1m"})], [container("restartable-init", {"cpu": "1m"}, **SIDECAR)]),
        "fits",
    ),
    (  # "not allow pod if the total requested resources do exceed the node's allocatable resources"
        pod("p", "src", [container("regular", {"cpu": "1m"})], [container("restartable-init", {"cpu": "2m"}, **SIDECAR)]),
        "NodeResourcesFit: Insufficient cpu",
    ),
]


@pytest.mark.parametrize(("moving", "expected"), SIDECARS)
def test_fit_test_restartable_init_containers(moving: dict[str, Any], expected: str) -> None:
    """``TestRestartableInitContainers`` with ``SidecarContainers`` on (GA since 1.33): node
    ``makeAllocatableResources(2, 0, 1, 0, 0, 0)``, no pod on it."""
    assert verdict(drain(moving, [], SIDECAR_NODE)) == expected


# ---- TestCalculatePodResourcesWithResize ---------------------------------------------------------

CPU500, MEM500 = "500m", "500Mi"
CPU700, MEM800 = "700m", "800Mi"


def resized(
    requests: dict[str, str],
    status: dict[str, str],
    conditions: list[dict[str, str]] | None = None,
    *,
    pod_level: dict[str, str] | None = None,
    init: tuple[dict[str, str], dict[str, str]] | None = None,
    sidecar: tuple[dict[str, str], dict[str, str]] | None = None,
    node: str = "dst",
) -> dict[str, Any]:
    """``preparePodInfo`` of types_test.go: container ``c1`` (requests, status resources), an
    init container ``i1`` and a sidecar ``s1`` (each (requests, status)), pod-level requests,
    resize conditions."""
    containers = [container("c1", requests)]
    statuses: dict[str, Any] = {
        "containerStatuses": [{"name": "c1", "state": {"running": {}}, "resources": {"requests": status}}]
    }
    inits = []
    if init is not None:
        inits.append(container("i1", init[0]))
        statuses["initContainerStatuses"] = [{"name": "i1", "resources": {"requests": init[1]}}]
    if sidecar is not None:
        inits.append(container("s1", sidecar[0], **SIDECAR))
        statuses.setdefault("initContainerStatuses", []).append(
            {"name": "s1", "state": {"running": {}}, "resources": {"requests": sidecar[1]}}
        )
    if conditions:
        statuses["conditions"] = conditions
    return pod("grower", node, containers, inits or None, pod_requests=pod_level, status=statuses)


IN_PROGRESS = [{"type": "PodResizeInProgress", "status": "True"}]
DEFERRED = [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}]
INFEASIBLE = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
A = {"cpu": CPU500, "memory": MEM500}
B = {"cpu": CPU700, "memory": MEM800}
RESIZE = [
    ("Pod with no pending resize", resized(A, A), (500, 500 * MI)),
    (
        "Pod with pod-level resources no pending resize",
        resized(A, {"cpu": CPU700, "memory": MEM500}, pod_level={"cpu": CPU700, "memory": MEM500}),
        (700, 500 * MI),
    ),
    ("Pod with resize in progress", resized(A, A, IN_PROGRESS), (500, 500 * MI)),
    (
        "Pod with pod-level resources and resize in progress",
        resized(A, {"cpu": CPU700, "memory": MEM500}, IN_PROGRESS, pod_level={"cpu": CPU700, "memory": MEM500}),
        (700, 500 * MI),
    ),
    ("Pod with deferred resize", resized(B, A, DEFERRED), (700, 800 * MI)),
    ("Pod with pod-level resources and with deferred resize", resized(A, A, DEFERRED, pod_level=B), (700, 800 * MI)),
    ("Pod with infeasible resize", resized(B, A, INFEASIBLE), (500, 500 * MI)),
    ("Pod with init container and no pending resize", resized(A, A, init=(B, B)), (700, 800 * MI)),
    ("Pod with sider container and no pending resize", resized(A, A, init=(B, B), sidecar=(B, B)), (1200, 1300 * MI)),
]


@pytest.mark.parametrize(("name", "obj", "expected"), RESIZE, ids=[r[0] for r in RESIZE])
def test_calculate_pod_resources_with_resize(name: str, obj: dict[str, Any], expected: tuple[int, int]) -> None:
    """``TestCalculatePodResourcesWithResize``: the requests counted for the pod, and the drain
    where it runs on the destination: a moving pod that needs exactly the room left beside the
    counted requests fits, one more millicore does not."""
    got = parse_pod(obj).requests
    assert (got.cpu_millicores, got.memory_bytes) == expected
    room = Resources(expected[0] + 100, expected[1] + 100 * MI, 0, 110)
    just = pod("p", "src", [container("c", {"cpu": "100m", "memory": 100 * MI})])
    assert verdict(drain(just, [obj], room)) == "fits"
    over = pod("p", "src", [container("c", {"cpu": "101m", "memory": 100 * MI})])
    assert verdict(drain(over, [obj], room)) == "NodeResourcesFit: Insufficient cpu"


def test_a_pod_resized_beyond_its_node_moves_asking_for_its_spec() -> None:
    """The resize the node refused (``Infeasible``) still asks for the spec elsewhere: the
    moving pod counts 500m where it runs (``TestCalculatePodResourcesWithResize``, "Pod with
    infeasible resize") but is placed with the larger of that and its 700m spec."""
    moving = resized(B, A, INFEASIBLE, node="src")
    assert parse_pod(moving).requests.cpu_millicores == 500
    assert verdict(drain(moving, [], Resources(700, 800 * MI, 0, 110))) == "fits"
    assert verdict(drain(moving, [], Resources(699, 800 * MI, 0, 110))) == "NodeResourcesFit: Insufficient cpu"


# ---- nodeports: TestNodePorts, init containers --------------------------------------------------

PORT_TAKEN = "NodePorts: host port TCP/0.0.0.0:8001 already in use"  # upstream: node(s) didn't have free ports


def with_ports(name: str, node: str, *, init: bool = False, sidecar: bool = False) -> dict[str, Any]:
    """A pod holding TCP 8001 on the host in a regular container, or in an init container
    (``st.MakePod().InitContainerPort(sidecar, ...)``)."""
    ports = [{"containerPort": 8001, "hostPort": 8001, "protocol": "TCP"}]
    if not init:
        return pod(name, node, [container("c", ports=ports)])
    extra = SIDECAR if sidecar else {}
    return pod(name, node, [container("c")], [container("i", ports=ports, **extra)])


@pytest.mark.parametrize(
    ("moving", "resident", "expected"),
    [
        # "non-sidecar initContainer using hostPort": the pod holds no port (PreFilter skips).
        (with_ports("p", "src", init=True), with_ports("r", "dst"), "fits"),
        # "TCP hostPort conflict from sidecar initContainer"
        (with_ports("p", "src", init=True, sidecar=True), with_ports("r", "dst"), PORT_TAKEN),
        # The same rule for the pods already on the node: a plain init container's port is free.
        (with_ports("p", "src"), with_ports("r", "dst", init=True), "fits"),
        (with_ports("p", "src"), with_ports("r", "dst", init=True, sidecar=True), PORT_TAKEN),
    ],
)
def test_node_ports_of_init_containers(moving: dict[str, Any], resident: dict[str, Any], expected: str) -> None:
    """``TestNodePorts``' init-container entries (the resident holds ``TCP/0.0.0.0/8001``)."""
    assert verdict(drain(moving, [resident], Resources(4000, 16 * 2**30, 0, 110))) == expected
