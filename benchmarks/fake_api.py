"""``python -m benchmarks.fake_api --nodes N --dir DIR``: the loopback fake API server holding a
generated cluster, in its own process, for the steady-loop benchmark (:mod:`benchmarks.loop`).

The cluster comes from :func:`benchmarks.generate.generate`; the server is the test suite's
:class:`~fakes.kube_api.FakeKubeAPI` (real HTTP on 127.0.0.1) with two benchmark-only routes
added to its routing table:

* ``POST /bench/restamp?ts=<RFC 3339>``: set every NodeMetrics/PodMetrics ``timestamp`` (what
  metrics-server does every scrape) and render both metrics LIST answers at once, so that the
  timed loop reads them as fast as metrics-server serves them from memory;
* ``GET /bench/requests?since=<n>``: the requests recorded since the ``n``-th (``METHOD path``,
  ``?watch`` appended to a WATCH), and the count, so the benchmark can count what one loop asked
  for.

The process writes ``DIR/kubeconfig``, prints ``ready`` and serves until its standard input
closes.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

from fakes.kube_api import FakeKubeAPI, RecordedRequest, Resource, Response  # type: ignore[import-not-found]  # noqa: E402

__all__ = ["main"]

METRICS_PATHS = ("/apis/metrics.k8s.io/v1beta1/nodes", "/apis/metrics.k8s.io/v1beta1/pods")


class BenchKubeAPI(FakeKubeAPI):  # type: ignore[misc]
    """The fake with the benchmark routes and pre-rendered metrics LIST answers."""

    def __init__(self, metric_objects: list[dict[str, Any]]) -> None:
        super().__init__(bookmark_interval=5.0)
        self.metric_objects = metric_objects
        self._stamp = 0  # bumped by each restamp: the metrics' own version
        self._rendered: dict[str, tuple[int, bytes]] = {}
        self.routes: list[Any] = [
            ("POST", re.compile(r"^/bench/restamp$"), self._restamp),
            ("GET", re.compile(r"^/bench/requests$"), self._requests_since),
            *self.routes,
        ]

    def _list(self, res: Resource, namespace: str | None, query: Mapping[str, str]) -> Response:
        path = res.path
        if path not in METRICS_PATHS or namespace is not None or query:
            return super()._list(res, namespace, query)
        rendered = self._rendered.get(path)
        if rendered is not None and rendered[0] == self._stamp:
            return Response(200, rendered[1])
        resp: Response = super()._list(res, namespace, query)
        if resp.status == 200:
            self._rendered[path] = (self._stamp, resp.encode())
        return resp

    def _restamp(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        stamp = req.query["ts"]
        self.load_objects({**o, "timestamp": stamp} for o in self.metric_objects)
        self._stamp += 1
        for path in METRICS_PATHS:  # render both answers now, outside the timed loop
            self._handle_get(RecordedRequest("GET", path, {}, {}, b""), _match(path))
        return Response(200, {"ok": True})

    def _requests_since(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        since = int(req.query.get("since") or 0)
        made = [
            f"{r.method} {r.path}{'?watch' if r.watch else ''}"
            for r in self.requests[since:]
            if not r.path.startswith("/bench/")
        ]
        return Response(200, {"count": len(self.requests), "requests": made})


def _match(path: str) -> re.Match[str]:
    from fakes.kube_api import OBJECT_PATH

    m: re.Match[str] | None = OBJECT_PATH.match(path)
    assert m is not None
    return m


def main(argv: list[str] | None = None) -> int:
    """Entry point: generate, serve, write the kubeconfig, print ``ready``, serve until stdin ends."""
    from benchmarks.generate import generate

    ap = argparse.ArgumentParser(prog="python -m benchmarks.fake_api")
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--dir", type=Path, required=True)
    a = ap.parse_args(argv)
    metrics: list[dict[str, Any]] = []

    def objects(cluster: Any) -> Any:
        for o in cluster.iter_objects():
            if o.get("kind") in ("NodeMetrics", "PodMetrics"):
                metrics.append(o)
            yield o

    with BenchKubeAPI(metrics) as kube:
        kube.load_objects(objects(generate(a.nodes)))
        kube.write_kubeconfig(a.dir / "kubeconfig")
        print("ready", flush=True)
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
