"""The HTTP plumbing the loopback fakes share (:mod:`fakes.kube_api`, :mod:`fakes.gce_api`).

:class:`LoopbackServer` serves on ``127.0.0.1:<free port>`` in a daemon thread, records every
request, applies injected fault rules (:class:`FaultRule`: fail or delay matching requests, a
number of times or forever) and hands the rest to the subclass's :meth:`LoopbackServer._route`.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar
from urllib.parse import parse_qs, urlsplit

__all__ = ["AbortStream", "FaultRule", "LoopbackServer", "RecordedRequest", "Response"]


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request a fake received. ``query`` keeps the last value of each parameter; header
    names are lower-case; ``received`` is when it arrived (``time.monotonic()`` seconds)."""

    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: bytes = b""
    received: float = 0.0


@dataclass(frozen=True, slots=True)
class Response:
    """What a route handler answers: a status, a JSON-able body (or bytes / text), its content
    type and extra headers.

    ``stream``, when set, is sent instead of ``body`` with chunked transfer encoding, one chunk
    per ``bytes`` item (``None`` items are idle ticks on which the server checks whether the client
    hung up); raising :class:`AbortStream` drops the connection without the final chunk.
    """

    status: int
    body: Any
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)
    stream: Generator[bytes | None, None, None] | None = None

    def encode(self) -> bytes:
        """The body as bytes (JSON unless already bytes or text)."""
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body).encode()


class AbortStream(Exception):
    """Raised by a response stream to cut the connection abruptly (no terminating chunk)."""


RequestT = TypeVar("RequestT", bound=RecordedRequest)


@dataclass(slots=True)
class FaultRule(Generic[RequestT]):
    """An injected fault: requests for which ``applies`` is true are delayed by ``delay``
    seconds and, when ``status`` is set, answered with it (and ``body``, else the fake's error
    body, and ``headers``), ``remaining`` times (``None``: forever). ``after``: the request
    takes effect first."""

    applies: Callable[[RequestT], bool]
    status: int | None  # None: only delay, then serve normally
    remaining: int | None  # None: forever
    body: Any = None
    delay: float = 0.0
    after: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)


class LoopbackServer(Generic[RequestT]):
    """Serve a fake API on ``127.0.0.1:<free port>`` in a daemon thread.

    Use as a context manager (or :meth:`start`/:meth:`close`). Subclasses answer requests in
    :meth:`_route`, format error bodies in :meth:`_error_body` and add fault rules with
    :meth:`_add_rule`; :meth:`dispatch` records requests and applies the rules.

    Args:
        request_type: the :class:`RecordedRequest` (sub)class requests are recorded as.
    """

    thread_name: ClassVar[str] = "fake-api"
    """The name of the serving thread."""

    def __init__(self, request_type: type[RequestT]) -> None:
        self.requests: list[RequestT] = []
        self._request_type = request_type
        self._rules: list[FaultRule[RequestT]] = []
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()  # set by close(): delayed answers stop waiting

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Self:
        """Bind a free loopback port and serve in a daemon thread; returns ``self``."""
        if self._server is not None:
            return self
        self._closing.clear()
        server = _Server(("127.0.0.1", 0), _RequestHandler)
        server.fake = self  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=self.thread_name, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port (idempotent)."""
        if self._server is None:
            return
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def port(self) -> int:
        """The bound TCP port."""
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return int(self._server.server_address[1])

    @property
    def host(self) -> str:
        """``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://{self.host}"

    # -- fault injection -------------------------------------------------------------------------

    def _add_rule(self, rule: FaultRule[RequestT]) -> None:
        with self._lock:
            self._rules.append(rule)

    def reset_faults(self) -> None:
        """Drop every rule set by :meth:`fail` and :meth:`delay`."""
        with self._lock:
            self._rules.clear()

    # -- dispatch --------------------------------------------------------------------------------

    def dispatch(self, req: RequestT) -> tuple[Response, float]:
        """Record ``req`` and compute its response and the delay before sending it."""
        with self._lock:
            self.requests.append(req)
            failing, wait = self._take_rules(req)
        if failing is not None and not failing.after:
            return self._injected(failing), wait
        response = self._route(req)
        if failing is not None:  # after=True: the request took effect, its answer is lost
            if response.stream is not None:
                response.stream.close()
            return self._injected(failing), wait
        return response, wait

    def _route(self, req: RequestT) -> Response:
        """Answer ``req`` (no fault applies, or it applies only after the request)."""
        raise NotImplementedError

    def _error_body(self, status: int, message: str) -> Any:
        """The body of an error answer in the fake API's format."""
        raise NotImplementedError

    def _injected(self, rule: FaultRule[RequestT]) -> Response:
        assert rule.status is not None
        body = rule.body if rule.body is not None else self._error_body(rule.status, "injected failure")
        return Response(rule.status, body, headers=rule.headers)

    def _take_rules(self, req: RequestT) -> tuple[FaultRule[RequestT] | None, float]:
        """Count ``req`` against the live rules that apply to it (the first failing rule only):
        returns that failing rule, if any, and the sum of the delays."""
        failing: FaultRule[RequestT] | None = None
        wait = 0.0
        for rule in self._rules:
            if (rule.status is not None and failing is not None) or not rule.applies(req):
                continue
            if rule.remaining is not None:
                if rule.remaining <= 0:
                    continue
                rule.remaining -= 1
            wait += rule.delay
            if rule.status is not None:
                failing = rule
        return failing, wait


# -- HTTP ------------------------------------------------------------------------------------------


def _peer_closed(sock: socket.socket) -> bool:
    """Whether the client closed its end (readable with nothing to read)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class _Server(ThreadingHTTPServer):
    # socketserver's default listen backlog is 5: a dozen clients reconnecting at once (watchers
    # after drop_watches) overflow it, and each dropped SYN costs the client a 1 s retransmit.
    request_queue_size = 128
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._open: dict[socket.socket, threading.Thread] = {}
        self._open_lock = threading.Lock()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """Serve one connection, registered so that :meth:`server_close` can end it."""
        with self._open_lock:
            self._open[request] = threading.current_thread()
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._open.pop(request, None)

    def server_close(self) -> None:
        """Close the listening socket, end every open connection and wait for its thread.

        An idle keep-alive connection would otherwise keep its thread until the handler's
        timeout, and a test that forks (``scaler.forked``) would see it running.
        """
        super().server_close()
        with self._open_lock:
            open_now = list(self._open.items())
        for sock, _ in open_now:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for _, thread in open_now:
            thread.join(timeout=5)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10  # idle keep-alive connections are dropped after this (seconds)

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every response.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _serve(self) -> None:
        fake: LoopbackServer[Any] = self.server.fake  # type: ignore[attr-defined]
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        headers = {k.lower(): v for k, v in self.headers.items()}
        req = fake._request_type(self.command, parts.path, query, headers, body, time.monotonic())
        response, wait = fake.dispatch(req)
        if wait > 0:
            fake._closing.wait(wait)  # a delayed answer, cut short when the server closes
        if response.stream is not None:
            self._send_stream(response)
            return
        payload = response.encode()
        try:
            self._send_head(response)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            self.close_connection = True

    def _send_head(self, response: Response) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        for k, v in response.headers.items():
            self.send_header(k, v)

    def _send_stream(self, response: Response) -> None:
        stream = response.stream
        assert stream is not None
        try:
            self._send_head(response)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in stream:
                if chunk is None:
                    if _peer_closed(self.connection):
                        self.close_connection = True
                        return
                    continue
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
        except AbortStream:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            stream.close()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""
