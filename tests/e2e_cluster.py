"""A small GKE-shaped cluster served by the loopback fakes, for controller end-to-end tests.

:class:`E2ECluster` starts a :class:`FakeKubeAPI` and a :class:`FakeGCE`, creates one node pool
(one MIG per zone) whose instances are the cluster's Nodes, puts DaemonSet and ReplicaSet pods,
PDBs and metrics on them, and builds controllers that talk real HTTP to both fakes. Time is a
manual clock: :meth:`advance` moves it and refreshes the metrics timestamps.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fakes.gce_api import FakeGCE
from fakes.kube_api import FakeKubeAPI
from waiting import DEFAULT_TIMEOUT, wait_for

from scaler.actuation.actuator import Actuator
from scaler.cloud.gke import GKEProvider, make_clients
from scaler.config import ScalerConfig
from scaler.controller import Controller
from scaler.kube.writer import KubeWriter
from scaler.observability import Metrics
from scaler.sources.kube import make_api_client
from scaler.sources.watch import WatchCache, snapshot_from_cache

GI = 2**30
T0 = 1_800_000_000.0
ZONES = ("europe-west1-b", "europe-west1-c", "europe-west1-d")


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Clock:
    """A manual clock (Unix seconds)."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class WallClock:
    """The real clock (Unix seconds), for an :class:`E2ECluster` whose process under test reads
    the real time: settable like :class:`Clock` in name only."""

    @property
    def now(self) -> float:
        return time.time()

    @now.setter
    def now(self, value: float) -> None:
        raise AssertionError("the wall clock cannot be moved")

    def __call__(self) -> float:
        return time.time()


def node_json(
    name: str, pool: str, zone: str, provider_id: str, cpu_m: int = 4000, mem: int = 16 * GI, created: float = T0
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "creationTimestamp": iso(created - 86_400),
            "labels": {
                "cloud.google.com/gke-nodepool": pool,
                "topology.kubernetes.io/zone": zone,
                "kubernetes.io/hostname": name,
            },
        },
        "spec": {"providerID": provider_id},
        "status": {
            "allocatable": {"cpu": f"{cpu_m}m", "memory": str(mem), "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": iso(created - 86_400)}],
        },
    }


def pod_json(
    name: str, node: str, *, owner: tuple[str, str], cpu_m: int = 200, mem: int = GI, labels: dict[str, str] | None = None,
    namespace: str = "default",
    created: float = T0,
    started: float | None = None,
    priority: int | None = None,
) -> dict[str, Any]:
    """A running pod; ``created`` minus an hour is its creationTimestamp, ``started`` (exactly)
    its status.startTime when given."""
    kind, owner_name = owner
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "creationTimestamp": iso(created - 3600),
            "labels": labels or {"app": owner_name},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": kind, "name": owner_name, "uid": f"uid-{owner_name}", "controller": True}
            ],
        },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": str(mem)}}}],
        },
        "status": {"phase": "Running", "qosClass": "Burstable"},
    }
    if started is not None:
        pod["status"]["startTime"] = iso(started)
    if priority is not None:
        pod["spec"]["priority"] = priority
    return pod


def workload_json(kind: str, name: str, replicas: int | None = 3, namespace: str = "default") -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": name}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": spec,
    }


def pdb_json(name: str, app: str, allowed: int, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-pdb-{name}"},
        "spec": {"selector": {"matchLabels": {"app": app}}, "maxUnavailable": 1},
        "status": {"disruptionsAllowed": allowed, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3},
    }


class E2ECluster:
    """Six nodes in pool ``pool-a`` (two per zone); the last two are underused.

    Busy nodes use 20% cpu and 60% memory (utilization 0.6, not a candidate, but room under
    TargetUsage); underused ones use 3% and 6%. Each node runs one DaemonSet pod; each underused
    node also runs two ``web`` pods (PDB ``web`` allows 1 disruption) and one ``api`` pod.
    """

    def __init__(self, tmp: Path, *, min_per_zone: int = 0, clock: Clock | None = None) -> None:
        self.tmp = tmp
        self.clock = clock or Clock()
        self.kube = FakeKubeAPI()
        self.gce = FakeGCE(project="acme", location="europe-west1", cluster="prod")
        self.min_per_zone = min_per_zone
        self.usage: dict[str, tuple[int, int]] = {}
        self.pod_usage: dict[str, tuple[int, int]] = {}
        """Pod name → (cpu millicores, memory bytes) in its PodMetrics (default 10m, 64Mi)."""

    def __enter__(self) -> E2ECluster:
        self.kube.start()
        self.gce.start()
        self.kube.grace_scale = 0.0
        self.kube.replace_evicted_pods = True
        self.kube.clock = self.clock
        self.kube.load_objects(self.objects())
        self.refresh_metrics()
        self.api = make_api_client(str(self.kube.write_kubeconfig(self.tmp / "kubeconfig")))
        return self

    def objects(self) -> list[dict[str, Any]]:
        """Create the node pools in the GCE fake, fill :attr:`usage`, and return the Kubernetes
        objects to load (subclasses build other clusters)."""
        instances = self.gce.add_pool("pool-a", ZONES, 2, min=self.min_per_zone, max=5)
        self.nodes = instances
        self.underused = instances[-2:]
        self.busy = instances[:-2]
        objects: list[dict[str, Any]] = []
        now = self.clock()
        for i, name in enumerate(instances):
            zone = self.gce.mig_of(name).zone
            objects.append(node_json(name, "pool-a", zone, self.gce.provider_id(name), created=now))
            objects.append(pod_json(f"ds-{i}", name, owner=("DaemonSet", "node-agent"), cpu_m=50, mem=GI // 8,
                                    namespace="kube-system", created=now))  # fmt: skip
            self.usage[name] = (800, int(9.6 * GI)) if name in self.busy else (120, GI)
        for j, name in enumerate(self.busy):
            objects.append(pod_json(f"backend-{j}", name, owner=("ReplicaSet", "backend"), cpu_m=1000, mem=4 * GI,
                                    created=now))  # fmt: skip
        for j, name in enumerate(self.underused):
            objects.append(pod_json(f"web-{j}", name, owner=("ReplicaSet", "web"), created=now))
            objects.append(pod_json(f"api-{j}", name, owner=("ReplicaSet", "api"), cpu_m=100, created=now))
        objects += [
            workload_json("ReplicaSet", "web"),
            workload_json("ReplicaSet", "api"),
            workload_json("ReplicaSet", "backend", 4),
            workload_json("DaemonSet", "node-agent", None, "kube-system"),
            pdb_json("web", "web", 1),
        ]
        return objects

    def __exit__(self, *exc: object) -> None:
        self.kube.close()
        self.gce.close()

    def refresh_metrics(self) -> None:
        """Serve NodeMetrics/PodMetrics stamped at the current clock."""
        now = iso(self.clock())
        live_nodes = {o["metadata"]["name"] for o in self.kube.objects("Node")}
        items = []
        for name, (cpu, mem) in self.usage.items():
            if name in live_nodes:
                items.append({"kind": "NodeMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
                              "metadata": {"name": name}, "timestamp": now, "window": "30s",
                              "usage": {"cpu": f"{cpu}m", "memory": str(mem)}})  # fmt: skip
        for pod in self.kube.objects("Pod"):
            meta = pod["metadata"]
            cpu, mem = self.pod_usage.get(meta["name"], (10, 64 * 2**20))
            items.append({"kind": "PodMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
                          "metadata": {"name": meta["name"], "namespace": meta["namespace"]}, "timestamp": now,
                          "window": "30s", "containers": [{"name": "c", "usage": {"cpu": f"{cpu}m", "memory": str(mem)}}]})  # fmt: skip
        for kind in ("NodeMetrics", "PodMetrics"):
            for old in self.kube.objects(kind):
                self.kube.delete_object(kind, old["metadata"]["name"], old["metadata"].get("namespace"))
        self.kube.load_objects(items)

    def advance(self, seconds: float) -> None:
        """Move the clock and re-stamp the metrics."""
        self.clock.now += seconds
        self.refresh_metrics()

    def config(self, **overrides: Any) -> ScalerConfig:
        base: dict[str, Any] = {
            "leader_elect": False,
            "node_delete_delay_after_taint": 0.0,
            "max_pod_eviction_time": 2.0,
            "gke_project": "acme",
            "gke_location": "europe-west1",
            "gke_cluster": "prod",
            "namespace": "scaler-system",
        }
        return ScalerConfig.from_mapping(base | overrides)

    def provider(self) -> GKEProvider:
        container, compute = make_clients(self.gce.url)
        return GKEProvider("acme", "europe-west1", "prod", container_client=container, compute_clients=compute,
                           retry_wait_seconds=0.01)  # fmt: skip

    @contextmanager
    def controller(
        self, config: ScalerConfig, *, dry_run: bool = False, leader: bool = True, source_problem: Any = None,
        fence: Any = None,
    ) -> Iterator[Controller]:
        """A controller wired to both fakes (watch cache, writer with fast retries); ``fence``:
        the lease fence of the writer and the actuator (none by default)."""
        cache = WatchCache(self.api)
        cache.start()
        assert cache.wait_synced(10)
        self.cache = cache
        writer = KubeWriter(self.api, config.instance_name, clock=self.clock, eviction_retry_seconds=0.05,
                            conflict_retry_seconds=0.01, replica="test", fence=fence)  # fmt: skip

        def actuator(*args: Any, **kw: Any) -> Actuator:
            return Actuator(*args, pod_poll_seconds=0.05, **kw)

        ctl = Controller(
            config, lambda now: snapshot_from_cache(cache, self.api, now), writer, self.provider(), Metrics(),
            dry_run=dry_run, identity="test", clock=self.clock, actuator_factory=actuator, source_problem=source_problem,
            fence=fence,
        )  # fmt: skip
        if leader:
            ctl.leader.set()
        try:
            yield ctl
        finally:
            ctl.shutdown(10)
            cache.stop()

    def wait_idle(self, ctl: Controller, timeout: float = DEFAULT_TIMEOUT) -> None:
        wait_for(ctl.actuator.idle, timeout, "actuation to finish")

    def wait_cache(self, predicate: Any, timeout: float = DEFAULT_TIMEOUT) -> None:
        wait_for(predicate, timeout, "the watch cache to catch up")

    def wait_cached_node(self, name: str) -> None:
        """Wait until the controller's watch cache holds node ``name`` as the fake API has it
        (taints and cordon): a loop run right after a write must not see the node as it was."""

        def caught_up() -> bool:
            node = self.node(name)
            cached = self.cache.records().by_kind["Node"].get(("", name))
            if node is None or cached is None:
                return node is None and cached is None
            spec = node.get("spec") or {}
            taints = [(t["key"], t.get("value") or "") for t in spec.get("taints") or []]
            return [(t.key, t.value) for t in cached.taints] == taints and cached.unschedulable == bool(
                spec.get("unschedulable")
            )

        self.wait_cache(caught_up)

    def node(self, name: str) -> dict[str, Any] | None:
        found = [o for o in self.kube.objects("Node") if o["metadata"]["name"] == name]
        return found[0] if found else None

    def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.kube.events() if reason is None or e.get("reason") == reason]
