"""The steady ``scaler run`` loop, timed: this process runs the controller, the fake API server
runs in another (:mod:`benchmarks.fake_api`).

The controller is built as ``scaler run`` builds it: a :class:`~scaler.sources.watch.WatchCache`
(LIST then WATCH of every cached kind), the two metrics LISTs per snapshot, a
:class:`~scaler.kube.writer.KubeWriter`, and the ``kubernetes`` cloud provider fed with the
snapshot's nodes; the leader, not dry-run, with a scale-down-unneeded-time of an hour (nothing is
deleted while we count) and without the node status annotations (writes, drained at 50 nodes a loop).
After the settling loops (the first recovers, the status ConfigMap is
rewritten until the plan's content settles), every node's and sampled pod's usage history is
grown to a whole default unneeded window (:data:`HISTORY_SAMPLES`, :func:`full_history`: what a
controller holds after ten minutes, which a few loops never reach), and the loops settle again.
Each measured loop advances the clock 10 s, has the
fake re-stamp the metrics (outside the timed part: metrics-server's own scrape), then times
:meth:`~scaler.controller.Controller.run_once`: the wall time, this process's CPU time (all
threads, the watch threads included) and the requests the fake saw during it.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from scaler.cloud.kubernetes import KubernetesProvider
from scaler.config import ScalerConfig
from scaler.controller import Controller
from scaler.kube.writer import KubeWriter
from scaler.limits import GroupLimits, node_group_limits
from scaler.model.snapshot import ClusterSnapshot
from scaler.observability import Metrics
from scaler.planner import PlannerState, UsageSample
from scaler.sources.watch import WatchCache, snapshot_from_cache

__all__ = ["measure_loop", "start_controller"]

ROOT = Path(__file__).resolve().parent.parent


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def start_controller(
    api: Any, config: ScalerConfig, clock: Callable[[], float], sync_timeout: float
) -> tuple[Controller, WatchCache, list[ClusterSnapshot], GroupLimits, float]:
    """A leader controller built as ``scaler run`` builds it, its watch cache started and synced.

    Returns:
        The controller, its cache (stop it), a list holding the last snapshot a loop built, the
        node-group limits, and the seconds the cache took to sync.

    Raises:
        RuntimeError: the cache did not sync within ``sync_timeout`` seconds.
    """
    t = time.perf_counter()
    cache = WatchCache(api)
    cache.start()
    if not cache.wait_synced(sync_timeout):
        cache.stop()
        raise RuntimeError("watch cache did not sync")
    synced = time.perf_counter() - t
    last: list[ClusterSnapshot] = []

    def source(now: float) -> ClusterSnapshot:
        snap = snapshot_from_cache(cache, api, now)
        last[:] = [snap]
        return snap

    limits = node_group_limits(config, source(clock()).nodes)
    cloud = KubernetesProvider(api, limits, node_source=lambda: last[0].nodes)
    writer = KubeWriter(api, config.instance_name, clock=clock)
    ctl = Controller(config, source, writer, cloud, Metrics(), identity="bench", clock=clock)
    ctl.leader.set()
    return ctl, cache, last, limits, synced


HISTORY_SAMPLES = 40
"""Usage samples per node and per sampled pod when the timed loops start: a whole default
``--scale-down-unneeded-time`` (600 s) at metrics-server's ``--metric-resolution`` of 15 s."""


def full_history(state: PlannerState, samples: int = HISTORY_SAMPLES, step: float = 15.0) -> PlannerState:
    """``state`` with each node's and pod's usage history grown to ``samples`` readings, ``step``
    seconds apart and ending with its newest one, their values spread ±20% around it (fixed
    pseudo-random): the history a controller holds once it has run for a whole unneeded window,
    which the few loops of a benchmark never reach."""

    def grow(window: tuple[UsageSample, ...], seed: int) -> tuple[UsageSample, ...]:
        newest = window[-1]
        older = []
        for i in range(samples - 1):
            f = 0.8 + 0.4 * (((seed + i) * 2654435761) % 1000) / 1000
            t = newest.timestamp - step * (samples - 1 - i)
            older.append(UsageSample(t, int(newest.cpu_millicores * f), int(newest.memory_bytes * f)))
        return (*older, newest)

    return replace(
        state,
        usage_history={k: grow(v, i) for i, (k, v) in enumerate(state.usage_history.items())},
        pod_usage_history={k: grow(v, i) for i, (k, v) in enumerate(state.pod_usage_history.items())},
    )


def measure_loop(nodes: int, loops: int = 3, profile: bool = False) -> dict[str, Any]:
    """Time ``loops`` steady loops of the controller against a fake of ``nodes`` nodes (and
    profile one more with cProfile when ``profile``).

    A WATCH re-opened during a loop (the server ends each watch after its ``timeoutSeconds``) is
    counted apart from the loop's requests: it is the cache's, not the loop's."""
    from benchmarks.generate import NOW
    from scaler.config import ScalerConfig
    from scaler.sources.kube import make_api_client

    out: dict[str, Any] = {"nodes": nodes, "loops": loops}
    with tempfile.TemporaryDirectory(prefix="scaler-bench-loop-") as tmp:
        t = time.perf_counter()
        fake = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.fake_api", "--nodes", str(nodes), "--dir", tmp],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert fake.stdout is not None
            if fake.stdout.readline().strip() != "ready":
                raise RuntimeError("the fake API server did not start")
            out["fake_start_seconds"] = time.perf_counter() - t
            kubeconfig = str(Path(tmp) / "kubeconfig")
            api: Any = make_api_client(kubeconfig)
            url = api.configuration.host

            def bench(path: str, method: str = "GET") -> Any:
                req = urllib.request.Request(
                    url + path, method=method, headers={"Authorization": "Bearer fake-token"}
                )
                with urllib.request.urlopen(req, timeout=600) as resp:
                    return json.loads(resp.read())

            clock_now = [float(NOW)]

            def clock() -> float:
                return clock_now[0]

            config = ScalerConfig.from_mapping(
                {
                    "leader_elect": False,
                    "cloud_provider": "kubernetes",
                    "namespace": "scaler-system",
                    "scale_down_unneeded_time": 3600,
                    # Node status annotations are writes, at most 50 nodes a loop until every node
                    # has one: thousands of generated nodes would take hundreds of loops to drain.
                    "write_node_status": False,
                }
            )
            ctl, cache, last, _limits, out["cache_sync_seconds"] = start_controller(api, config, clock, 3600)
            try:

                def loop() -> tuple[list[str], float, float]:
                    clock_now[0] += 10
                    bench(f"/bench/restamp?ts={_iso(clock())}", "POST")
                    before = bench("/bench/requests?since=0")["count"]
                    t, c = time.perf_counter(), time.process_time()
                    ctl.run_once()
                    wall, cpu = time.perf_counter() - t, time.process_time() - c
                    return bench(f"/bench/requests?since={before}")["requests"], wall, cpu

                try:

                    def settle() -> list[int]:
                        made_each = []
                        for _ in range(8):
                            made, _w, _c = loop()
                            made_each.append(len(made))
                            if not any(m.startswith(("PUT", "POST", "PATCH")) for m in made):
                                break
                        return made_each

                    settle_first = settle()
                    # A whole window of history changes the aggregates, hence the plan and the
                    # status ConfigMap: settle again before timing.
                    ctl.state = full_history(ctl.state)
                    out["settling_loops"] = settle_first + settle()
                    out["history_samples"] = HISTORY_SAMPLES
                    out["sampled_pods"] = len(ctl.state.pod_usage_history)
                    walls, cpus, reqs, rewatches = [], [], [], 0
                    for _ in range(loops):
                        made, wall, cpu = loop()
                        walls.append(wall)
                        cpus.append(cpu)
                        reqs.append([m for m in made if not m.endswith("?watch")])
                        rewatches += len(made) - len(reqs[-1])
                    out["watches_reopened"] = rewatches
                    out["loop_seconds"] = walls
                    out["loop_cpu_seconds"] = cpus
                    out["loop_median"] = statistics.median(walls)
                    out["loop_cpu_median"] = statistics.median(cpus)
                    out["requests_per_loop"] = [len(r) for r in reqs]
                    out["requests"] = sorted({m for r in reqs for m in r})
                    out["evaluated_nodes"] = len(last[0].nodes)
                    out["evaluated_pods"] = len(last[0].pods)
                    if profile:
                        import cProfile
                        import io
                        import pstats

                        clock_now[0] += 10
                        bench(f"/bench/restamp?ts={_iso(clock())}", "POST")
                        prof = cProfile.Profile()
                        prof.enable()
                        ctl.run_once()
                        prof.disable()
                        buf = io.StringIO()
                        st = pstats.Stats(prof, stream=buf)
                        st.sort_stats("cumulative").print_stats(70)
                        st.sort_stats("tottime").print_stats(30)
                        out["profile"] = buf.getvalue()
                finally:
                    ctl.shutdown(10)
            finally:
                cache.stop()
                api.close()
        finally:
            if fake.stdin is not None:
                fake.stdin.close()
            try:
                fake.wait(60)
            except subprocess.TimeoutExpired:
                fake.kill()
                fake.wait()
    return out


if __name__ == "__main__":
    result = measure_loop(int(sys.argv[1]) if len(sys.argv) > 1 else 1000, profile="--profile" in sys.argv)
    print(result.pop("profile", ""), file=sys.stderr)
    print(json.dumps(result, indent=1))
