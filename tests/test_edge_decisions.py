"""Decisions at the edges of the input, end to end through ``scaler dry-run --snapshot``: unknown
usage never read as zero, expendable pods ignored everywhere, cluster-autoscaler's scale-down
reasons, a node's usage never below what its pods use, bad quantities and times refused in one
line, prices attributed to their source, and kube-scheduler's own node-affinity table entry.

Each snapshot is a handful of nodes written as ``kubectl get -o json`` prints them
(:func:`test_decisions_e2e.write_snapshot`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import make_node, make_pod
from e2e_cluster import GI, T0, E2ECluster, node_json, pod_json, workload_json
from hypothesis import given, settings
from hypothesis import strategies as st
from test_decisions_e2e import dry_run, metrics_json, write_snapshot

from scaler.cli import main
from scaler.model.decode import parse_pod
from scaler.model.records import PodMetrics
from scaler.simulator.filters import node_matches_pod_node_affinity

MI = 2**20


def not_ready(node: dict[str, Any]) -> dict[str, Any]:
    node["status"]["conditions"][0]["status"] = "False"
    return node


# ---- CA's scale-down reasons --------------------------------------------------------------------


def test_an_empty_not_ready_node_is_unready_for_budgets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """CA 1.30 ``nodeScaleDownReason`` checks readiness first: an empty NotReady node is removed
    for the reason ``unready``, so a ``reasons: [unready]`` budget of 0 holds it."""
    nodes = [node_json(n, "pool-a", "z1", "") for n in ("n1", "n2")]
    nodes.append(not_ready(node_json("n3", "pool-a", "z1", "")))
    pods = [pod_json(f"a-{n}", n, owner=("ReplicaSet", "app")) for n in ("n1", "n2")]
    node_metrics = [metrics_json(n, 2000, 8 * GI, T0) for n in ("n1", "n2")]
    snap = write_snapshot(tmp_path / "s", nodes, pods, node_metrics, [], [workload_json("ReplicaSet", "app", 2)])
    report = dry_run(capsys, "--snapshot", str(snap))
    assert report["n3"]["status"] == "removable-empty"
    report = dry_run(capsys, "--snapshot", str(snap), "--scale-down-budget", "0;reasons=unready")
    assert not report["n3"]["removable"], report["n3"]
    assert "unready" in report["n3"]["detail"]
    report = dry_run(capsys, "--snapshot", str(snap), "--scale-down-budget", "0;reasons=empty")
    assert report["n3"]["status"] == "removable-empty"


# ---- expendable pods ----------------------------------------------------------------------------


def test_an_expendable_pod_not_yet_in_the_metrics_is_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A priority -100 BestEffort pod that started after ``dst``'s metrics window: expendable
    (below the default cutoff -10), so its unknown usage neither makes ``dst``'s usage unknown
    nor keeps ``src``'s pod from moving there."""
    nodes = [node_json(n, "pool-a", "z1", "") for n in ("dst", "src")]
    late = pod_json("late", "dst", owner=("ReplicaSet", "late"), started=T0 - 5, priority=-100)
    late["spec"]["containers"][0]["resources"] = {}
    pods = [pod_json("app", "src", owner=("ReplicaSet", "app")), late]
    pods.append(pod_json("resident", "dst", owner=("ReplicaSet", "resident"), cpu_m=1000, mem=4 * GI))
    node_metrics = [metrics_json("dst", 1000, 4 * GI, T0), metrics_json("src", 300, GI, T0)]
    workloads = [workload_json("ReplicaSet", n, 1) for n in ("app", "late", "resident")]
    snap = write_snapshot(tmp_path / "s", nodes, pods, node_metrics, [], workloads)
    report = dry_run(capsys, "--snapshot", str(snap))
    assert report["dst"]["reason"] != "MetricsUnavailable", report["dst"]["detail"]
    assert report["src"]["status"] == "removable-drain", report["src"]["detail"]
    assert [m["destination"] for m in report["src"]["moves"]] == ["dst"]


def test_a_pod_without_priority_is_never_expendable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """CA's ``IsExpendablePod`` needs ``spec.priority``: a bare pod without one still blocks its
    node under ``--expendable-pods-priority-cutoff=10``; one with priority 0 does not."""
    nodes = [node_json(n, "pool-a", "z1", "") for n in ("n1", "n2")]
    bare = pod_json("bare", "n1", owner=("ReplicaSet", "x"))
    del bare["metadata"]["ownerReferences"]
    ranked = pod_json("ranked", "n2", owner=("ReplicaSet", "x"), priority=0)
    del ranked["metadata"]["ownerReferences"]
    node_metrics = [metrics_json(n, 200, GI, T0) for n in ("n1", "n2")]
    snap = write_snapshot(tmp_path / "s", nodes, [bare, ranked], node_metrics)
    report = dry_run(capsys, "--snapshot", str(snap), "--expendable-pods-priority-cutoff=10")
    assert report["n1"]["reason"] == "BlockedByPod"
    assert report["n1"]["blockingPod"]["reason"] == "NotReplicated"
    assert report["n2"]["status"] == "removable-empty"


# ---- every input gets one line and exit 2 ---------------------------------------------------------


def _two_nodes() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [node_json(n, "pool-a", "z1", "") for n in ("n1", "n2")]
    pods = [pod_json(f"a-{n}", n, owner=("ReplicaSet", "app")) for n in ("n1", "n2")]
    return nodes, pods, [metrics_json(n, 300, GI, T0) for n in ("n1", "n2")]


def _requests(pod: dict[str, Any], **values: str) -> None:
    pod["spec"]["containers"][0]["resources"]["requests"].update(values)


def _case_two_4ei(nodes: Any, pods: Any, metrics: Any) -> None:
    _requests(pods[0], memory="4Ei")
    pods[0]["spec"]["containers"].append({"name": "d", "resources": {"requests": {"memory": "4Ei"}}})


def _case_pods_of_one_node(nodes: Any, pods: Any, metrics: Any) -> None:
    pods.append(pod_json("b-n1", "n1", owner=("ReplicaSet", "app")))
    _requests(pods[0], memory="4Ei")
    _requests(pods[-1], memory="4Ei")


CASES = {
    "4Ei twice in one pod": (_case_two_4ei, "Pod default/a-n1: the containers' memory requests sum to more than 2^63-1"),
    "8Ei": (lambda n, p, m: _requests(p[0], memory="8Ei"), "Pod default/a-n1: container 'c' resources: byte quantity '8Ei' is too large"),
    "10P cpu": (lambda n, p, m: _requests(p[0], cpu="10P"), "Pod default/a-n1: container 'c' resources: cpu quantity '10P' is too large"),
    "huge NodeMetrics": (
        lambda n, p, m: m[0]["usage"].update(cpu="99999999999999999999999999n"),
        "NodeMetrics n1: usage: cpu quantity '99999999999999999999999999n' is too large",
    ),
    "huge NodeMetrics memory": (lambda n, p, m: m[0]["usage"].update(memory="9Ei"), "NodeMetrics n1: usage: byte quantity '9Ei'"),
    "4Ei on two pods of one node": (_case_pods_of_one_node, "Node n1: the memory requests of its pods (bytes) sum to"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_quantities_beyond_int64_are_one_line_and_exit_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    change, message = CASES[case]
    nodes, pods, metrics = _two_nodes()
    change(nodes, pods, metrics)
    snap = write_snapshot(tmp_path / "s", nodes, pods, metrics, [], [workload_json("ReplicaSet", "app", 3)])
    assert main(["dry-run", "--snapshot", str(snap), "-o", "json"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("scaler: error: "), err
    assert message in err


@pytest.mark.parametrize("now", ["1e30", "-1", "253402300800"])
def test_now_outside_what_rfc3339_can_write_is_refused(
    now: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes, pods, metrics = _two_nodes()
    snap = write_snapshot(tmp_path / "s", nodes, pods, metrics, [], [workload_json("ReplicaSet", "app", 3)])
    assert main(["dry-run", "--snapshot", str(snap), f"--now={now}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--now: {now!r} is outside" in err, err


def test_zero_allocatable_cpu_reports_unknown_utilization(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A node with 0 allocatable CPU using 300m: its cpu fraction is unknown (null, ``-`` in the
    table), not 0.0."""
    nodes, pods, metrics = _two_nodes()
    nodes[0]["status"]["allocatable"]["cpu"] = "0"
    snap = write_snapshot(tmp_path / "s", nodes, pods, metrics, [], [workload_json("ReplicaSet", "app", 3)])
    n1 = dry_run(capsys, "--snapshot", str(snap))["n1"]
    assert n1["reason"] == "UnexpectedError"
    assert n1["utilization"]["cpu"] is None and n1["utilization"]["value"] is None
    assert n1["requestUtilization"]["cpu"] is None
    assert n1["utilization"]["memory"] == pytest.approx(GI / (16 * GI))
    assert main(["dry-run", "--snapshot", str(snap), "-o", "wide"]) == 0
    row = next(line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("n1 "))
    assert row[2] == "-" and row[4] == "-", row  # CPU% and REQ-CPU%


# ---- unknown usage is never zero ------------------------------------------------------------------


def best_effort(name: str, node: str) -> dict[str, Any]:
    pod = pod_json(name, node, owner=("ReplicaSet", "batch"))
    pod["spec"]["containers"][0]["resources"] = {}
    pod["status"]["qosClass"] = "BestEffort"
    return pod


def test_pod_metrics_without_containers_are_no_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Ten BestEffort pods whose PodMetrics list no container: their usage is unknown, not 0, so
    they do not pile onto ``dst`` (at 42.5% cpu) and ``src`` says why it stays."""
    nodes = [node_json(n, "pool-a", "z1", "") for n in ("dst", "src")]
    pods = [best_effort(f"be-{i}", "src") for i in range(10)]
    pods.append(pod_json("resident", "dst", owner=("ReplicaSet", "resident")))
    node_metrics = [metrics_json("dst", 1700, int(9.6 * GI), T0), metrics_json("src", 1900, 2 * GI, T0)]
    pod_metrics = [metrics_json(f"be-{i}", 180, 64 * MI, T0, "default") for i in range(10)]
    for m in pod_metrics:
        m["containers"] = []
    workloads = [workload_json("ReplicaSet", "batch", 10), workload_json("ReplicaSet", "resident", 1)]
    snap = write_snapshot(tmp_path / "s", nodes, pods, node_metrics, pod_metrics, workloads)
    report = dry_run(capsys, "--snapshot", str(snap))
    assert report["src"]["reason"] == "MetricsUnavailable", report["src"]
    assert "its PodMetrics lack container 'c', which has no cpu request" in report["src"]["detail"]
    assert report["dst"]["reason"] != "DestinationForMovedPods"


def test_pod_metrics_lacking_a_running_container_are_no_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A BestEffort pod runs containers ``c`` and ``sidecar``; its PodMetrics report only ``c``
    (50m). Read as measured, the sidecar would use nothing and the pod would move to ``dst``;
    its usage is unknown instead. When the container statuses say the sidecar is not running,
    the reading covers what runs and is the pod's usage again."""
    nodes = [node_json(n, "pool-a", "z1", "") for n in ("dst", "src")]
    app = best_effort("app", "src")
    app["spec"]["containers"].append({"name": "sidecar", "resources": {}})
    pods = [app, pod_json("resident", "dst", owner=("ReplicaSet", "resident"))]
    node_metrics = [metrics_json("dst", 1000, 4 * GI, T0), metrics_json("src", 300, GI, T0)]
    pod_metrics = [metrics_json("app", 50, 64 * MI, T0, "default")]
    workloads = [workload_json("ReplicaSet", "batch", 1), workload_json("ReplicaSet", "resident", 1)]
    snap = write_snapshot(tmp_path / "s", nodes, pods, node_metrics, pod_metrics, workloads)
    report = dry_run(capsys, "--snapshot", str(snap))
    assert report["src"]["reason"] == "MetricsUnavailable", report["src"]
    assert "its PodMetrics lack container 'sidecar'" in report["src"]["detail"]
    app["status"]["containerStatuses"] = [
        {"name": "c", "state": {"running": {"startedAt": "2026-11-04T13:00:00Z"}}},
        {"name": "sidecar", "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
    ]
    snap = write_snapshot(tmp_path / "s2", nodes, pods, node_metrics, pod_metrics, workloads)
    report = dry_run(capsys, "--snapshot", str(snap))
    assert report["src"]["status"] == "removable-drain", report["src"]


# ---- a node's usage is never below what its pods use --------------------------------------------


def _glitch_snapshot(tmp_path: Path, n1_cpu_m: int) -> Path:
    """n1 runs two pods whose PodMetrics say 1500m each (3 cores of 4); n2 and n3 have room."""
    nodes = [node_json(n, "pool-a", "z1", "") for n in ("n1", "n2", "n3")]
    pods = [pod_json(f"busy-{i}", "n1", owner=("ReplicaSet", "busy")) for i in range(2)]
    pods += [pod_json(f"calm-{n}", n, owner=("ReplicaSet", "calm")) for n in ("n2", "n3")]
    node_metrics = [metrics_json("n1", n1_cpu_m, 3 * GI, T0)]
    node_metrics += [metrics_json(n, 400, 3 * GI, T0) for n in ("n2", "n3")]
    pod_metrics = [metrics_json(f"busy-{i}", 1500, GI, T0, "default") for i in range(2)]
    pod_metrics += [metrics_json(f"calm-{n}", 300, GI, T0, "default") for n in ("n2", "n3")]
    workloads = [workload_json("ReplicaSet", "busy", 2), workload_json("ReplicaSet", "calm", 2)]
    return write_snapshot(tmp_path / f"s{n1_cpu_m}", nodes, pods, node_metrics, pod_metrics, workloads)


def test_node_metrics_far_below_its_pods_make_the_node_metrics_unavailable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """n1's NodeMetrics say 1m while its pods' PodMetrics say 3 cores: n1 is not idle, its
    metrics are not trusted (``MetricsUnavailable``, saying why), and it receives no pods."""
    report = dry_run(capsys, "--snapshot", str(_glitch_snapshot(tmp_path, 1)))
    n1 = report["n1"]
    assert n1["reason"] == "MetricsUnavailable", n1
    assert "far below the sum of its pods' PodMetrics (3000m cpu" in n1["detail"]
    assert n1["utilization"]["value"] is None
    assert all(m["destination"] != "n1" for r in report.values() for m in r["moves"])


def test_node_usage_is_raised_to_its_pods_sum_when_slightly_below(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """NodeMetrics 100m below the pods' 3 cores (within the tolerance): the node's usage is the
    pods' sum, never below it."""
    n1 = dry_run(capsys, "--snapshot", str(_glitch_snapshot(tmp_path, 2900)))["n1"]
    assert n1["usage"]["cpuMillicores"] == 3000
    assert n1["utilization"]["cpu"] == pytest.approx(0.75)
    n1 = dry_run(capsys, "--snapshot", str(_glitch_snapshot(tmp_path, 3300)))["n1"]
    assert n1["usage"]["cpuMillicores"] == 3300  # system overhead above the pods' sum is kept


# ---- prices attributed honestly ------------------------------------------------------------------


def test_a_price_file_and_the_bundled_table_are_both_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ``--prices`` file with its own ``source`` prices n2-standard-8 only; the removable
    e2-standard-4 node is priced from the bundled table, so the summary names both sources."""
    nodes = [node_json(n, "pool-a", "us-central1-a", "") for n in ("n1", "n2", "keep")]
    nodes[0]["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "n2-standard-8"
    nodes[1]["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "e2-standard-4"
    pods = [pod_json("busy", "keep", owner=("ReplicaSet", "busy"))]
    node_metrics = [metrics_json(n, 100, GI, T0) for n in ("n1", "n2")] + [metrics_json("keep", 3000, GI, T0)]
    snap = write_snapshot(tmp_path / "s", nodes, pods, node_metrics, [], [workload_json("ReplicaSet", "busy", 1)])
    prices = tmp_path / "prices.yaml"
    prices.write_text("source: ACME negotiated rates\ndate: 2026-10\nprices:\n  n2-standard-8: 0.30\n")

    def savings(snapshot: Path) -> dict[str, Any]:
        assert main(["dry-run", "--snapshot", str(snapshot), "--prices", str(prices), "-o", "json"]) == 0
        return dict(json.loads(capsys.readouterr().out)["summary"]["savings"])

    both = savings(snap)
    assert both["pricedNodes"] == 2
    assert both["priceSource"].startswith("ACME negotiated rates, 2026-10, and for the machine types it does")
    assert "Google Cloud VM instance pricing" in both["priceSource"] and both["priceDate"] == "2024-2025"
    # Only the file's machine type removable: the file's source alone.
    nodes[1]["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}
    snap = write_snapshot(tmp_path / "s2", nodes, pods, node_metrics, [], [workload_json("ReplicaSet", "busy", 1)])
    only_file = savings(snap)
    assert (only_file["priceSource"], only_file["priceDate"]) == ("ACME negotiated rates", "2026-10")


# ---- kube-scheduler's own table entry ------------------------------------------------------------


def test_a_node_affinity_value_that_is_not_a_label_value_matches_no_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kube-scheduler v1.28 ``nodeaffinity`` test table, "Pod with an invalid value in Affinity
    term won't be scheduled onto the node": ``foo NotIn ["invalid value: ___@#$%^"]`` does not
    parse, so the term matches no node, not every node without that value. The pod fits
    nowhere: its node stays. The same term with a valid value lets it move."""
    nodes = [node_json(n, "pool-a", "z1", "") for n in ("n1", "n2")]
    for n in nodes:
        n["metadata"]["labels"]["foo"] = "bar"
    nodes[1]["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}

    def snapshot(value: str) -> Path:
        pod = pod_json("picky", "n1", owner=("ReplicaSet", "picky"))
        term = {"matchExpressions": [{"key": "foo", "operator": "NotIn", "values": [value]}]}
        pod["spec"]["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
        metrics = [metrics_json(n, 200, GI, T0) for n in ("n1", "n2")]
        return write_snapshot(tmp_path / value[:3], nodes, [pod], metrics, [], [workload_json("ReplicaSet", "picky", 1)])

    report = dry_run(capsys, "--snapshot", str(snapshot("invalid value: ___@#$%^")))
    assert report["n1"]["reason"] == "NoPlaceToMovePods", report["n1"]
    assert "NodeAffinity" in report["n1"]["detail"]
    report = dry_run(capsys, "--snapshot", str(snapshot("baz")))
    assert report["n1"]["status"] == "removable-drain", report["n1"]


@pytest.mark.parametrize(
    ("expression", "fits"),
    [
        ({"key": "foo", "operator": "In", "values": ["bar"]}, True),
        ({"key": "foo", "operator": "In", "values": []}, False),  # In needs values
        ({"key": "foo", "operator": "Exists", "values": ["bar"]}, False),  # Exists takes none
        ({"key": "foo/", "operator": "Exists"}, False),  # not a qualified name
        ({"key": "example.com/foo", "operator": "DoesNotExist"}, True),
        ({"key": "num", "operator": "Gt", "values": ["5"]}, True),
        ({"key": "num", "operator": "Gt", "values": ["5", "6"]}, False),
        ({"key": "num", "operator": "Lt", "values": ["x"]}, False),
        ({"key": "foo", "operator": "NotIn", "values": ["a" * 64]}, False),  # longer than 63
    ],
)
def test_node_selector_requirements_parse_as_the_scheduler_parses_them(expression: dict[str, Any], fits: bool) -> None:


    pod = pod_json("p", "", owner=("ReplicaSet", "p"))
    term = {"matchExpressions": [expression]}
    pod["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    }
    node = make_node("n", labels={"foo": "bar", "num": "7"})
    assert node_matches_pod_node_affinity(parse_pod(pod), node) is fits


# ---- scaler run: the same rules in the controller -----------------------------------------------


def test_run_keeps_a_node_whose_node_metrics_are_far_below_its_pods(tmp_path: Path) -> None:
    """The controller against the loopback fakes: the first underused node's NodeMetrics say
    120m while its pods' PodMetrics say 3 cores. It is never unneeded (``MetricsUnavailable``);
    the other underused node is drained as before."""
    with E2ECluster(tmp_path) as c:
        glitched, other = c.underused
        c.pod_usage.update({"web-0": (1500, GI), "api-0": (1500, GI)})  # the pods of underused[0]
        c.refresh_metrics()
        with c.controller(c.config()) as ctl:
            ctl.run_once()
            c.advance(601)
            decision = ctl.run_once()
            _, reason, detail = decision.verdicts[glitched]
            assert reason.value == "MetricsUnavailable", (reason, detail)
            assert "far below the sum of its pods' PodMetrics" in detail
            assert glitched not in decision.unneeded
            assert [r.node.name for r in decision.drain] == [other]
            c.wait_idle(ctl)


# ---- property: a reading is a pod's usage exactly when it covers the containers the pod runs --------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["app", "sidecar", "proxy", "init"]), unique=True, max_size=3),
    st.one_of(st.none(), st.lists(st.sampled_from(["app", "sidecar", "proxy", "log"]), unique=True, max_size=4)),
)
def test_partial_pod_metrics_are_dropped_exactly_when_they_miss_a_running_container(
    running: list[str], reported: list[str] | None
) -> None:
    from scaler.model.snapshot import drop_partial_pod_metrics  # here: the module imports on main too

    pod = make_pod("p", containers=tuple(running))
    reading = PodMetrics("default", "p", T0, 30.0, 100, 100, None if reported is None else tuple(reported))
    metrics = {("default", "p"): reading}
    partial = drop_partial_pod_metrics([pod], metrics)
    missing = [] if reported is None else [c for c in running if c not in reported]
    assert (("default", "p") in metrics) == (not missing)
    assert partial == ({("default", "p"): (reading, tuple(missing))} if missing else {})


class EmptyPodMetricsCluster(E2ECluster):
    """The default cluster, plus a BestEffort pod ``be`` on the first underused node whose
    PodMetrics list no container (``containers: []``)."""

    def objects(self) -> list[dict[str, Any]]:
        objects = super().objects()
        objects.append(best_effort("be", self.underused[0]))
        objects.append(workload_json("ReplicaSet", "batch", 1))
        return objects

    def refresh_metrics(self) -> None:
        super().refresh_metrics()
        m = self.kube.get_object("PodMetrics", "be", "default")
        if m is not None:
            self.kube.delete_object("PodMetrics", "be", "default")
            self.kube.load_objects([{**m, "containers": []}])


def test_run_never_reads_pod_metrics_without_containers_as_zero(tmp_path: Path) -> None:
    """The controller against the loopback fakes: ``be`` (BestEffort, PodMetrics with no
    container) has unknown usage, so its node is ``MetricsUnavailable``, never drained with
    ``be`` counted as using nothing; the other underused node is drained as before."""
    with EmptyPodMetricsCluster(tmp_path) as c:
        held, other = c.underused
        c.usage[held] = (100, GI // 2)  # below the other one: simulated first, before the PDB is spent
        c.refresh_metrics()
        with c.controller(c.config()) as ctl:
            ctl.run_once()
            c.advance(601)
            decision = ctl.run_once()
            _, reason, detail = decision.verdicts[held]
            assert reason.value == "MetricsUnavailable", (reason, detail)
            assert "pod default/be: its PodMetrics lack container 'c', which has no cpu request" in detail
            assert [r.node.name for r in decision.drain] == [other]
            c.wait_idle(ctl)
