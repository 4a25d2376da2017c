"""``/metrics`` and ``/healthz`` of ``scaler run``: ``/healthz`` fails when no loop finished within
``--max-inactivity`` (CA's liveness rule)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from scaler.observability.metrics import Metrics

__all__ = ["HealthServer"]


class HealthServer:
    """``/metrics`` and ``/healthz`` on ``address`` (``host:port``; ``:0`` picks a free port).

    ``/healthz`` answers 200 while ``healthy()`` is true, else 500.
    """

    def __init__(self, address: str, metrics: Metrics, healthy: Callable[[], bool]) -> None:
        host, _, port = address.rpartition(":")
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/metrics"):
                    self._send(200, outer.metrics.exposition(), CONTENT_TYPE_LATEST)
                elif self.path.startswith("/healthz"):
                    ok = outer.healthy()
                    self._send(200 if ok else 500, b"ok\n" if ok else b"loop stalled\n", "text/plain")
                else:
                    self._send(404, b"not found\n", "text/plain")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.metrics = metrics
        self.healthy = healthy
        self.server = ThreadingHTTPServer((host or "0.0.0.0", int(port or 8085)), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="health", daemon=True)

    def start(self) -> HealthServer:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
