"""Which Bitbrains VM drives which pod of the example snapshots built from the Bitbrains trace.

The bundled snapshot ``scaler/examples/bitbrains-gke-day1`` (and the test snapshots
``bitbrains-gke-night`` and ``bitbrains-gke-night-lowreq``) were built by the project's
``tools/build_snapshot.py --at <trace time> --request-scale <s> --seed 7``: one pod per VM of the
Bitbrains "Rnd" July 2013 trace, but the pods do not name their VM. The script creates the trace
pods first, in ascending VM id order, from the VMs that have a sample within 300 s of the
snapshot's trace time, non-zero cores, provisioned MHz and memory, and a request (``s`` × the
VM) that fits 80% of the largest node. :func:`derive_bundled_map` repeats exactly that
selection, pairs the VMs with the first pods of ``pods.json`` in file order, and **verifies**
each pair: the pod's CPU and memory requests (BestEffort pods have none) and its PodMetrics
usage must be the ones the script computes from that VM's sample. The results are shipped as
``data/<snapshot name>.csv`` (``namespace,pod,series``); :func:`known_map` reads them.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tarfile
from importlib import resources
from pathlib import Path

from scaler.model.quantity import parse_millicores
from scaler.replay.traces import csv_members

__all__ = ["BUNDLED_AT", "BUNDLED_NAME", "KNOWN_SNAPSHOTS", "derive_bundled_map", "known_map"]

BUNDLED_NAME = "bitbrains-gke-day1"
"""Directory name of the bundled example snapshot."""

BUNDLED_AT = 1372860000
"""Trace time (Unix s, 2013-07-03T14:00Z) the bundled snapshot was sampled at."""

KNOWN_SNAPSHOTS: dict[str, tuple[int, float]] = {
    BUNDLED_NAME: (BUNDLED_AT, 0.5),
    "bitbrains-gke-night": (1372906800, 0.5),
    "bitbrains-gke-night-lowreq": (1372906800, 0.25),
}
"""Snapshot directory name → (trace time, request scale) it was built with; each has a map."""

_MIB = 2**20


def known_map(snapshot_name: str) -> dict[str, str]:
    """``namespace/pod`` → Bitbrains VM id for a snapshot of :data:`KNOWN_SNAPSHOTS` (by its
    directory name); empty for any other name."""
    if snapshot_name not in KNOWN_SNAPSHOTS:
        return {}
    text = (resources.files("scaler.replay") / "data" / f"{snapshot_name}.csv").read_text(encoding="utf-8")
    return {f"{r['namespace']}/{r['pod']}": r["series"] for r in csv.DictReader(io.StringIO(text))}


def _nearest_rows(tar_path: Path, at: int) -> list[tuple[str, list[str]]]:
    """Per VM file, the row nearest to ``at`` within 300 s (the script's ``load_vms``)."""
    out = []
    with tarfile.open(tar_path) as tar:
        for member_name, fh in csv_members(tar):
            best: tuple[int, list[str]] | None = None
            for line in io.TextIOWrapper(fh):
                f = line.split(";")
                if not f[0][:1].isdigit():
                    continue
                t = int(f[0])
                if abs(t - at) <= 300 and (best is None or abs(t - at) < abs(best[0] - at)):
                    best = (t, f)
                if t > at + 300:
                    break
            if best is not None:
                out.append((os.path.basename(member_name)[:-4], [x.strip() for x in best[1]]))
    return out


def derive_bundled_map(
    trace: str | Path, snapshot_dir: str | Path, at: int = BUNDLED_AT, request_scale: float = 0.5
) -> dict[str, str]:
    """Re-derive the pod → VM map of a snapshot built by ``build_snapshot.py --at <at>
    --request-scale <request_scale>`` from the Bitbrains archive ``trace``, checking every pair.

    Raises:
        ValueError: a pod's requests or usage do not match its VM (the snapshot was not built
            from this trace at ``at``).
    """
    snap = Path(snapshot_dir)
    pods = json.loads((snap / "pods.json").read_text())["items"]
    metrics = {
        (m["metadata"]["namespace"], m["metadata"]["name"]): m
        for m in json.loads((snap / "pod-metrics.json").read_text())["items"]
    }
    nodes = json.loads((snap / "nodes.json").read_text())["items"]
    max_c = max(parse_millicores(n["status"]["allocatable"]["cpu"]) for n in nodes) * 0.8
    max_m = max(int(n["status"]["allocatable"]["memory"][:-2]) * 1024 for n in nodes) * 0.8
    vms = []
    for vm, f in _nearest_rows(Path(trace), at):
        cores, cap, use, mcap, muse = int(f[1]), float(f[2]), float(f[3]), float(f[5]), float(f[6])
        if cores <= 0 or cap <= 0 or mcap <= 0:
            continue
        vms.append((vm, cores, cap, use, int(mcap * 1024), int(muse * 1024)))
    vms.sort(key=lambda v: int(v[0]))
    chosen = [v for v in vms if v[1] * 1000 * request_scale <= max_c and v[4] * request_scale <= max_m]
    out: dict[str, str] = {}
    for pod, (vm, cores, cap, use, mcap, muse) in zip(pods, chosen, strict=False):
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        req = pod["spec"]["containers"][0].get("resources", {}).get("requests", {})
        want_cpu = max(50, round(cores * 1000 * request_scale / 50.0) * 50)
        want_mem = max(64, int(mcap * request_scale / _MIB))
        usage = metrics[(ns, name)]["containers"][0]["usage"]
        ok = (
            (not req or (req.get("cpu") == f"{want_cpu}m" and req.get("memory") == f"{want_mem}Mi"))
            and usage["cpu"] == f"{int(use / (cap / cores) * 1e9)}n"
            and usage["memory"] == f"{muse // 1024}Ki"
        )
        if not ok:
            raise ValueError(f"pod {ns}/{name} does not match VM {vm}: {req} {usage}")
        out[f"{ns}/{name}"] = vm
    return out
