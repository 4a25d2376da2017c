"""``/metrics`` and ``/healthz`` of ``scaler run``: ``/healthz`` fails when no loop finished within
``--max-inactivity`` (CA's liveness rule).

The server holds one thread per open connection, so it bounds what a client can hold: at most
:data:`MAX_CONNECTIONS` connections at once (a connection over the cap is closed at once, unread),
each closed after :data:`IDLE_TIMEOUT_SECONDS` without a byte from the client and, whatever it
sends, :data:`REQUEST_TIMEOUT_SECONDS` after it was accepted (a client trickling its request
line one byte at a time is cut off too). One reaper thread enforces the second deadline for all
connections. Answers are ``HTTP/1.0``: one request per connection.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from scaler.observability.metrics import Metrics

__all__ = ["IDLE_TIMEOUT_SECONDS", "MAX_CONNECTIONS", "REQUEST_TIMEOUT_SECONDS", "HealthServer"]

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 32
"""Connections served at once; enough for the kubelet's three probes and a few scrapers."""
IDLE_TIMEOUT_SECONDS = 10.0
"""A connection is closed when its client sends nothing for this long (seconds)."""
REQUEST_TIMEOUT_SECONDS = 30.0
"""A connection is closed this long after it was accepted (seconds), whatever it is doing:
longer than Prometheus' default scrape timeout (10 s) and the probes' ``timeoutSeconds`` (5 s)."""
_REFUSAL_LOG_INTERVAL_SECONDS = 60.0


class _Server(ThreadingHTTPServer):
    """A :class:`ThreadingHTTPServer` that caps its connections and cuts slow ones off."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # the listen backlog: connections waiting to be accepted (or refused)

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        max_connections: int,
        request_timeout: float,
    ) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(max_connections)
        self._max_connections = max_connections
        self._request_timeout = request_timeout
        self._deadlines: dict[socket.socket, float] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._last_refusal_log = float("-inf")
        self.refused = 0
        self._reaper = threading.Thread(target=self._reap, name="health-reaper", daemon=True)
        self._reaper.start()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.refused += 1
            now = time.monotonic()
            if now - self._last_refusal_log >= _REFUSAL_LOG_INTERVAL_SECONDS:
                self._last_refusal_log = now
                log.warning(
                    "health server: %d connections open, refusing more (%d refused so far)",
                    self._max_connections,
                    self.refused,
                )
            self.shutdown_request(request)
            return
        with self._lock:
            self._deadlines[request] = time.monotonic() + self._request_timeout
        try:
            super().process_request(request, client_address)
        except BaseException:  # the thread did not start: nothing else will release the slot
            self._release(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(request)

    def _release(self, request: socket.socket) -> None:
        with self._lock:
            if self._deadlines.pop(request, None) is None:
                return
        self._slots.release()

    def _reap(self) -> None:
        """Shut down every connection past its deadline: its handler's next read or write
        fails and its thread ends."""
        while not self._closed.wait(min(1.0, self._request_timeout / 4)):
            now = time.monotonic()
            with self._lock:
                late = [s for s, deadline in self._deadlines.items() if deadline <= now]
            for s in late:
                with contextlib.suppress(OSError):  # already closed by its handler
                    s.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that failed (a client gone, a connection cut at its deadline) is no
        error of scaler's: logged at debug level, never printed."""
        log.debug("health server: connection from %s ended badly", client_address, exc_info=True)

    def server_close(self) -> None:
        self._closed.set()
        super().server_close()


class HealthServer:
    """``/metrics`` and ``/healthz`` on ``address`` (``host:port``; ``:0`` picks a free port).

    ``/healthz`` answers 200 while ``healthy()`` is true, else 500. At most ``max_connections``
    connections are open at once; a connection is closed after ``idle_timeout`` seconds without
    a byte from its client, and ``request_timeout`` seconds after it was accepted.
    """

    def __init__(
        self,
        address: str,
        metrics: Metrics,
        healthy: Callable[[], bool],
        *,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_TIMEOUT_SECONDS,
        request_timeout: float = REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        host, _, port = address.rpartition(":")
        outer = self

        class Handler(BaseHTTPRequestHandler):
            timeout = idle_timeout  # socket timeout of every read and write of the connection

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
        self.server = _Server(
            (host or "0.0.0.0", int(port or 8085)), Handler, max_connections, request_timeout
        )
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
