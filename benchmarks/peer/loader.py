"""Create a :class:`~benchmarks.peer.objects.LoadPlan` in a real API server, many requests at
once.

Each wave of the plan runs on ``concurrency`` threads, each with its own ``httpx.Client`` (one
keep-alive HTTP/1.1 connection per thread: httpx's async pool spends more CPU managing 32
connections than the API server spends answering); a wave starts when the previous one is done,
so owner references can name the uids the server just gave. Per object: POST the body (owner
reference uids re-pointed by kind, namespace and name), PATCH the ``status`` subresource with
the snapshot's status, then the object's own merge patch (a node's taints), then, for a pod
Terminating in the snapshot, DELETE it with its grace period (without a kubelet it stays
Terminating). 429, 5xx and connection errors are retried (up to 8 times, backing off from
0.2 s); any other failure stops the load with :class:`LoadError`.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from benchmarks.peer.objects import LoadPlan, Step

__all__ = ["LoadError", "LoadReport", "load"]

_RETRIES = 8
_MERGE = {"Content-Type": "application/merge-patch+json"}
_JSON = {"Content-Type": "application/json"}


class LoadError(Exception):
    """The API server refused an object (the message names it and gives the answer)."""


@dataclass(slots=True)
class LoadReport:
    """How a load went.

    Attributes:
        seconds: wall time per wave, and ``total``.
        objects: objects created per wave.
        requests: HTTP requests made (retries included).
        retries: requests retried.
        missing_owners: owner references whose owner was not in the snapshot (left as they were).
    """

    seconds: dict[str, float] = field(default_factory=dict)
    objects: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    retries: int = 0
    missing_owners: Counter[str] = field(default_factory=Counter)


class _Loader:
    def __init__(self, server: str, verify: ssl.SSLContext, report: LoadReport) -> None:
        self.server = server
        self.verify = verify
        self.report = report
        self.uids: dict[tuple[str, str, str], str] = {}
        self.lock = threading.Lock()

    def _call(self, client: httpx.Client, method: str, path: str, body: Any, headers: dict[str, str],
              what: str) -> httpx.Response:  # fmt: skip
        content = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        delay = 0.2
        for attempt in range(_RETRIES + 1):
            with self.lock:
                self.report.requests += 1
            try:
                r = client.request(method, path, content=content, headers=headers)
            except httpx.TransportError as e:
                if attempt == _RETRIES:
                    raise LoadError(f"{what}: {method} {path}: {e}") from e
            else:
                if r.status_code < 300 or (r.status_code == 409 and method == "POST"):
                    return r
                if (r.status_code != 429 and r.status_code < 500) or attempt == _RETRIES:
                    raise LoadError(f"{what}: {method} {path}: HTTP {r.status_code}: {r.text[:400]}")
            with self.lock:
                self.report.retries += 1
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
        raise AssertionError("unreachable")

    def _point_owners(self, step: Step) -> None:
        meta = step.body["metadata"]
        refs = meta.get("ownerReferences")
        if not refs:
            meta.pop("ownerReferences", None)
            return
        ns = str(meta.get("namespace") or "")
        for ref in refs:
            owner_ns = "" if ref.get("kind") == "Node" else ns
            uid = self.uids.get((str(ref.get("kind")), owner_ns, str(ref.get("name"))))
            if uid is None:
                with self.lock:
                    self.report.missing_owners[str(ref.get("kind"))] += 1
            else:
                ref["uid"] = uid

    def step(self, client: httpx.Client, step: Step) -> None:
        self._point_owners(step)
        kind, ns, name = step.key
        what = f"{kind} {ns + '/' if ns else ''}{name}"
        r = self._call(client, "POST", step.path, step.body, _JSON, what)
        if r.status_code == 409:  # already there (a re-run): take its uid
            r = self._call(client, "GET", f"{step.path}/{name}", None, _JSON, what)
        uid = str(json.loads(r.content)["metadata"]["uid"])
        with self.lock:
            self.uids[step.key] = uid
        path = f"{step.path}/{name}"
        if step.status is not None:
            self._call(client, "PATCH", f"{path}/status", {"status": step.status}, _MERGE, what)
        if step.patch is not None:
            self._call(client, "PATCH", path, step.patch, _MERGE, what)
        if step.delete_grace_seconds is not None:
            self._call(client, "DELETE", path, {"gracePeriodSeconds": step.delete_grace_seconds}, _JSON, what)

    def wave(self, steps: list[Step], concurrency: int) -> None:
        it: Iterator[Step] = iter(steps)
        errors: list[BaseException] = []

        def worker() -> None:
            with httpx.Client(base_url=self.server, verify=self.verify, timeout=120.0) as client:
                while not errors:
                    with self.lock:
                        step = next(it, None)
                    if step is None:
                        return
                    try:
                        self.step(client, step)
                    except BaseException as e:
                        errors.append(e)

        threads = [
            threading.Thread(target=worker, daemon=True) for _ in range(max(1, min(concurrency, len(steps))))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]


def load(server: str, verify: ssl.SSLContext, plan: LoadPlan, concurrency: int = 32) -> LoadReport:
    """Create every object of ``plan`` in the API server at ``server`` (``https://host:port``),
    authenticating with ``verify`` (a client context holding the admin certificate).

    Raises:
        LoadError: an object was refused, or a retried request kept failing.
    """
    report = LoadReport()
    loader = _Loader(server, verify, report)
    start = time.perf_counter()
    for name, steps in plan.waves:
        t = time.perf_counter()
        loader.wave(steps, concurrency)
        report.seconds[name] = time.perf_counter() - t
        report.objects[name] = len(steps)
    report.seconds["total"] = time.perf_counter() - start
    return report
