"""Per-VM samples of the Bitbrains GWA-T-12 "Rnd" trace (July 2013), cached in ``benchmarks/data``.

The raw trace (``../shared/data/raw/bitbrains-rnd-2013/rnd-2013-7.tar.gz``, 50 MB, 3.9 M rows)
is read once; what the generator needs is kept in a small committed file,
``benchmarks/data/bitbrains-samples.json.gz``: for each VM its provisioned cores, MHz and memory,
and its CPU (MHz) and memory (KB) usage at every full hour of one weekday (2013-07-03 UTC).
``make bench`` therefore needs no ``../shared``; if the cache is missing and the raw trace is
there, it is rebuilt from it.
"""

from __future__ import annotations

import datetime as dt
import gzip
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaler.model.quantity import parse_bytes, parse_millicores
from scaler.replay.traces import csv_members

__all__ = ["CACHE", "DAY", "FIGURES", "RAW_TRACE", "VmSample", "build_cache", "build_figures", "load_samples"]

HERE = Path(__file__).resolve().parent
CACHE = HERE / "data" / "bitbrains-samples.json.gz"
RAW = HERE.parent.parent / "shared" / "data" / "raw"
RAW_TRACE = RAW / "bitbrains-rnd-2013" / "rnd-2013-7.tar.gz"
FIGURES = HERE / "data" / "gke-figures.json"
MACHINES = ("n1-standard-8", "n1-standard-16", "n1-standard-32", "n2-highmem-16")
# Per-DaemonSet split of the measured GKE sum (2i2c cluster "2i2c", v1.29: 354m / 656Mi per node).
DS_SPLIT = {
    "calico-node": (100, 100),
    "fluentbit-gke": (100, 200),
    "gke-metadata-server": (100, 100),
    "gke-metrics-agent": (8, 110),
    "ip-masq-agent": (10, 16),
    "netd": (16, 30),
    "pdcsi-node": (10, 40),
    "support-cryptnono": (5, 30),
    "support-prometheus-node-exporter": (5, 30),
}
DAY = int(dt.datetime(2013, 7, 3, tzinfo=dt.UTC).timestamp())
"""Start of the sampled day (trace time, Unix seconds): a Wednesday."""
HOURS = 24
TOLERANCE_S = 300  # a sample within 5 minutes of the full hour


@dataclass(frozen=True, slots=True)
class VmSample:
    """One VM of the trace: provisioned size and hourly usage.

    Attributes:
        vm: the trace's VM id (file name).
        cores: provisioned cores.
        cpu_mhz: provisioned CPU capacity, MHz (``cores`` × clock).
        mem_kb: provisioned memory, KB.
        cpu_used_mhz, mem_used_kb: usage at each full hour of :data:`DAY` (24 values; an hour
            without a sample repeats the previous one).
    """

    vm: int
    cores: int
    cpu_mhz: float
    mem_kb: float
    cpu_used_mhz: tuple[float, ...]
    mem_used_kb: tuple[float, ...]


def _read_vm(
    lines: io.TextIOWrapper,
) -> tuple[int, float, float, list[float | None], list[float | None]] | None:
    cpu: list[float | None] = [None] * HOURS
    mem: list[float | None] = [None] * HOURS
    best = [TOLERANCE_S + 1] * HOURS
    size: tuple[int, float, float] | None = None
    end = DAY + HOURS * 3600 + TOLERANCE_S
    for line in lines:
        f = line.split(";")
        if not f[0][:1].isdigit():
            continue
        t = int(f[0])
        if t < DAY - TOLERANCE_S:
            continue
        if t > end:
            break
        h = min(HOURS - 1, max(0, round((t - DAY) / 3600)))
        d = abs(t - (DAY + h * 3600))
        if d < best[h]:
            cores, cap, mcap = int(f[1]), float(f[2]), float(f[5])
            if cores <= 0 or cap <= 0 or mcap <= 0:
                continue
            best[h] = d
            size = (cores, cap, mcap)
            cpu[h], mem[h] = float(f[3]), float(f[6])
    if size is None:
        return None
    return (*size, cpu, mem)


def build_cache(raw: Path = RAW_TRACE, out: Path = CACHE) -> Path:
    """Read the raw trace once and write the compact per-VM cache. Returns ``out``."""
    vms: list[list[Any]] = []
    with tarfile.open(raw) as tar:
        for member_name, fh in csv_members(tar):
            got = _read_vm(io.TextIOWrapper(fh))
            if got is None:
                continue
            cores, cap, mcap, cpu, mem = got
            if all(c is None for c in cpu):
                continue
            # Fill hours without a sample from the previous (or next) known one.
            first = next(i for i, c in enumerate(cpu) if c is not None)
            last_c, last_m = cpu[first], mem[first]
            for i in range(HOURS):
                if cpu[i] is None:
                    cpu[i], mem[i] = last_c, last_m
                last_c, last_m = cpu[i], mem[i]
            vm = int(Path(member_name).stem)
            vms.append(
                [
                    vm,
                    cores,
                    round(cap, 3),
                    round(mcap),
                    [round(c or 0.0, 1) for c in cpu],
                    [round(x or 0.0) for x in mem],
                ]
            )
    vms.sort(key=lambda v: v[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "source": "GWA-T-12 Bitbrains Rnd 2013-7 (rnd-2013-7.tar.gz), hourly samples of 2013-07-03 UTC",
        "fields": ["vm", "cores", "cpuProvisionedMHz", "memProvisionedKB", "cpuUsedMHz[24]", "memUsedKB[24]"],
        "vms": vms,
    }
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=9) as f:
        json.dump(doc, f, separators=(",", ":"))
    return out


def build_figures(raw: Path = RAW, out: Path = FIGURES) -> Path:
    """Copy the GKE figures the generator needs into one small committed JSON file: allocatable
    of the machine types used, the DaemonSet set (split so that it sums to the measured
    requests) and the kube-system Deployments' requests. Returns ``out``."""
    caps = json.loads((raw / "gke-node-capacity-2i2c" / "instance_capacities.json").read_text())
    ds = json.loads((raw / "gke-node-capacity-2i2c" / "daemonset_requests.json").read_text())["gke"]["2i2c"]
    names = ds["requesting_daemon_sets"].split(",")
    split = [[n, *DS_SPLIT[n]] for n in names]
    assert sum(c for _, c, _ in split) == parse_millicores(ds["cpu_requests"])
    assert sum(m for _, _, m in split) * 2**20 == parse_bytes(ds["memory_requests"])
    deps = json.loads(
        (raw / "gke-objects-small" / "libcloud-gke-2021" / "_apis_apps_v1_deployments.json").read_text()
    )
    system = []
    for d in deps["items"]:
        spec = d["spec"]["template"]["spec"]
        cpu = mem = 0
        for c in spec["containers"]:
            req = (c.get("resources") or {}).get("requests") or {}
            cpu += parse_millicores(req["cpu"]) if "cpu" in req else 0
            mem += parse_bytes(req["memory"]) if "memory" in req else 0
        system.append(
            {
                "name": d["metadata"]["name"],
                "replicas": d["spec"].get("replicas", 1),
                "cpu": cpu,
                "mem": mem,
                "priorityClassName": spec.get("priorityClassName"),
            }
        )
    doc = {
        "source": "../shared/data/raw/gke-node-capacity-2i2c (2i2c GKE clusters) and gke-objects-small/libcloud-gke-2021",
        "instance_capacities": {m: caps[m] for m in MACHINES},
        "daemonsets": split,
        "daemonset_requests": {
            "cpu": ds["cpu_requests"],
            "memory": ds["memory_requests"],
            "k8s_version": ds["k8s_version"],
        },
        "system_deployments": system,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return out


def load_samples(cache: Path = CACHE, raw: Path = RAW_TRACE) -> list[VmSample]:
    """The cached VM samples; rebuilt from the raw trace when the cache is missing.

    Raises:
        FileNotFoundError: neither the cache nor the raw trace exists.
    """
    if not cache.exists():
        if not raw.exists():
            raise FileNotFoundError(f"{cache} is missing and the raw trace {raw} is not there to rebuild it")
        build_cache(raw, cache)
    with gzip.open(cache, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    return [
        VmSample(
            int(v[0]), int(v[1]), float(v[2]), float(v[3]), tuple(map(float, v[4])), tuple(map(float, v[5]))
        )
        for v in doc["vms"]
    ]


if __name__ == "__main__":
    import time

    t0 = time.perf_counter()
    print(build_figures())
    path = build_cache()
    print(f"{path}: {len(load_samples())} VMs, {path.stat().st_size} bytes, {time.perf_counter() - t0:.1f}s")
