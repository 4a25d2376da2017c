"""A loopback Prometheus HTTP API that answers what the test tells it to: crafted, hostile or slow.

:class:`FakePrometheus` serves ``/api/v1/*`` on ``127.0.0.1:<free port>`` (real HTTP, through
:class:`fakes.loopback.LoopbackServer`). Each request is recorded (:attr:`requests`, with its
query parameters) and answered by :attr:`FakePrometheus.answer`, a function of the request: by
default a well-formed, empty matrix. Helpers build the answers the tests need:

* :func:`matrix` — ``{"status": "success", "data": {"resultType": "matrix", "result": …}}``
  from ``(labels, [(t, "value"), …])`` pairs, values as given (strings, or anything to craft a
  bad answer);
* :func:`trickle` — a streamed answer that sends ``body`` one byte every ``every`` seconds;
* :func:`grid` — the evaluation instants of a ``query_range`` request (start, end, step).

It also plays the GCE metadata server of a GKE pod with Workload Identity (point
``GCE_METADATA_HOST`` and ``GCE_METADATA_IP`` at :attr:`host`): the ping at ``/``, the project,
the ``default`` service account, and its access tokens ``token-1``, ``token-2``, … that expire
after :attr:`FakePrometheus.token_lifetime` seconds (every answer with ``Metadata-Flavor:
Google``; a request without that header is refused, as the real server does).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence
from typing import Any

from fakes.loopback import LoopbackServer, RecordedRequest, Response

__all__ = ["FakePrometheus", "RecordedRequest", "Response", "grid", "matrix", "trickle"]


def matrix(*series: tuple[dict[str, Any], Sequence[Sequence[Any]]]) -> dict[str, Any]:
    """A successful ``query_range`` answer holding ``series`` (labels, points) as given."""
    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [{"metric": m, "values": [list(p) for p in vs]} for m, vs in series],
        },
    }


def trickle(body: bytes, every: float) -> Response:
    """An answer whose body comes one byte every ``every`` seconds (chunked)."""

    def gen() -> Generator[bytes | None, None, None]:
        for i in range(len(body)):
            deadline = time.monotonic() + every
            while time.monotonic() < deadline:
                time.sleep(min(0.05, every))
                yield None  # lets the server notice a client that hung up
            yield body[i : i + 1]

    return Response(200, b"", stream=gen())


def grid(req: RecordedRequest) -> list[float]:
    """The evaluation instants ``start, start + step, …, <= end`` of a ``query_range`` request."""
    start, end, step = (float(req.query[k]) for k in ("start", "end", "step"))
    n = int((end - start) // step + 1e-9) + 1
    return [start + i * step for i in range(n)]


class FakePrometheus(LoopbackServer[RecordedRequest]):
    """The fake; see the module doc. ``answer`` may return a :class:`Response` or a JSON-able
    body (sent with status 200)."""

    thread_name = "fake-prometheus"

    def __init__(self, answer: Callable[[RecordedRequest], Any] | None = None) -> None:
        super().__init__(RecordedRequest)
        self.answer: Callable[[RecordedRequest], Any] = answer or (lambda _r: matrix())
        self.token_lifetime = 3600
        """Seconds each access token of ``POST /token`` is valid for (``expires_in``)."""
        self.tokens_issued = 0

    SERVICE_ACCOUNT = "scaler@acme.iam.gserviceaccount.com"

    def _route(self, req: RecordedRequest) -> Response:
        if req.path == "/" or req.path.startswith("/computeMetadata/"):
            return self._metadata(req)
        out = self.answer(req)
        return out if isinstance(out, Response) else Response(200, out)

    def _metadata(self, req: RecordedRequest) -> Response:
        flavor = {"Metadata-Flavor": "Google"}
        if req.headers.get("metadata-flavor") != "Google":
            return Response(403, "Missing Metadata-Flavor: Google", "text/plain", flavor)
        path = req.path.removeprefix("/computeMetadata/v1/")
        if req.path == "/":
            return Response(200, "computeMetadata/\n", "text/plain", flavor)
        if path == "project/project-id":
            return Response(200, "acme", "text/plain", flavor)
        if path.rstrip("/") in (f"instance/service-accounts/{a}" for a in ("default", self.SERVICE_ACCOUNT)):
            info = {"email": self.SERVICE_ACCOUNT, "scopes": ["https://www.googleapis.com/auth/cloud-platform"],
                    "aliases": ["default"]}  # fmt: skip
            return Response(200, info, "application/json", flavor)
        if path in (f"instance/service-accounts/{a}/token" for a in ("default", self.SERVICE_ACCOUNT)):
            self.tokens_issued += 1
            token = {"access_token": f"token-{self.tokens_issued}", "expires_in": self.token_lifetime,
                     "token_type": "Bearer"}  # fmt: skip
            return Response(200, token, "application/json", flavor)
        return Response(404, "not found", "text/plain", flavor)

    def _error_body(self, status: int, message: str) -> Any:
        return {"status": "error", "errorType": "internal", "error": message}

    def fail(self, status: int, *, times: int | None = 1, body: Any = None, path: str = "/api/v1/") -> None:
        """Answer ``status`` (and ``body``) to the next ``times`` requests under ``path``."""
        from fakes.loopback import FaultRule

        self._add_rule(FaultRule(lambda r: r.path.startswith(path), status, times, body=body))
