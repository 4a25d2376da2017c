"""Deterministic generator of large GKE-shaped clusters for the benchmarks.

``generate(nodes)`` builds a cluster of about ``nodes`` × 30 pods from a fixed seed:

* **Real** (``benchmarks/data/bitbrains-samples.json.gz``, see :mod:`benchmarks.trace`): every
  application pod stands for a VM of the Bitbrains GWA-T-12 trace. A workload's pod template
  requests a fixed share (:data:`REQUEST_SHARE`) of its VM's provisioned cores and memory, and
  each replica's usage shape is that VM's usage at one hour of the sampled day, relative to its
  daily peak. Node shapes (allocatable of the GKE machine types) and the DaemonSet set with its
  summed requests come from the 2i2c GKE figures (``benchmarks/data/gke-figures.json``, copied
  from ``../shared/data/raw/gke-node-capacity-2i2c``), kube-system Deployments' requests from
  the libcloud GKE fixtures.
* **Synthesized**: names, namespaces, owners, the node pools and their share, the placement, the
  node load level (a share :data:`UNDERUSED_SHARE` of nodes is underused, the rest busy; pod
  usage is the trace shape scaled so that each node reaches its level), and the constraints at
  the rates of :data:`RATES` (taints and tolerations, nodeSelectors, required anti-affinity,
  topology spread, PDBs, local storage, safe-to-evict annotations, bare pods, Jobs, expendable
  pods, cordoned / NotReady / scale-down-disabled nodes, nodes without metrics).

The cluster is a list of API objects as ``kubectl get -o json`` prints them; it can be written
as a snapshot directory (:meth:`Cluster.write`: ``nodes.json``, ``pods.json``, ``pdbs.json``,
``workloads.json``, ``node-metrics.json``, ``pod-metrics.json``, one item per line) or turned into a
:class:`~scaler.model.snapshot.ClusterSnapshot` in memory (:meth:`Cluster.snapshot`), object by
object so that the raw dicts never all live at once.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.trace import FIGURES, VmSample, build_figures, load_samples
from scaler.model.snapshot import ClusterSnapshot, build_snapshot

__all__ = ["FILES", "RATES", "Cluster", "generate"]

SEED = 20130703
NOW = dt.datetime(2026, 11, 4, 14, 0, tzinfo=dt.UTC).timestamp()
METRICS_AGE_S = 12
CLUSTER, PROJECT, REGION = "bench", "acme-bench", "us-central1"
ZONES = (f"{REGION}-a", f"{REGION}-b", f"{REGION}-c")
MiB, GiB = 2**20, 2**30
PODS_PER_NODE = 30
REQUEST_SHARE = 0.15
"""Pod template requests: this share of the VM's provisioned cores and memory."""
UNDERUSED_SHARE = 0.3
"""Share of nodes whose real usage is low (utilization well under the 0.5 threshold)."""


# Node pools: (name, machine type, share of nodes, taint, extra labels).
POOLS: tuple[tuple[str, str, float, tuple[str, str] | None, dict[str, str]], ...] = (
    ("default-pool", "n1-standard-16", 0.62, None, {}),
    ("large-pool", "n1-standard-32", 0.13, None, {"disktype": "ssd"}),
    ("highmem-pool", "n2-highmem-16", 0.15, ("dedicated", "highmem"), {}),
    (
        "spot-pool",
        "n1-standard-8",
        0.10,
        ("cloud.google.com/gke-spot", "true"),
        {"cloud.google.com/gke-spot": "true"},
    ),
)

RATES: dict[str, float] = {
    # workload kinds (the rest are Deployments)
    "statefulset": 0.07,
    "job": 0.05,
    "bare": 0.01,
    # per Deployment / StatefulSet
    "pdb_deployment": 0.25,
    "pdb_statefulset": 0.9,
    "spread_zone_hard": 0.12,
    "spread_zone_soft": 0.08,
    "spread_host_hard": 0.03,
    "anti_affinity_deployment": 0.08,
    "anti_affinity_statefulset": 0.8,
    "node_selector_ssd": 0.03,
    # per workload
    "emptydir_disk": 0.02,
    "emptydir_memory": 0.04,
    "emptydir_allowed": 0.02,
    "hostpath": 0.003,
    "safe_to_evict_false": 0.007,
    "safe_to_evict_true": 0.02,
    "high_priority": 0.08,
    "expendable": 0.02,
    # per node
    "node_cordoned": 0.003,
    "node_not_ready": 0.003,
    "node_scale_down_disabled": 0.01,
    "node_no_metrics": 0.005,
}
"""Constraint rates (fractions of workloads or nodes)."""

NAMESPACES = ("checkout", "catalog", "payments", "search", "identity", "analytics", "batch", "internal-tools")
FILES = ("nodes.json", "pods.json", "pdbs.json", "workloads.json", "node-metrics.json", "pod-metrics.json")
DEFAULT_TOLERATIONS = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]


def _h(*parts: object, n: int = 10) -> str:
    return hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=16).hexdigest()[:n]


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(int(ts), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _suffix(rng: random.Random, n: int = 5) -> str:
    return "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(n))


def _unique_suffix(i: int, n: int = 5) -> str:
    """A pod-name suffix like the ReplicaSet controller's (``bcdf…``), distinct for every ``i`` below
    27**n: a DaemonSet's pods are named by their node's index, so no two collide."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    out = []
    for _ in range(n):
        i, r = divmod(i, len(alphabet))
        out.append(alphabet[r])
    return "".join(reversed(out))


def _gib(v: str) -> int:
    return int(float(v.rstrip("Gi")) * GiB)


def _load_figures() -> dict[str, Any]:
    if not FIGURES.exists():
        build_figures()
    with FIGURES.open(encoding="utf-8") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


@dataclass(slots=True)
class _Node:
    name: str
    pool: str
    machine: str
    zone: str
    cpu: int  # allocatable millicores
    mem: int  # allocatable bytes
    cap_cpu: int
    cap_mem: int
    taint: tuple[str, str] | None
    labels: dict[str, str]
    fill: float  # request fill target
    underused: bool
    cordoned: bool = False
    not_ready: bool = False
    disabled: bool = False
    no_metrics: bool = False
    used_cpu: int = 0
    used_mem: int = 0
    pods: list[int] = field(default_factory=list)  # indexes into Cluster.pods
    usage_cpu: int = 0
    usage_mem: int = 0


@dataclass(slots=True)
class _Workload:
    kind: str  # Deployment, StatefulSet, Job, bare, or kube-system kinds
    namespace: str
    name: str
    vm: VmSample
    cpu: int  # request millicores per container
    mem: int  # request bytes
    qos: str
    pools: tuple[str, ...]
    selector: dict[str, str]
    tolerations: list[dict[str, Any]]
    spread: list[dict[str, Any]]
    anti_affinity: bool
    volumes: list[dict[str, Any]]
    annotations: dict[str, str]
    priority: int
    pdb_allowed: int | None
    replicas: int = 0
    rs_hash: str = ""


@dataclass(slots=True)
class _Pod:
    workload: int
    ordinal: int
    name: str
    node: int
    usage_cpu_n: int  # nanocores
    usage_mem_ki: int
    created: int
    vm: int = -1  # the trace VM whose shape the pod's usage took (-1: none)


class Cluster:
    """One generated cluster: nodes, workloads and pods, all derived from ``seed``.

    Args:
        nodes: number of nodes.
        seed: the random seed; the same arguments always give the same objects.
        pods_per_node: target average pods per node, DaemonSet and mirror pods included.
    """

    def __init__(self, nodes: int, seed: int = SEED, pods_per_node: int = PODS_PER_NODE) -> None:
        self.size = nodes
        self.seed = seed
        self.now = NOW
        self.rng = random.Random(seed * 1_000_003 + nodes)
        figures = _load_figures()
        self.vms = [v for v in load_samples() if v.cores <= 16]
        self.daemonsets: list[tuple[str, int, int]] = figures["daemonsets"]
        self.system_deployments: list[dict[str, Any]] = figures["system_deployments"]
        self.capacities: dict[str, dict[str, Any]] = figures["instance_capacities"]
        self.nodes: list[_Node] = []
        self._names: set[str] = set()
        self.workloads: list[_Workload] = []
        self.pods: list[_Pod] = []
        self._make_nodes()
        system_per_node = len(self.daemonsets) + 1  # + kube-proxy
        self._app_budget = max(0, nodes * (pods_per_node - system_per_node))
        self._make_system_workloads()
        self._make_app_workloads()
        self._make_usage()

    # ---- construction ---------------------------------------------------------------------
    def _make_nodes(self) -> None:
        rng = self.rng
        counts = [round(self.size * share) for _, _, share, _, _ in POOLS]
        counts[0] += self.size - sum(counts)
        for (pool, machine, _, taint, extra), count in zip(POOLS, counts, strict=True):
            cap = self.capacities[machine]
            for i in range(count):
                name = f"gke-{CLUSTER}-{pool}-{_h(pool, n=8)}-{_h(pool, i, n=5)}"
                while name in self._names:
                    name += "x"
                self._names.add(name)
                zone = ZONES[i % len(ZONES)]
                underused = rng.random() < UNDERUSED_SHARE
                fill = rng.uniform(0.15, 0.55) if underused else rng.uniform(0.6, 0.92)
                if underused and rng.random() < 0.05:
                    fill = 0.0  # left empty by a recent scale-up
                labels = {
                    "beta.kubernetes.io/arch": "amd64",
                    "beta.kubernetes.io/instance-type": machine,
                    "beta.kubernetes.io/os": "linux",
                    "cloud.google.com/gke-boot-disk": "pd-balanced",
                    "cloud.google.com/gke-container-runtime": "containerd",
                    "cloud.google.com/gke-nodepool": pool,
                    "cloud.google.com/gke-os-distribution": "cos",
                    "cloud.google.com/machine-family": machine.split("-")[0],
                    "failure-domain.beta.kubernetes.io/region": REGION,
                    "failure-domain.beta.kubernetes.io/zone": zone,
                    "kubernetes.io/arch": "amd64",
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "node.kubernetes.io/instance-type": machine,
                    "topology.gke.io/zone": zone,
                    "topology.kubernetes.io/region": REGION,
                    "topology.kubernetes.io/zone": zone,
                    **extra,
                }
                node = _Node(
                    name=name,
                    pool=pool,
                    machine=machine,
                    zone=zone,
                    cpu=round(float(cap["cpu_allocatable_low"]) * 1000),
                    mem=_gib(cap["mem_allocatable_low"]),
                    cap_cpu=round(float(cap["cpu_capacity_low"]) * 1000),
                    cap_mem=_gib(cap["mem_capacity_low"]),
                    taint=taint,
                    labels=labels,
                    fill=fill,
                    underused=underused,
                    cordoned=rng.random() < RATES["node_cordoned"],
                    not_ready=rng.random() < RATES["node_not_ready"],
                    disabled=rng.random() < RATES["node_scale_down_disabled"],
                    no_metrics=rng.random() < RATES["node_no_metrics"],
                )
                for _, c, m in self.daemonsets:
                    node.used_cpu += c
                    node.used_mem += m * MiB
                node.used_cpu += 100  # kube-proxy
                self.nodes.append(node)
        self._by_pool: dict[str, list[int]] = {}
        self._by_pool_zone: dict[tuple[str, str], list[int]] = {}
        for i, n in enumerate(self.nodes):
            self._by_pool.setdefault(n.pool, []).append(i)
            self._by_pool_zone.setdefault((n.pool, n.zone), []).append(i)

    def _place(self, w: _Workload, widx: int, count: int, *, relaxed: bool = False) -> int:
        """Place ``count`` replicas of ``w``; returns how many found a node."""
        rng = self.rng
        placed = 0
        used_nodes: set[int] = set()
        zone_spread = any(s["topologyKey"] == "topology.kubernetes.io/zone" for s in w.spread)
        host_spread = any(s["topologyKey"] == "kubernetes.io/hostname" for s in w.spread)
        for k in range(count):
            zone = ZONES[k % len(ZONES)] if zone_spread else None
            cands: list[int] = []
            for pool in w.pools:
                cands.extend(self._by_pool_zone[(pool, zone)] if zone else self._by_pool[pool])
            if not cands:
                break
            node_idx = -1
            for attempt in range(60):
                i = cands[rng.randrange(len(cands))]
                n = self.nodes[i]
                if (w.anti_affinity or host_spread) and i in used_nodes:
                    continue
                limit = 0.97 if (relaxed or attempt >= 40) else n.fill
                if (
                    n.used_cpu + w.cpu <= n.cpu * limit
                    and n.used_mem + w.mem <= n.mem * limit
                    and len(n.pods) < 100
                    and not n.cordoned
                    and n.fill > 0
                ):
                    node_idx = i
                    break
            if node_idx < 0:
                continue
            n = self.nodes[node_idx]
            n.used_cpu += w.cpu
            n.used_mem += w.mem
            used_nodes.add(node_idx)
            name = {
                "Deployment": f"{w.name}-{w.rs_hash}-{_suffix(rng)}",
                "StatefulSet": f"{w.name}-{k}",
                "Job": f"{w.name}-{_suffix(rng)}",
                "bare": f"{w.name}-{k}" if count > 1 else w.name,
            }.get(w.kind, f"{w.name}-{w.rs_hash}-{_suffix(rng)}")
            vm = self.vms[rng.randrange(len(self.vms))] if w.kind != "StatefulSet" else w.vm
            hour = rng.randrange(24)
            peak_c = max(vm.cpu_used_mhz) or 1.0
            peak_m = max(vm.mem_used_kb) or 1.0
            shape_c = max(0.05, vm.cpu_used_mhz[hour] / peak_c)
            shape_m = max(0.05, vm.mem_used_kb[hour] / peak_m)
            self.pods.append(
                _Pod(
                    widx,
                    k,
                    name,
                    node_idx,
                    int(shape_c * max(w.cpu, 10) * 1e6),  # nanocores, scaled per node later
                    int(shape_m * max(w.mem, 32 * MiB) / 1024),
                    int(self.now - rng.randint(3600, 30 * 86400)),
                    vm.vm,
                )
            )
            n.pods.append(len(self.pods) - 1)
            placed += 1
        return placed

    def _make_system_workloads(self) -> None:
        for d in self.system_deployments:
            name = d["name"]
            replicas = int(d["replicas"])
            if name == "kube-dns":
                replicas = max(2, self.size // 16)  # kube-dns-autoscaler's linear mode
            elif name == "konnectivity-agent":
                replicas = max(3, self.size // 50)
            w = _Workload(
                kind="Deployment",
                namespace="kube-system",
                name=name,
                vm=self.vms[0],
                cpu=int(d["cpu"]),
                mem=int(d["mem"]),
                qos="system",
                pools=("default-pool", "large-pool"),
                selector={},
                tolerations=[{"key": "CriticalAddonsOnly", "operator": "Exists"}],
                spread=[],
                anti_affinity=False,
                volumes=[],
                annotations={},
                priority=2000000000 if d.get("priorityClassName") else 0,
                pdb_allowed=1 if name == "kube-dns" else None,
                rs_hash=_h("rs", "kube-system", name),
            )
            self.workloads.append(w)
            w.replicas = self._place(w, len(self.workloads) - 1, replicas, relaxed=True)

    def _make_app_workloads(self) -> None:
        rng = self.rng
        placed_total = 0
        misses = 0
        widx = 0
        while placed_total < self._app_budget and misses < 50:
            widx += 1
            vm = self.vms[rng.randrange(len(self.vms))]
            r = rng.random()
            if r < RATES["statefulset"]:
                kind = "StatefulSet"
            elif r < RATES["statefulset"] + RATES["job"]:
                kind = "Job"
            elif r < RATES["statefulset"] + RATES["job"] + RATES["bare"]:
                kind = "bare"
            else:
                kind = "Deployment"
            replicas = {
                "Deployment": min(40, max(1, int(rng.lognormvariate(1.4, 0.7)))),
                "StatefulSet": rng.choice((3, 3, 3, 5)),
                "Job": rng.randint(1, 4),
                "bare": 1,
            }[kind]
            ns = "batch" if kind == "Job" else NAMESPACES[widx % len(NAMESPACES)]
            name = (
                f"{ns.split('-')[0]}-job{widx:05d}" if kind == "Job" else f"{ns.split('-')[0]}-app{widx:05d}"
            )
            cpu = max(20, round(vm.cores * 1000 * REQUEST_SHARE / 10) * 10)
            mem = max(32 * MiB, int(vm.mem_kb * 1024 * REQUEST_SHARE) // MiB * MiB)
            mem = min(mem, 24 * GiB)
            pools: tuple[str, ...] = ("default-pool", "large-pool")
            selector: dict[str, str] = {}
            tolerations: list[dict[str, Any]] = []
            if mem / max(cpu, 1) > 3 * GiB / 1000 * 1.2:  # memory-heavy: highmem pool
                pools = ("highmem-pool",)
                selector = {"cloud.google.com/gke-nodepool": "highmem-pool"}
                tolerations = [
                    {"key": "dedicated", "operator": "Equal", "value": "highmem", "effect": "NoSchedule"}
                ]
            elif kind == "Job" or (ns == "analytics" and rng.random() < 0.5):
                pools = ("spot-pool",)
                selector = {"cloud.google.com/gke-spot": "true"}
                tolerations = [
                    {
                        "key": "cloud.google.com/gke-spot",
                        "operator": "Equal",
                        "value": "true",
                        "effect": "NoSchedule",
                    }
                ]
            elif kind in ("Deployment", "StatefulSet") and rng.random() < RATES["node_selector_ssd"]:
                pools = ("large-pool",)
                selector = {"disktype": "ssd"}
            spread: list[dict[str, Any]] = []
            anti = False
            pdb: int | None = None
            labels_sel = {"app": name}
            if kind == "Deployment":
                x = rng.random()
                if replicas >= 3 and x < RATES["spread_zone_hard"]:
                    spread.append(self._spread("topology.kubernetes.io/zone", "DoNotSchedule", labels_sel))
                elif replicas >= 3 and x < RATES["spread_zone_hard"] + RATES["spread_zone_soft"]:
                    spread.append(self._spread("topology.kubernetes.io/zone", "ScheduleAnyway", labels_sel))
                if rng.random() < RATES["spread_host_hard"]:
                    spread.append(self._spread("kubernetes.io/hostname", "DoNotSchedule", labels_sel))
                anti = rng.random() < RATES["anti_affinity_deployment"]
                if rng.random() < RATES["pdb_deployment"]:
                    pdb = rng.choices((1, 0, 2), (75, 10, 15))[0]
            elif kind == "StatefulSet":
                anti = rng.random() < RATES["anti_affinity_statefulset"]
                if rng.random() < RATES["pdb_statefulset"]:
                    pdb = rng.choices((1, 0), (85, 15))[0]
            volumes: list[dict[str, Any]] = []
            annotations: dict[str, str] = {}
            v = rng.random()
            acc = RATES["emptydir_disk"]
            if v < acc:
                volumes.append({"name": "scratch", "emptyDir": {}})
            elif v < (acc := acc + RATES["emptydir_memory"]):
                volumes.append({"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "256Mi"}})
            elif v < (acc := acc + RATES["emptydir_allowed"]):
                volumes.append({"name": "scratch", "emptyDir": {}})
                annotations["cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"] = "scratch"
            elif v < acc + RATES["hostpath"]:
                volumes.append({"name": "host-logs", "hostPath": {"path": "/var/log", "type": "Directory"}})
            s = rng.random()
            if s < RATES["safe_to_evict_false"]:
                annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] = "false"
            elif s < RATES["safe_to_evict_false"] + RATES["safe_to_evict_true"]:
                annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] = "true"
            p = rng.random()
            priority = (
                1000
                if p < RATES["high_priority"]
                else (-100 if p < RATES["high_priority"] + RATES["expendable"] else 0)
            )
            qos = rng.choices(
                ("Guaranteed", "Burstable2x", "BurstableNoLimit", "BestEffort"), (15, 50, 33, 2)
            )[0]
            w = _Workload(
                kind=kind,
                namespace=ns,
                name=name,
                vm=vm,
                cpu=cpu,
                mem=mem,
                qos=qos,
                pools=pools,
                selector=selector,
                tolerations=tolerations,
                spread=spread,
                anti_affinity=anti,
                volumes=volumes,
                annotations=annotations,
                priority=priority,
                pdb_allowed=pdb,
                rs_hash=_h("rs", ns, name),
            )
            self.workloads.append(w)
            count = min(replicas, self._app_budget - placed_total)
            w.replicas = self._place(w, len(self.workloads) - 1, count)
            placed_total += w.replicas
            misses = misses + 1 if w.replicas == 0 else 0

    @staticmethod
    def _spread(key: str, when: str, labels: dict[str, str]) -> dict[str, Any]:
        return {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": dict(labels)},
        }

    def _make_usage(self) -> None:
        """Node usage from its load class; pod usage = the trace shape scaled to fit under it."""
        rng = self.rng
        for n in self.nodes:
            if n.underused:
                cpu_f, mem_f = rng.uniform(0.02, 0.40), rng.uniform(0.05, 0.45)
            else:
                hot = rng.uniform(0.52, 0.92)
                other = rng.uniform(0.2, 0.8)
                cpu_f, mem_f = (hot, other) if rng.random() < 0.5 else (other, hot)
            if not n.pods:
                cpu_f, mem_f = rng.uniform(0.01, 0.03), rng.uniform(0.03, 0.06)
            n.usage_cpu = int(n.cpu * cpu_f)
            n.usage_mem = int(n.mem * mem_f)
            sys_cpu_n = (len(self.daemonsets) + 1) * 4_000_000
            sys_mem_ki = (len(self.daemonsets) + 1) * 25_000
            app_cpu_n = sum(self.pods[p].usage_cpu_n for p in n.pods)
            app_mem_ki = sum(self.pods[p].usage_mem_ki for p in n.pods)
            target_cpu_n = max(0, n.usage_cpu * 1_000_000 - sys_cpu_n)
            target_mem_ki = max(0, n.usage_mem // 1024 - sys_mem_ki)
            kc = target_cpu_n / app_cpu_n if app_cpu_n else 0.0
            km = target_mem_ki / app_mem_ki if app_mem_ki else 0.0
            for p in n.pods:
                pod = self.pods[p]
                pod.usage_cpu_n = int(pod.usage_cpu_n * kc)
                pod.usage_mem_ki = int(pod.usage_mem_ki * km)

    # ---- API objects -----------------------------------------------------------------------
    def node_objects(self) -> Iterator[dict[str, Any]]:
        """v1 Node objects."""
        for i, n in enumerate(self.nodes):
            taints = []
            if n.taint:
                taints.append({"key": n.taint[0], "value": n.taint[1], "effect": "NoSchedule"})
            if n.cordoned:
                taints.append(
                    {
                        "key": "node.kubernetes.io/unschedulable",
                        "effect": "NoSchedule",
                        "timeAdded": _iso(self.now - 600),
                    }
                )
            if n.not_ready:
                taints.append(
                    {
                        "key": "node.kubernetes.io/not-ready",
                        "effect": "NoSchedule",
                        "timeAdded": _iso(self.now - 900),
                    }
                )
            annotations = {
                "container.googleapis.com/instance_id": str(int(_h("id", n.name, n=15), 16)),
                "csi.volume.kubernetes.io/nodeid": json.dumps(
                    {"pd.csi.storage.gke.io": f"projects/{PROJECT}/zones/{n.zone}/instances/{n.name}"}
                ),
                "node.alpha.kubernetes.io/ttl": "0",
                "node.gke.io/last-applied-node-labels": "",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            }
            if n.disabled:
                annotations["cluster-autoscaler.kubernetes.io/scale-down-disabled"] = "true"
            spec: dict[str, Any] = {
                "podCIDR": f"10.{64 + i // 250}.{i % 250}.0/24",
                "podCIDRs": [f"10.{64 + i // 250}.{i % 250}.0/24"],
                "providerID": f"gce://{PROJECT}/{n.zone}/{n.name}",
            }
            if n.cordoned:
                spec["unschedulable"] = True
            if taints:
                spec["taints"] = taints
            ready_ts = _iso(self.now - (900 if n.not_ready else 20 * 86400))
            conditions = [
                {
                    "type": t,
                    "status": "False",
                    "reason": r,
                    "message": m,
                    "lastHeartbeatTime": _iso(self.now - 30),
                    "lastTransitionTime": _iso(self.now - 20 * 86400),
                }
                for t, r, m in (
                    (
                        "FrequentContainerdRestart",
                        "NoFrequentContainerdRestart",
                        "containerd is functioning properly",
                    ),
                    ("KernelDeadlock", "KernelHasNoDeadlock", "kernel has no deadlock"),
                    (
                        "MemoryPressure",
                        "KubeletHasSufficientMemory",
                        "kubelet has sufficient memory available",
                    ),
                    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                )
            ]
            conditions.append(
                {
                    "type": "Ready",
                    "status": "False" if n.not_ready else "True",
                    "reason": "KubeletNotReady" if n.not_ready else "KubeletReady",
                    "message": "container runtime is down"
                    if n.not_ready
                    else "kubelet is posting ready status. AppArmor enabled",
                    "lastHeartbeatTime": _iso(self.now - 20),
                    "lastTransitionTime": ready_ts,
                }
            )
            yield {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": n.name,
                    "uid": _h("node", n.name, n=32),
                    "resourceVersion": str(1000000 + i),
                    "creationTimestamp": _iso(self.now - 20 * 86400 - i),
                    "labels": n.labels,
                    "annotations": annotations,
                },
                "spec": spec,
                "status": {
                    "addresses": [
                        {"type": "InternalIP", "address": f"10.128.{i // 250}.{i % 250 + 2}"},
                        {
                            "type": "ExternalIP",
                            "address": f"34.{70 + i // 65000}.{(i // 250) % 250}.{i % 250 + 2}",
                        },
                        {"type": "Hostname", "address": n.name},
                    ],
                    "allocatable": {
                        "cpu": f"{n.cpu}m",
                        "ephemeral-storage": "47060071478",
                        "hugepages-1Gi": "0",
                        "hugepages-2Mi": "0",
                        "memory": f"{n.mem // 1024}Ki",
                        "pods": "110",
                    },
                    "capacity": {
                        "cpu": str(n.cap_cpu // 1000),
                        "ephemeral-storage": "98831908Ki",
                        "hugepages-1Gi": "0",
                        "hugepages-2Mi": "0",
                        "memory": f"{n.cap_mem // 1024}Ki",
                        "pods": "110",
                    },
                    "conditions": conditions,
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                    "nodeInfo": {
                        "architecture": "amd64",
                        "bootID": _h("boot", n.name, n=32),
                        "containerRuntimeVersion": "containerd://1.7.10",
                        "kernelVersion": "6.1.58+",
                        "kubeProxyVersion": "v1.28.4-gke.1083000",
                        "kubeletVersion": "v1.28.4-gke.1083000",
                        "machineID": _h("machine", n.name, n=32),
                        "operatingSystem": "linux",
                        "osImage": "Container-Optimized OS from Google",
                        "systemUUID": _h("uuid", n.name, n=32),
                    },
                },
            }

    def _pod_object(
        self,
        namespace: str,
        name: str,
        node: _Node,
        owner: tuple[str, str, str] | None,
        labels: dict[str, str],
        containers: list[dict[str, Any]],
        created: float,
        *,
        annotations: dict[str, str] | None = None,
        extra_spec: dict[str, Any] | None = None,
        qos: str = "Burstable",
        ip: int = 0,
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "name": name,
            "namespace": namespace,
            "uid": _h("pod", namespace, name, n=32),
            "resourceVersion": str(2000000 + ip),
            "creationTimestamp": _iso(created),
            "labels": labels,
        }
        if owner is not None:
            meta["generateName"] = name[: name.rfind("-") + 1]
            meta["ownerReferences"] = [
                {
                    "apiVersion": owner[0],
                    "kind": owner[1],
                    "name": owner[2],
                    "uid": _h(owner[1], namespace, owner[2], n=32),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
        if annotations:
            meta["annotations"] = annotations
        token = f"kube-api-access-{_h('tok', name, n=5)}"
        for c in containers:
            c.setdefault("imagePullPolicy", "IfNotPresent")
            c["terminationMessagePath"] = "/dev/termination-log"
            c["terminationMessagePolicy"] = "File"
            c.setdefault("volumeMounts", []).append(
                {
                    "name": token,
                    "readOnly": True,
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                }
            )
        spec: dict[str, Any] = {
            "containers": containers,
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": True,
            "nodeName": node.name,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "serviceAccount": "default",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "tolerations": list(DEFAULT_TOLERATIONS),
            "volumes": [
                {
                    "name": token,
                    "projected": {
                        "defaultMode": 420,
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "path": "namespace",
                                            "fieldRef": {
                                                "apiVersion": "v1",
                                                "fieldPath": "metadata.namespace",
                                            },
                                        }
                                    ]
                                }
                            },
                        ],
                    },
                }
            ],
        }
        for k, v in (extra_spec or {}).items():
            if k in ("tolerations", "volumes"):
                spec[k] = v + spec[k]
            else:
                spec[k] = v
        ts = _iso(created)
        pod_ip = f"10.{64 + (ip // 250) % 180}.{ip % 250}.{(ip * 7) % 250 + 2}"
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": spec,
            "status": {
                "conditions": [
                    {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": ts}
                    for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
                ],
                "containerStatuses": [
                    {
                        "containerID": f"containerd://{_h('ctr', name, c['name'], n=32)}",
                        "image": c["image"],
                        "imageID": f"{c['image'].split(':')[0]}@sha256:{_h('img', c['image'], n=32)}",
                        "lastState": {},
                        "name": c["name"],
                        "ready": True,
                        "restartCount": 0,
                        "started": True,
                        "state": {"running": {"startedAt": ts}},
                    }
                    for c in containers
                ],
                "hostIP": f"10.128.{0}.{2}",
                "phase": "Running",
                "podIP": pod_ip,
                "podIPs": [{"ip": pod_ip}],
                "qosClass": qos,
                "startTime": ts,
            },
        }

    def _system_pods(self, i: int, n: _Node) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
        """DaemonSet pods and the kube-proxy mirror pod of node ``i`` (with their usage)."""
        created = self.now - 20 * 86400
        for k, (ds, c, m) in enumerate(self.daemonsets):
            name = f"{ds}-{_unique_suffix(i)}"
            cont = [
                {
                    "name": ds,
                    "image": f"gke.gcr.io/{ds}:v1.28",
                    "resources": {"requests": {"cpu": f"{c}m", "memory": f"{m}Mi"}},
                }
            ]
            obj = self._pod_object(
                "kube-system",
                name,
                n,
                ("apps/v1", "DaemonSet", ds),
                {
                    "k8s-app": ds,
                    "controller-revision-hash": _h("crh", ds, n=10),
                    "pod-template-generation": "3",
                },
                cont,
                created,
                extra_spec={
                    "tolerations": [{"operator": "Exists"}],
                    "priorityClassName": "system-node-critical",
                    "priority": 2000001000,
                    "hostNetwork": ds in ("calico-node", "netd", "fluentbit-gke", "gke-metadata-server"),
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchFields": [
                                            {"key": "metadata.name", "operator": "In", "values": [n.name]}
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                },
                ip=i * 40 + k,
            )
            yield (
                obj,
                [
                    {
                        "name": ds,
                        "usage": {"cpu": f"{(3 + k) * 1_000_000}n", "memory": f"{20_000 + k * 1000}Ki"},
                    }
                ],
            )
        kp = self._pod_object(
            "kube-system",
            f"kube-proxy-{n.name}",
            n,
            ("v1", "Node", n.name),
            {"component": "kube-proxy", "tier": "node"},
            [
                {
                    "name": "kube-proxy",
                    "image": "gke.gcr.io/kube-proxy-amd64:v1.28.4-gke.1083000",
                    "resources": {"requests": {"cpu": "100m"}},
                }
            ],
            created,
            annotations={
                "kubernetes.io/config.mirror": _h("mirror", n.name, n=32),
                "kubernetes.io/config.source": "file",
            },
            extra_spec={
                "priorityClassName": "system-node-critical",
                "priority": 2000001000,
                "hostNetwork": True,
            },
            ip=i * 40 + 39,
        )
        yield kp, [{"name": "kube-proxy", "usage": {"cpu": "2000000n", "memory": "18000Ki"}}]

    def _app_pod(self, p: _Pod, ip: int) -> dict[str, Any]:
        w = self.workloads[p.workload]
        n = self.nodes[p.node]
        owner = {
            "Deployment": ("apps/v1", "ReplicaSet", f"{w.name}-{w.rs_hash}"),
            "StatefulSet": ("apps/v1", "StatefulSet", w.name),
            "Job": ("batch/v1", "Job", w.name),
        }.get(w.kind)
        labels = {"app": w.name}
        if w.kind == "Deployment":
            labels["pod-template-hash"] = w.rs_hash
        elif w.kind == "StatefulSet":
            labels["statefulset.kubernetes.io/pod-name"] = p.name
        if w.namespace == "kube-system":
            labels = {"k8s-app": w.name, "pod-template-hash": w.rs_hash}
        res: dict[str, Any]
        cpu, mem = f"{w.cpu}m", f"{w.mem // MiB}Mi"
        qos = "Burstable"
        if w.qos == "Guaranteed":
            res = {"requests": {"cpu": cpu, "memory": mem}, "limits": {"cpu": cpu, "memory": mem}}
            qos = "Guaranteed"
        elif w.qos == "Burstable2x":
            res = {
                "requests": {"cpu": cpu, "memory": mem},
                "limits": {"cpu": f"{2 * w.cpu}m", "memory": f"{2 * (w.mem // MiB)}Mi"},
            }
        elif w.qos == "BestEffort":
            res = {}
            qos = "BestEffort"
        else:
            res = {"requests": {"cpu": cpu, "memory": mem}}
        cont: dict[str, Any] = {
            "name": w.name.split("-")[0] if w.namespace != "kube-system" else w.name,
            "image": f"europe-docker.pkg.dev/{PROJECT}/apps/{w.name}:1.{w.rs_hash[:3]}",
            "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
            "env": [
                {"name": "APP", "value": w.name},
                {
                    "name": "POD_NAME",
                    "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
                },
            ],
            "resources": res,
        }
        if w.volumes:
            cont["volumeMounts"] = [{"name": v["name"], "mountPath": "/data"} for v in w.volumes]
        extra: dict[str, Any] = {}
        if w.tolerations:
            extra["tolerations"] = w.tolerations
        if w.selector:
            extra["nodeSelector"] = w.selector
        if w.volumes:
            extra["volumes"] = w.volumes
        if w.spread:
            extra["topologySpreadConstraints"] = w.spread
        if w.anti_affinity:
            extra["affinity"] = {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchLabels": {"app": w.name}},
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ]
                }
            }
        if w.priority:
            extra["priority"] = w.priority
            extra["priorityClassName"] = {1000: "high", -100: "best-effort-batch"}.get(
                w.priority, "system-cluster-critical"
            )
        if w.kind == "Job":
            extra["restartPolicy"] = "Never"
        if w.kind == "StatefulSet":
            extra["hostname"] = p.name
            extra["subdomain"] = w.name
        return self._pod_object(
            w.namespace,
            p.name,
            n,
            owner,
            labels,
            [cont],
            p.created,
            annotations=dict(w.annotations) or None,
            extra_spec=extra,
            qos=qos,
            ip=ip,
        )

    def pod_objects(self) -> Iterator[dict[str, Any]]:
        """v1 Pod objects: per node, its system pods then its application pods."""
        for obj, _ in self._pods_with_usage():
            yield obj

    def _pods_with_usage(self) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
        for i, n in enumerate(self.nodes):
            yield from self._system_pods(i, n)
            for k, pi in enumerate(n.pods):
                p = self.pods[pi]
                obj = self._app_pod(p, i * 40 + 10 + k % 29)
                cname = obj["spec"]["containers"][0]["name"]
                yield (
                    obj,
                    [{"name": cname, "usage": {"cpu": f"{p.usage_cpu_n}n", "memory": f"{p.usage_mem_ki}Ki"}}],
                )

    def pod_metrics_objects(self) -> Iterator[dict[str, Any]]:
        """metrics.k8s.io PodMetrics items (kind set, as the snapshot loader sets it)."""
        ts = _iso(self.now - METRICS_AGE_S)
        for obj, usage in self._pods_with_usage():
            if self.nodes_by_name[obj["spec"]["nodeName"]].no_metrics:
                continue
            meta = obj["metadata"]
            yield {
                "kind": "PodMetrics",
                "apiVersion": "metrics.k8s.io/v1beta1",
                "metadata": {
                    "name": meta["name"],
                    "namespace": meta["namespace"],
                    "creationTimestamp": _iso(self.now),
                    "labels": meta["labels"],
                },
                "timestamp": ts,
                "window": "30s",
                "containers": usage,
            }

    @property
    def nodes_by_name(self) -> dict[str, _Node]:
        """Nodes by name."""
        return {n.name: n for n in self.nodes}

    def node_metrics_objects(self) -> Iterator[dict[str, Any]]:
        """metrics.k8s.io NodeMetrics items."""
        ts = _iso(self.now - METRICS_AGE_S)
        for n in self.nodes:
            if n.no_metrics:
                continue
            yield {
                "kind": "NodeMetrics",
                "apiVersion": "metrics.k8s.io/v1beta1",
                "metadata": {"name": n.name, "creationTimestamp": _iso(self.now), "labels": n.labels},
                "timestamp": ts,
                "window": "20.029s",
                "usage": {"cpu": f"{n.usage_cpu * 1_000_000}n", "memory": f"{n.usage_mem // 1024}Ki"},
            }

    def pdb_objects(self) -> Iterator[dict[str, Any]]:
        """policy/v1 PodDisruptionBudgets."""
        for w in self.workloads:
            if w.pdb_allowed is None or w.replicas == 0:
                continue
            sel = {"k8s-app": w.name} if w.namespace == "kube-system" else {"app": w.name}
            healthy = w.replicas
            yield {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {
                    "name": w.name,
                    "namespace": w.namespace,
                    "uid": _h("pdb", w.namespace, w.name, n=32),
                    "generation": 1,
                    "resourceVersion": "1",
                    "creationTimestamp": _iso(self.now - 40 * 86400),
                },
                "spec": {"maxUnavailable": max(w.pdb_allowed, 0) or 1, "selector": {"matchLabels": sel}}
                if w.pdb_allowed
                else {"minAvailable": healthy, "selector": {"matchLabels": sel}},
                "status": {
                    "observedGeneration": 1,
                    "currentHealthy": healthy,
                    "desiredHealthy": healthy - w.pdb_allowed,
                    "expectedPods": healthy,
                    "disruptionsAllowed": w.pdb_allowed,
                    "conditions": [
                        {
                            "type": "DisruptionAllowed",
                            "status": "True" if w.pdb_allowed else "False",
                            "reason": "SufficientPods" if w.pdb_allowed else "InsufficientPods",
                            "message": "",
                            "observedGeneration": 1,
                            "lastTransitionTime": _iso(self.now - 86400),
                        }
                    ],
                },
            }

    def workload_objects(self) -> Iterator[dict[str, Any]]:
        """Deployments, ReplicaSets, StatefulSets, Jobs and DaemonSets."""

        def meta(
            kind: str, ns: str, name: str, labels: dict[str, str], owner: tuple[str, str] | None = None
        ) -> dict[str, Any]:
            m: dict[str, Any] = {
                "name": name,
                "namespace": ns,
                "uid": _h(kind, ns, name, n=32),
                "resourceVersion": "1",
                "generation": 1,
                "creationTimestamp": _iso(self.now - 40 * 86400),
                "labels": labels,
            }
            if owner:
                m["ownerReferences"] = [
                    {
                        "apiVersion": "apps/v1",
                        "kind": owner[0],
                        "name": owner[1],
                        "uid": _h(owner[0], ns, owner[1], n=32),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ]
            return m

        def template(labels: dict[str, str], image: str) -> dict[str, Any]:
            return {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": image}]},
            }

        for w in self.workloads:
            if w.kind == "bare" or w.replicas == 0:
                continue
            sel = {"k8s-app": w.name} if w.namespace == "kube-system" else {"app": w.name}
            status = {
                "replicas": w.replicas,
                "readyReplicas": w.replicas,
                "availableReplicas": w.replicas,
                "observedGeneration": 1,
            }
            image = f"acme/{w.name}:1"
            if w.kind == "Deployment":
                rs = f"{w.name}-{w.rs_hash}"
                yield {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": meta("Deployment", w.namespace, w.name, sel),
                    "spec": {
                        "replicas": w.replicas,
                        "selector": {"matchLabels": sel},
                        "template": template(sel, image),
                    },
                    "status": {**status, "updatedReplicas": w.replicas},
                }
                rs_sel = {**sel, "pod-template-hash": w.rs_hash}
                yield {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "metadata": meta("ReplicaSet", w.namespace, rs, rs_sel, ("Deployment", w.name)),
                    "spec": {
                        "replicas": w.replicas,
                        "selector": {"matchLabels": rs_sel},
                        "template": template(rs_sel, image),
                    },
                    "status": {**status, "fullyLabeledReplicas": w.replicas},
                }
            elif w.kind == "StatefulSet":
                yield {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "metadata": meta("StatefulSet", w.namespace, w.name, sel),
                    "spec": {
                        "replicas": w.replicas,
                        "serviceName": w.name,
                        "selector": {"matchLabels": sel},
                        "template": template(sel, image),
                    },
                    "status": {**status, "currentReplicas": w.replicas},
                }
            elif w.kind == "Job":
                yield {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": meta("Job", w.namespace, w.name, sel),
                    "spec": {
                        "parallelism": w.replicas,
                        "completions": w.replicas,
                        "backoffLimit": 6,
                        "selector": {"matchLabels": sel},
                        "template": template(sel, image),
                    },
                    "status": {"active": w.replicas, "startTime": _iso(self.now - 7200)},
                }
        n = len(self.nodes)
        for ds, _, _ in self.daemonsets:
            sel = {"k8s-app": ds}
            yield {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": meta("DaemonSet", "kube-system", ds, sel),
                "spec": {
                    "selector": {"matchLabels": sel},
                    "template": template(sel, f"gke.gcr.io/{ds}:v1.28"),
                },
                "status": {
                    "desiredNumberScheduled": n,
                    "currentNumberScheduled": n,
                    "numberReady": n,
                    "numberAvailable": n,
                    "updatedNumberScheduled": n,
                    "numberMisscheduled": 0,
                    "observedGeneration": 1,
                },
            }

    # ---- outputs ---------------------------------------------------------------------------
    def objects(self) -> dict[str, Callable[[], Iterator[dict[str, Any]]]]:
        """Snapshot file name → a function yielding that file's items."""
        return {
            "nodes.json": self.node_objects,
            "pods.json": self.pod_objects,
            "pdbs.json": self.pdb_objects,
            "workloads.json": self.workload_objects,
            "node-metrics.json": self.node_metrics_objects,
            "pod-metrics.json": self.pod_metrics_objects,
        }

    def iter_objects(self) -> Iterator[dict[str, Any]]:
        """Every API object of the cluster, file by file."""
        for make in self.objects().values():
            yield from make()

    def pod_series(self) -> dict[str, str]:
        """``namespace/name`` → the Bitbrains VM id (a series of the "Rnd" trace) whose usage
        shape each application pod took, for a replay that follows the trace."""
        return {f"{self.workloads[p.workload].namespace}/{p.name}": str(p.vm) for p in self.pods if p.vm >= 0}

    def snapshot(self) -> ClusterSnapshot:
        """The cluster as the engine sees it, built object by object (no files)."""
        return build_snapshot(self.iter_objects())

    def write(self, out: Path, indent: int = 1) -> dict[str, int]:
        """Write the snapshot files into ``out`` (created); returns bytes per file.

        Each file is a kubectl ``List`` (``NodeMetricsList`` / ``PodMetricsList`` for metrics).
        ``indent=1`` lays it out as ``scaler snapshot`` writes it (``json.dumps(..., indent=1)``;
        the items one level less indented, which makes the files slightly smaller);
        ``indent=4`` as ``kubectl get -o json`` prints it (Go's ``json.MarshalIndent`` with four
        spaces: items nested two levels deep).
        """
        out.mkdir(parents=True, exist_ok=True)
        sizes: dict[str, int] = {}
        list_kind = {"node-metrics.json": "NodeMetricsList", "pod-metrics.json": "PodMetricsList"}
        nested = indent != 1
        pad = "\n" + " " * (2 * indent)
        for fname, make in self.objects().items():
            kind = list_kind.get(fname, "List")
            api = "metrics.k8s.io/v1beta1" if kind != "List" else "v1"
            path = out / fname
            enc = json.JSONEncoder(indent=indent, ensure_ascii=False)
            with path.open("w", encoding="utf-8") as f:
                head = {"apiVersion": api, "kind": kind, "metadata": {"resourceVersion": ""}}
                sp = " " * indent
                f.write(json.dumps(head, indent=indent)[:-2] + f',\n{sp}"items": [\n')
                first = True
                for obj in make():
                    if kind != "List":
                        obj = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
                    if not first:
                        f.write(",\n")
                    text = enc.encode(obj)
                    f.write(pad[1:] + text.replace("\n", pad) if nested else text)
                    first = False
                f.write(f"\n{sp}]\n}}\n")
            sizes[fname] = path.stat().st_size
        return sizes

    def stats(self) -> dict[str, int]:
        """Counts of nodes, pods and constraints, for the report and the smoke test."""
        c: Counter[str] = Counter()
        c["nodes"] = len(self.nodes)
        c["pods"] = len(self.pods) + len(self.nodes) * (len(self.daemonsets) + 1)
        c["underused_nodes"] = sum(n.underused for n in self.nodes)
        c["tainted_nodes"] = sum(1 for n in self.nodes if n.taint)
        for w in self.workloads:
            if not w.replicas:
                continue
            r = w.replicas
            c["workloads"] += 1
            c["tolerations"] += r if w.tolerations and w.namespace != "kube-system" else 0
            c["node_selectors"] += r if w.selector else 0
            c["anti_affinity"] += r if w.anti_affinity else 0
            c["topology_spread_hard"] += (
                r if any(s["whenUnsatisfiable"] == "DoNotSchedule" for s in w.spread) else 0
            )
            c["pdbs"] += 1 if w.pdb_allowed is not None else 0
            c["local_storage"] += (
                r if any("hostPath" in v or ("emptyDir" in v and not v["emptyDir"]) for v in w.volumes) else 0
            )
            c["bare_pods"] += r if w.kind == "bare" else 0
            c["job_pods"] += r if w.kind == "Job" else 0
            c["statefulset_pods"] += r if w.kind == "StatefulSet" else 0
            c["expendable_pods"] += r if w.priority < -10 else 0
        return dict(c)


def generate(nodes: int, seed: int = SEED) -> Cluster:
    """A deterministic cluster of ``nodes`` nodes (about 30 pods each)."""
    return Cluster(nodes, seed)
