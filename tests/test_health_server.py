"""The /metrics and /healthz server bounds what clients can hold: idle connections are closed
after the idle timeout, a trickling request after the request timeout, and connections over the
cap are refused, so 300 idle clients never hold 300 threads; real sockets on loopback."""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from waiting import wait_for

from scaler.observability import HealthServer, Metrics

IDLE = 0.5
REQUEST = 1.5
CAP = 16


@pytest.fixture
def server() -> Iterator[HealthServer]:
    s = HealthServer("127.0.0.1:0", Metrics(), lambda: True, max_connections=CAP, idle_timeout=IDLE,
                     request_timeout=REQUEST).start()  # fmt: skip
    try:
        yield s
    finally:
        s.stop()


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def closed_by_server(s: socket.socket) -> bool:
    """The server closed the connection (EOF or reset), read without blocking."""
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    finally:
        s.setblocking(True)


def healthz(port: int) -> int:
    return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code


def test_300_idle_connections_hold_at_most_the_cap_and_are_closed_after_the_idle_timeout(
    server: HealthServer,
) -> None:
    baseline = threading.active_count()
    started = time.monotonic()
    clients = [connect(server.port) for _ in range(300)]
    # A slot frees IDLE s after its connection was accepted: on a loaded machine, connecting
    # all 300 takes several IDLE periods, and each period serves up to CAP more.
    served_at_most = CAP * (1 + math.ceil((time.monotonic() - started) / IDLE))
    try:
        time.sleep(IDLE / 5)
        assert threading.active_count() <= baseline + CAP, "never more handler threads than the cap"
        # After the idle timeout every connection is closed and its thread gone.
        wait_for(lambda: all(closed_by_server(c) for c in clients), 10, "the server to close idle connections")
        wait_for(lambda: threading.active_count() <= baseline, 10, "the handler threads to end")
        assert server.server.refused >= min(300 - served_at_most, 300 - CAP) and server.server.refused > 0
        assert healthz(server.port) == 200
    finally:
        for c in clients:
            c.close()


def test_a_client_trickling_its_request_is_cut_off_at_the_request_timeout(server: HealthServer) -> None:
    c = connect(server.port)
    start = time.monotonic()
    request = b"GET /healthz HTTP/1.0\r\nX-Slow: " + b"a" * 1000
    cut = None
    try:
        for byte in request:  # one byte every IDLE/3 s: never idle for IDLE, never done
            try:
                c.sendall(bytes([byte]))
            except OSError:
                cut = time.monotonic() - start
                break
            if closed_by_server(c):
                cut = time.monotonic() - start
                break
            time.sleep(IDLE / 3)
    finally:
        c.close()
    assert cut is not None and REQUEST <= cut < REQUEST + 2.0, cut
    assert healthz(server.port) == 200


def test_it_still_answers_metrics_and_health_while_connections_come_and_go(server: HealthServer) -> None:
    for _ in range(3):
        assert httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=5).status_code == 200
        assert healthz(server.port) == 200
        assert httpx.get(f"http://127.0.0.1:{server.port}/other", timeout=5).status_code == 404
