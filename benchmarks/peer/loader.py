"""Create a :class:`~benchmarks.peer.objects.LoadPlan` in a real API server, many requests at
once.

Each wave of the plan runs on ``concurrency`` asyncio workers sharing one ``httpx.AsyncClient``
(that many keep-alive HTTP/1.1 connections); a wave starts when the
previous one is done, so owner references can name the uids the server just gave. Per object:
POST the body (owner reference uids re-pointed by kind, namespace and name), PATCH the
``status`` subresource with the snapshot's status, then the object's own merge patch (a node's
taints), then, for a pod Terminating in the snapshot, DELETE it with its grace period (without a
kubelet it stays Terminating). 429, 5xx and connection errors are retried (up to 8 times,
backing off from 0.2 s); any other failure stops the load with :class:`LoadError`.
"""

from __future__ import annotations

import asyncio
import json
import ssl
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
    def __init__(self, client: httpx.AsyncClient, report: LoadReport) -> None:
        self.client = client
        self.report = report
        self.uids: dict[tuple[str, str, str], str] = {}

    async def _call(self, method: str, path: str, body: Any, headers: dict[str, str], what: str,
                    params: dict[str, str] | None = None) -> httpx.Response:  # fmt: skip
        content = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        delay = 0.2
        for attempt in range(_RETRIES + 1):
            self.report.requests += 1
            try:
                r = await self.client.request(method, path, content=content, headers=headers, params=params)
            except httpx.TransportError as e:
                if attempt == _RETRIES:
                    raise LoadError(f"{what}: {method} {path}: {e}") from e
            else:
                if r.status_code < 300 or (r.status_code == 409 and method == "POST"):
                    return r
                if (r.status_code != 429 and r.status_code < 500) or attempt == _RETRIES:
                    raise LoadError(f"{what}: {method} {path}: HTTP {r.status_code}: {r.text[:400]}")
            self.report.retries += 1
            await asyncio.sleep(delay)
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
                self.report.missing_owners[str(ref.get("kind"))] += 1
            else:
                ref["uid"] = uid

    async def step(self, step: Step) -> None:
        self._point_owners(step)
        kind, ns, name = step.key
        what = f"{kind} {ns + '/' if ns else ''}{name}"
        r = await self._call("POST", step.path, step.body, _JSON, what)
        if r.status_code == 409:  # already there (a re-run): take its uid
            r = await self._call("GET", f"{step.path}/{name}", None, _JSON, what)
        self.uids[step.key] = str(json.loads(r.content)["metadata"]["uid"])
        path = f"{step.path}/{name}"
        if step.status is not None:
            await self._call("PATCH", f"{path}/status", {"status": step.status}, _MERGE, what)
        if step.patch is not None:
            await self._call("PATCH", path, step.patch, _MERGE, what)
        if step.delete_grace_seconds is not None:
            await self._call("DELETE", path, {"gracePeriodSeconds": step.delete_grace_seconds}, _JSON, what)

    async def wave(self, steps: list[Step], concurrency: int) -> None:
        it: Iterator[Step] = iter(steps)

        async def worker() -> None:
            for step in it:
                await self.step(step)

        await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(steps))))))


async def _load(server: str, verify: ssl.SSLContext, plan: LoadPlan, concurrency: int) -> LoadReport:
    report = LoadReport()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=server, verify=verify, limits=limits, timeout=120.0) as client:
        loader = _Loader(client, report)
        start = time.perf_counter()
        for name, steps in plan.waves:
            t = time.perf_counter()
            await loader.wave(steps, concurrency)
            report.seconds[name] = time.perf_counter() - t
            report.objects[name] = len(steps)
        report.seconds["total"] = time.perf_counter() - start
    return report


def load(server: str, verify: ssl.SSLContext, plan: LoadPlan, concurrency: int = 32) -> LoadReport:
    """Create every object of ``plan`` in the API server at ``server`` (``https://host:port``),
    authenticating with ``verify`` (a client context holding the admin certificate).

    Raises:
        LoadError: an object was refused, or a retried request kept failing.
    """
    return asyncio.run(_load(server, verify, plan, concurrency))
