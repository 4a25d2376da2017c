"""Hot-node relief end to end, against the loopback Kubernetes and GCE fakes: `scaler run`'s
controller in process, and `scaler run` as a process killed mid-relief."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from e2e_cluster import GI, E2ECluster, iso, node_json, pdb_json, pod_json, workload_json
from test_runner_e2e import WallClock, start_process
from waiting import wait_for

from scaler.config import ScalerConfig
from scaler.kube.writer import ANNOTATION_HOT_OWNER, TAINT_HOT
from scaler.model.decode import parse_node, parse_pod
from scaler.model.snapshot import ClusterSnapshot
from scaler.replay.world import kube_scheduler_choice
from scaler.simulator.registry import load_filters
from scaler.simulator.state import ClusterState

HOT_USAGE = (3600, 4 * GI)  # 90% cpu of 4 cores: above the 80% waterline
COOL_USAGE = (200, 4 * GI)  # 5%: room under TargetUsage (45%) for hog's 1.5 cores


class HotCluster(E2ECluster):
    """Six 4-core nodes in pool ``pool-a``. The first, ``hot``, uses 3.6 cores (90%) and runs
    ``hog`` (request 500m, using 1.5 cores), ``mid`` (500m, 300m) and ``small`` (100m, 50m);
    every other node uses 0.2 cores and runs one ``backend`` pod (request 1 core). By requests,
    ``hot`` is the emptiest node: without the soft taint, kube-scheduler would put a replacement
    of ``hog`` right back on it."""

    def objects(self) -> list[dict[str, Any]]:
        instances = self.gce.add_pool(
            "pool-a", ("europe-west1-b", "europe-west1-c", "europe-west1-d"), 2, max=5
        )
        self.nodes = instances
        self.hot, self.others = instances[0], instances[1:]
        self.underused, self.busy = [], instances
        now = self.clock()
        objects: list[dict[str, Any]] = []
        for i, name in enumerate(instances):
            zone = self.gce.mig_of(name).zone
            objects.append(node_json(name, "pool-a", zone, self.gce.provider_id(name), created=now))
            objects.append(pod_json(f"ds-{i}", name, owner=("DaemonSet", "node-agent"), cpu_m=50, mem=GI // 8,
                                    namespace="kube-system", created=now))  # fmt: skip
            self.usage[name] = HOT_USAGE if name == self.hot else COOL_USAGE
        for j, name in enumerate(self.others):
            objects.append(
                pod_json(f"backend-{j}", name, owner=("ReplicaSet", "backend"), cpu_m=1000, created=now)
            )
        for pod, cpu, use in (("hog", 500, 1500), ("mid", 500, 300), ("small", 100, 50)):
            objects.append(pod_json(pod, self.hot, owner=("ReplicaSet", pod), cpu_m=cpu, created=now))
            objects.append(workload_json("ReplicaSet", pod, 1))
            self.pod_usage[pod] = (use, GI // 2)
        objects += [
            workload_json("ReplicaSet", "backend", 5),
            workload_json("DaemonSet", "node-agent", None, "kube-system"),
            pdb_json("small", "small", 1),
        ]
        return objects

    def config(self, **overrides: Any) -> ScalerConfig:
        relief = {"hot_node_relief": True, "hot_node_time": 60.0, "scale_down_utilization_threshold": 0.0}
        return super().config(**(relief | overrides))

    def hot_taint(self, name: str) -> dict[str, Any] | None:
        node = self.node(name)
        assert node is not None
        return next((t for t in node["spec"].get("taints") or [] if t["key"] == TAINT_HOT), None)

    def scheduler_choice(self, pod: dict[str, Any], *, ignore_soft_taints: bool = False) -> str:
        """Where kube-scheduler's default profile (filters, then TaintToleration and
        LeastAllocated scores: the replay's model) puts ``pod`` in the cluster as it is now."""
        nodes = [parse_node(n) for n in self.kube.objects("Node")]
        if ignore_soft_taints:
            nodes = [
                replace(n, taints=tuple(t for t in n.taints if t.effect != "PreferNoSchedule")) for n in nodes
            ]
        pods = [parse_pod(p) for p in self.kube.objects("Pod")]
        state = ClusterState(ClusterSnapshot.create(self.clock(), nodes, pods))
        new = parse_pod(pod)
        filters = load_filters(ScalerConfig(filter_plugins=()))
        feasible = np.array(
            [i for i, name in enumerate(state.names) if all(f.filter(new, state.nodes[name], state) is None for f in filters)],
            dtype=np.intp,
        )  # fmt: skip
        return state.names[kube_scheduler_choice(new, state, feasible)]

    def replace_evicted(self, name: str, owner: str) -> str:
        """Play the ReplicaSet controller and kube-scheduler for an evicted pod: create its
        replacement and bind it where the scheduler would. Returns the node."""
        assert not any(p["metadata"]["name"] == name for p in self.kube.objects("Pod")), f"{name} still there"
        replacement = pod_json(f"{name}-2", "", owner=("ReplicaSet", owner), cpu_m=500, created=self.clock())
        target = self.scheduler_choice(replacement)
        replacement["spec"]["nodeName"] = target
        replacement["status"]["startTime"] = iso(self.clock())
        self.kube.load_objects([replacement])
        return target


def test_a_hot_node_is_tainted_relieved_of_the_pods_that_close_its_gap_and_untainted_when_it_cools(
    tmp_path: Path,
) -> None:
    with HotCluster(tmp_path) as c, c.controller(c.config()) as ctl:
        first = ctl.run_once()
        assert first.to_delete == ()
        assert ctl.metrics.hot_nodes._value.get() == 1
        assert c.hot_taint(c.hot) is None, "hot for less than --hot-node-time: not yet relieved"
        c.advance(60)
        ctl.run_once()
        c.wait_idle(ctl)
        taint = c.hot_taint(c.hot)
        assert taint == {"key": TAINT_HOT, "value": str(int(c.clock())), "effect": "PreferNoSchedule"}
        node = c.node(c.hot)
        assert (
            node is not None and (node["metadata"].get("annotations") or {})[ANNOTATION_HOT_OWNER] == "scaler"
        )
        assert not node["spec"].get("unschedulable"), "a soft taint, not a cordon"
        # The gap (3.6 - 3.2 cores) is closed by hog alone: exactly one eviction, of hog.
        evictions = [r.path for r in c.kube.requests if r.method == "POST" and r.path.endswith("/eviction")]
        assert evictions == ["/api/v1/namespaces/default/pods/hog/eviction"]
        assert ctl.metrics.relief_evictions.labels("succeeded")._value.get() == 1
        assert [e["involvedObject"]["name"] for e in c.events("HotNodeRelief")] == [c.hot, "hog"]
        relief = ctl.last_relief
        assert relief is not None and [
            (p.name, dest in c.others) for p, dest in relief.reliefs[0].evictions
        ] == [("hog", True)]
        status = c.kube.get_object("ConfigMap", "scaler-status", "scaler-system")
        assert (
            status is not None
            and "hotNodeRelief:" in status["data"]["status"]
            and c.hot in status["data"]["status"]
        )
        # The replacement avoids the soft-tainted node, which by requests it would pick.
        replacement = pod_json("hog-2", "", owner=("ReplicaSet", "hog"), cpu_m=500)
        assert c.scheduler_choice(replacement, ignore_soft_taints=True) == c.hot
        assert c.replace_evicted("hog", "hog") != c.hot
        # The node cools: the taint stays for --hot-node-time, then goes.
        c.usage[c.hot] = (600, 4 * GI)  # 15%, and above what mid and small still use (350m)
        c.advance(10)
        ctl.run_once()
        assert c.hot_taint(c.hot) is not None
        c.advance(59)
        ctl.run_once()
        assert c.hot_taint(c.hot) is not None, "59 s under the waterlines"
        c.advance(1)
        ctl.run_once()
        assert c.hot_taint(c.hot) is None
        node = c.node(c.hot)
        assert node is not None and ANNOTATION_HOT_OWNER not in (node["metadata"].get("annotations") or {})
        assert "taint removed" in c.events("HotNodeRelief")[-1]["message"]
        evictions = [r.path for r in c.kube.requests if r.method == "POST" and r.path.endswith("/eviction")]
        assert len(evictions) == 1, "nothing else was evicted"


def test_without_relief_the_hot_node_is_left_alone(tmp_path: Path) -> None:
    with HotCluster(tmp_path) as c, c.controller(c.config(hot_node_relief=False)) as ctl:
        for _ in range(3):
            ctl.run_once()
            c.advance(120)
        assert c.hot_taint(c.hot) is None
        assert not [r for r in c.kube.requests if r.path.endswith("/eviction")]
        assert ctl.last_relief is None


def test_kill_mid_relief_then_restart_leaves_no_stale_taint(tmp_path: Path) -> None:
    with HotCluster(tmp_path, clock=WallClock()) as c:  # type: ignore[arg-type]
        # Evictions hang: the relief is in flight when the process dies.
        c.kube.delay("/api/v1/namespaces/", 30.0, match=lambda r: r.path.endswith("/eviction"), method="POST")
        proc = start_process(c, "--leader-elect=false", "--hot-node-relief", "--hot-node-time=0s",
                             "--scale-down-utilization-threshold=0")  # fmt: skip
        try:
            wait_for(lambda: c.hot_taint(c.hot) is not None, what="the hot node to be soft-tainted")
            wait_for(lambda: any(r.path.endswith("/eviction") for r in c.kube.requests), what="an eviction")
        finally:
            proc.kill()
            proc.wait(10)
        assert c.hot_taint(c.hot) is not None, "left behind by the killed process"
        c.kube.reset_faults()
        c.usage[c.hot] = COOL_USAGE  # so that the restart has no reason to relieve it again
        c.refresh_metrics()
        time.sleep(0.01)
        with c.controller(c.config()) as ctl:
            ctl.run_once()
        assert c.hot_taint(c.hot) is None
        node = c.node(c.hot)
        assert node is not None and ANNOTATION_HOT_OWNER not in (node["metadata"].get("annotations") or {})
