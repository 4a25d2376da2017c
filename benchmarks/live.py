"""Item 2(d): the API requests of the controller's steady loop, live against the loopback fake.

The generated cluster (``--nodes``, 1,000 by default) is loaded into the test suite's in-memory
Kubernetes API server (``tests/fakes/kube_api.py``, real HTTP on 127.0.0.1); a
:class:`~scaler.controller.Controller` is built as ``scaler run`` builds it: a
:class:`~scaler.sources.watch.WatchCache` (LIST then WATCH per kind), the two metrics LISTs per
snapshot, a :class:`~scaler.kube.writer.KubeWriter`, and the ``kubernetes`` cloud provider
(:class:`~scaler.cloud.kubernetes.KubernetesProvider`). After the settling loops (the first one
recovers, and the status ConfigMap is rewritten until the plan's content settles), each further
loop advances the clock 10 s, re-stamps the metrics, runs
:meth:`~scaler.controller.Controller.run_once` and counts the requests the fake recorded during it.

The provider is measured twice: fed with the nodes of the snapshot the loop just built
(``node_source``: no request), and as a plain node LIST (paginated, 500 a page), which adds its
pages to every loop.

Leader election is measured apart: a :class:`~scaler.kube.leader.LeaderElector` with the
defaults of ``scaler run`` (lease 15 s, renew deadline 10 s, retry period 2 s) holds the Lease
for a few seconds of wall time; renewals (PUTs) and requests per second are reported.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

__all__ = ["measure_live"]

LEASE_PREFIX = "/apis/coordination.k8s.io/v1/namespaces/"


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def measure_live(nodes: int = 1000, loops: int = 3, lease_seconds: float = 10.0) -> dict[str, Any]:
    """Requests per steady loop (both provider modes) and lease renewals per second."""
    from fakes.kube_api import FakeKubeAPI  # type: ignore[import-not-found]

    from benchmarks.generate import generate
    from benchmarks.loop import start_controller
    from scaler.cloud.kubernetes import KubernetesProvider
    from scaler.config import ScalerConfig
    from scaler.kube.leader import LeaderElector
    from scaler.sources.kube import make_api_client

    cluster = generate(nodes)
    objects = list(cluster.iter_objects())
    metric_objs = [o for o in objects if o.get("kind") in ("NodeMetrics", "PodMetrics")]
    clock_now = [float(cluster.now)]

    def clock() -> float:
        return clock_now[0]

    out: dict[str, Any] = {"nodes": nodes, "loops": loops}
    import tempfile

    with tempfile.TemporaryDirectory(prefix="scaler-bench-live-") as tmp, FakeKubeAPI() as kube:
        kube.clock = clock
        kube.load_objects(objects)
        api = make_api_client(str(kube.write_kubeconfig(Path(tmp) / "kubeconfig")))
        config = ScalerConfig.from_mapping(
            {
                "leader_elect": False,
                "cloud_provider": "kubernetes",
                "namespace": "scaler-system",
                "scale_down_unneeded_time": 3600,  # nothing becomes deletable while we count
                # Node status annotations are writes, at most 50 nodes a loop until every node has
                # one: a generated cluster would take its nodes / 50 loops to drain them.
                "write_node_status": False,
            }
        )

        def restamp() -> None:
            stamp = _iso(clock())
            kube.load_objects({**o, "timestamp": stamp} for o in metric_objs)

        ctl, cache, _last, limits, out["cache_sync_seconds"] = start_controller(api, config, clock, 300)
        try:

            def loop() -> tuple[list[str], float]:
                clock_now[0] += 10
                restamp()
                before = len(kube.requests)
                t = time.perf_counter()
                ctl.run_once()
                took = time.perf_counter() - t
                return [f"{r.method} {r.path}" for r in kube.requests[before:]], took

            try:
                settle = []  # recovery, then status ConfigMap writes while the plan's content settles
                for _ in range(8):
                    made, _took = loop()
                    settle.append(len(made))
                    if not any(m.startswith("PUT") or m.startswith("POST") for m in made):
                        break
                out["settling_loops"] = settle
                for mode in ("node_source", "node_list"):
                    if mode == "node_list":
                        ctl.cloud = KubernetesProvider(api, limits)  # LISTs the nodes on refresh()
                    per_loop: list[int] = []
                    paths: Counter[str] = Counter()
                    seconds: list[float] = []
                    for _ in range(loops if mode == "node_source" else 2):
                        made, took = loop()
                        per_loop.append(len(made))
                        paths.update(made)
                        seconds.append(took)
                    out[mode] = {
                        "requests_per_loop": per_loop,
                        "requests": dict(paths.most_common()),
                        "loop_seconds": seconds,
                    }
            finally:
                ctl.shutdown(10)
        finally:
            cache.stop()
        out["watched_kinds"] = len(cache.calls)
        out["watch_timeout_seconds"] = cache.watch_timeout_seconds

        # Leader election, on the wall clock (the elector sleeps retry_period between rounds).
        kube.clock = time.time
        elector = LeaderElector(api, "scaler-system", config.instance_name, "bench")
        before = len(kube.requests)
        started = threading.Event()
        thread = threading.Thread(target=elector.run, args=(started.set, lambda: None), daemon=True)
        thread.start()
        started.wait(10)
        first = len(kube.requests)
        t = time.monotonic()
        time.sleep(lease_seconds)
        elapsed = time.monotonic() - t
        steady = [r for r in kube.requests[first:] if r.path.startswith(LEASE_PREFIX)]
        elector.stop()
        thread.join(10)
        puts = sum(1 for r in steady if r.method == "PUT")
        out["lease"] = {
            "lease_duration": elector.lease_duration,
            "renew_deadline": elector.renew_deadline,
            "retry_period": elector.retry_period,
            "seconds": elapsed,
            "renewals": puts,
            "renewals_per_second": puts / elapsed,
            "requests": len(steady),
            "requests_per_second": len(steady) / elapsed,
            "methods": dict(Counter(r.method for r in steady)),
            "acquire_requests": first - before,
        }
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(measure_live(int(sys.argv[1]) if len(sys.argv) > 1 else 1000), indent=1))
