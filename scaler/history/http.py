"""HTTP for the history path: every call ends by an overall deadline and reads at most a byte cap.

httpx's timeouts bound each network operation (a connect, one read), not a call: a server that
sends one byte every few seconds never trips a read timeout, and a body is read whole however
large it is. :func:`bounded_call` bounds the call itself:

* **Deadline** (seconds, per call): the wait for the answer's headers is the deadline (plus at
  most :data:`CONNECT_SECONDS` to connect); once the headers are in, a watchdog shuts the socket
  down when the deadline comes, whatever the server trickles, and the call fails with
  ``… no complete answer within N s``. Such a failure is a :class:`HistoryError`, not retried.
* **Byte cap**: a ``Content-Length`` above the cap is refused before the body is read, and the
  body (decompressed) is read up to the cap and no further (a gzip bomb stops there too).
* **Errors**: unreachable, timed out before the headers, HTTP 429 and 5xx are
  :class:`TransientHistoryError` (the caller's tenacity retries them; ``Retry-After`` is kept in
  :attr:`TransientHistoryError.retry_after`), the rest :class:`HistoryError`; every message is
  one line naming ``where`` (the caller passes the server's redacted URL).

:class:`GoogleAuthRequest` is the same call in the shape google-auth's transport expects, so that
fetching and refreshing Application Default Credentials obeys the same deadline and cap.
"""

from __future__ import annotations

import contextlib
import email.utils
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from google.auth import exceptions as _gexc
from google.auth import transport as _gtransport
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from scaler.history.errors import HistoryError, TransientHistoryError, one_line

__all__ = [
    "CONNECT_SECONDS",
    "DEFAULT_DEADLINE_SECONDS",
    "DEFAULT_MAX_BYTES",
    "Answer",
    "GoogleAuthRequest",
    "bounded_call",
    "retry_after_seconds",
    "retrying",
]

DEFAULT_DEADLINE_SECONDS = 60.0
"""One call's overall deadline (seconds) unless the caller gives another."""
DEFAULT_MAX_BYTES = 512 << 20
"""One answer's byte cap (512 MiB, decompressed) unless the caller gives another: a day of
5-minute points for 30,000 pods, the largest chunk an export asks for, is about 300 MB."""
CONNECT_SECONDS = 10.0
"""The longest a call waits to connect (seconds), within its deadline."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A complete HTTP answer: status, headers and the whole (decompressed) body."""

    status: int
    headers: httpx.Headers
    body: bytes

    @property
    def text(self) -> str:
        """The body as text (undecodable bytes replaced)."""
        return self.body.decode("utf-8", "replace")


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds from now: delay-seconds or an HTTP date; ``None`` when absent
    or unreadable (RFC 9110 §10.2.3)."""
    if not value:
        return None
    v = value.strip()
    if v.isdigit():
        return float(v)
    try:
        when = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


RETRY_AFTER_CAP_SECONDS = 120.0
"""The longest ``Retry-After`` honoured (seconds); a longer one waits this long."""


def retrying(attempts: int, wait: float) -> Retrying:
    """tenacity's retry of :class:`TransientHistoryError` (unreachable, HTTP 429 and 5xx): up
    to ``attempts`` tries in all, waiting ``wait`` seconds doubled each time (at most 30 s), or
    the server's ``Retry-After`` when it asks for longer (at most
    :data:`RETRY_AFTER_CAP_SECONDS`: quota errors of Cloud Monitoring say when to come back).
    The last failure is raised as it is."""
    backoff = wait_exponential(multiplier=wait, max=30.0)

    def wait_for(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        asked = getattr(error, "retry_after", None)
        base = float(backoff(state))
        return base if asked is None else max(base, min(float(asked), RETRY_AFTER_CAP_SECONDS))

    return Retrying(
        stop=stop_after_attempt(max(1, attempts)),
        wait=wait_for,
        retry=retry_if_exception_type(TransientHistoryError),
        reraise=True,
    )


class _Watchdog:
    """Shuts the answer's socket down at ``at`` (monotonic seconds), which ends a blocked read."""

    def __init__(self, response: httpx.Response, at: float) -> None:
        self.fired = False
        self._timer: threading.Timer | None = None
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            self._timer = threading.Timer(max(0.0, at - time.monotonic()), self._fire, (sock,))
            self._timer.daemon = True
            self._timer.name = "history-deadline"
            self._timer.start()

    def _fire(self, sock: socket.socket) -> None:
        self.fired = True
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        """Stop the watchdog (the answer is complete, or failed first)."""
        if self._timer is not None:
            self._timer.cancel()


def bounded_call(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    where: str,
    params: Mapping[str, str] | None = None,
    content: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    deadline: float = DEFAULT_DEADLINE_SECONDS,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Answer:
    """One HTTP call with an overall ``deadline`` (seconds) and a ``max_bytes`` cap on the body
    (see the module doc). Any status is returned; the caller judges it.

    Raises:
        TransientHistoryError: unreachable, or no headers before the deadline.
        HistoryError: the deadline passed while the body came in, or the body is over the cap.
    """
    start = time.monotonic()
    end = start + deadline
    timeout = httpx.Timeout(deadline, connect=min(deadline, CONNECT_SECONDS))
    watchdog: _Watchdog | None = None
    try:
        with client.stream(
            method, url, params=params, content=content, headers=headers, timeout=timeout
        ) as resp:
            declared = resp.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > max_bytes:
                raise HistoryError(
                    f"{where}: answer of {int(declared):,} bytes is over the cap of {max_bytes:,} bytes"
                )
            watchdog = _Watchdog(resp, end)
            body = bytearray()
            for chunk in resp.iter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    raise HistoryError(f"{where}: answer larger than the cap of {max_bytes:,} bytes")
                if time.monotonic() >= end:
                    raise _Late
            return Answer(resp.status_code, resp.headers, bytes(body))
    except _Late:
        raise HistoryError(f"{where}: no complete answer within {deadline:g} s (deadline)") from None
    except httpx.TimeoutException as e:
        if time.monotonic() >= end - 0.05 and watchdog is not None:
            raise HistoryError(f"{where}: no complete answer within {deadline:g} s (deadline)") from None
        raise TransientHistoryError(f"{where}: timed out: {one_line(e) or type(e).__name__}") from None
    except httpx.HTTPError as e:
        if watchdog is not None and watchdog.fired:
            raise HistoryError(f"{where}: no complete answer within {deadline:g} s (deadline)") from None
        raise TransientHistoryError(f"{where}: unreachable: {one_line(e) or type(e).__name__}") from None
    finally:
        if watchdog is not None:
            watchdog.cancel()


class _Late(Exception):
    """The deadline passed between two chunks (private control flow)."""


class _GoogleResponse(_gtransport.Response):
    def __init__(self, answer: Answer) -> None:
        self._answer = answer

    @property
    def status(self) -> int:
        return self._answer.status

    @property
    def headers(self) -> Mapping[str, str]:
        return self._answer.headers  # case-insensitive, as google-auth reads it

    @property
    def data(self) -> bytes:
        return self._answer.body


class GoogleAuthRequest(_gtransport.Request):
    """google-auth's transport request on :func:`bounded_call`: the token endpoint and the
    metadata server are called with the same deadline (at most ``deadline`` seconds, less when
    google-auth asks for less) and a cap of :data:`TOKEN_MAX_BYTES`; a failure is the
    ``google.auth.exceptions.TransportError`` google-auth expects, naming only the host called.

    Args:
        client: the httpx client (tests give one with a loopback transport).
        deadline: the longest one call may take (seconds).
    """

    TOKEN_MAX_BYTES = 1 << 20

    def __init__(self, client: httpx.Client, deadline: float = 30.0) -> None:
        self.client = client
        self.deadline = deadline

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> _GoogleResponse:
        """Make the call google-auth asks for; returns its response.

        Raises:
            google.auth.exceptions.TransportError: unreachable, too slow or too large.
        """
        deadline = self.deadline if timeout is None else min(float(timeout), self.deadline)
        host = httpx.URL(url).host
        try:
            answer = bounded_call(
                self.client, method, url, where=f"google credentials ({host})", content=body,
                headers=headers, deadline=deadline, max_bytes=self.TOKEN_MAX_BYTES,
            )  # fmt: skip
        except HistoryError as e:
            raise _gexc.TransportError(str(e)) from None  # type: ignore[no-untyped-call]
        return _GoogleResponse(answer)
