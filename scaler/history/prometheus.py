"""Per-pod usage history from Prometheus range queries (also Google Managed Prometheus).

Two PromQL range queries over the last ``--history-days``, at a fixed step (default 5 minutes),
summed per pod over its containers (cAdvisor's series; ``container!=""`` drops the pod-level
cgroup series and ``pod!=""`` the node-level ones, so nothing is counted twice)::

    sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{container!="",pod!=""}[5m]))
    sum by (namespace, pod) (container_memory_working_set_bytes{container!="",pod!=""})

CPU comes back in cores and becomes millicores; memory is bytes. ``--prometheus-selector`` adds
label matchers to both selectors (e.g. ``cluster="prod"``).

Google Managed Prometheus (GMP) serves the same HTTP API (``/api/v1/query_range``) under
``https://monitoring.googleapis.com/v1/projects/PROJECT/location/global/prometheus`` and needs an
OAuth bearer token: put one in ``--prometheus-auth-file`` (e.g. refreshed by a sidecar), or point
``--prometheus-url`` at GMP's frontend proxy, which adds it. The file holds either a bare token
(sent as ``Authorization: Bearer TOKEN``) or one ``Header-Name: value`` line; it is read again
for every fetch, so rotated tokens work. No credentials live in the repository.

Long windows are fetched in chunks of at most one day (Prometheus caps a range query at 11,000
points per series, and a day of a big cluster is already a large answer).

Pods map to workloads through the snapshot (:func:`pod_workload_resolver`): a live pod by its
record (:func:`~scaler.history.profiles.workload_key`); a pod of the past, gone from the
snapshot, by its name and the workloads the snapshot knows (``web-7d9c6b5f4-x2x9z`` →
Deployment ``web``; ``db-3`` → StatefulSet ``db``; ``agent-x2x9z`` → DaemonSet, Job or
ReplicaSet ``agent``). Pods that match nothing are dropped: their workload is unknown.

Every failure (unreachable server, HTTP error, bad JSON, a non-success status, an unexpected
answer, an unreadable auth file) raises :class:`HistoryError` with a one-line message.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import msgspec

from scaler.errors import ScalerError, TransientError
from scaler.history.profiles import workload_key

if TYPE_CHECKING:
    from scaler.model.snapshot import ClusterSnapshot

__all__ = [
    "CPU_QUERY",
    "GPU_NODE_LABELS",
    "GPU_QUERY",
    "GPU_STEP_SECONDS",
    "MEMORY_QUERY",
    "HistoryError",
    "PrometheusClient",
    "TransientHistoryError",
    "fetch_gpu_usage",
    "fetch_pod_usage",
    "fetch_samples",
    "pod_workload_resolver",
    "read_auth_header",
]

CPU_QUERY = (
    'sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{{container!="",pod!=""{extra}}}[5m]))'
)
"""PromQL for per-pod CPU (cores); ``{extra}`` takes ``,<selector>`` or nothing."""
MEMORY_QUERY = 'sum by (namespace, pod) (container_memory_working_set_bytes{{container!="",pod!=""{extra}}})'
"""PromQL for per-pod working-set memory (bytes); ``{extra}`` as in :data:`CPU_QUERY`."""

GPU_QUERY = "DCGM_FI_DEV_GPU_UTIL{{{selector}}}"
"""PromQL for the GPU utilization NVIDIA's DCGM exporter reports (percent 0-100, one series per
GPU, the node in its ``Hostname`` label; GKE's managed DCGM metrics use the same name);
``{selector}`` takes ``--prometheus-selector`` or nothing."""
GPU_NODE_LABELS = ("Hostname", "node", "kubernetes_node")
"""Labels naming a DCGM series' node, in the order they are read: dcgm-exporter's own
``Hostname``, then the usual relabelled names."""
GPU_STEP_SECONDS = 60.0
"""Resolution of the GPU usage range query (seconds)."""

_CHUNK_SECONDS = 86400.0
_MAX_POINTS = 11000
_HEADER = re.compile(r"^([A-Za-z0-9!#$%&'*+.^_`|~-]+):\s*(.+)$")


class HistoryError(ScalerError, RuntimeError):
    """Usage history could not be loaded; the message is one line naming the server or file."""


class TransientHistoryError(HistoryError, TransientError):
    """A failure worth retrying: the server is unreachable, timed out, or answered HTTP 429 or
    5xx (overloaded, restarting, a proxy's gateway error)."""


def _one_line(text: object, limit: int = 300) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def read_auth_header(path: str | Path) -> tuple[str, str]:
    """The ``(name, value)`` header of an auth file: ``Header-Name: value`` as given, or a bare
    token as ``Authorization: Bearer TOKEN``.

    Raises:
        HistoryError: the file cannot be read or is empty.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise HistoryError(f"prometheus auth file {p}: cannot read: {_one_line(e)}") from None
    if not text:
        raise HistoryError(f"prometheus auth file {p}: empty")
    first = text.splitlines()[0].strip()
    m = _HEADER.match(first)
    if m and not first.lower().startswith("bearer "):
        return m[1], m[2].strip()
    token = first[7:].strip() if first.lower().startswith("bearer ") else first
    return "Authorization", f"Bearer {token}"


class PrometheusClient:
    """A minimal client of the Prometheus HTTP query API (``/api/v1/query_range``).

    Args:
        url: base URL, the part before ``/api/v1`` (a trailing ``/`` is fine).
        auth_file: optional auth file (:func:`read_auth_header`), read once here.
        timeout: seconds per HTTP request.
        transport: an httpx transport (tests).
    """

    def __init__(
        self,
        url: str,
        *,
        auth_file: str = "",
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not url:
            raise HistoryError("--prometheus-url is required with --history=prometheus")
        if not url.startswith(("http://", "https://")):
            raise HistoryError(f"--prometheus-url must start with http:// or https://, got {url!r}")
        self.url = url.rstrip("/")
        headers = {"Accept": "application/json", "User-Agent": "scaler-history"}
        if auth_file:
            name, value = read_auth_header(auth_file)
            headers[name] = value
        self._client = httpx.Client(headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    def __enter__(self) -> PrometheusClient:
        """Use as a context manager (closes on exit)."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the client."""
        self.close()

    def query_range(
        self, query: str, start: float, end: float, step: float
    ) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
        """Run one range query; return ``(labels, [(unix seconds, value), ...])`` per series.

        Raises:
            HistoryError: connection failure, HTTP error, invalid JSON, a non-success status or
                an answer that is not a matrix of ``[time, "value"]`` pairs.
        """
        endpoint = f"{self.url}/api/v1/query_range"
        params = {"query": query, "start": _ts(start), "end": _ts(end), "step": _ts(step)}
        where = f"prometheus at {self.url}"
        try:
            resp = self._client.get(endpoint, params=params)
        except httpx.TimeoutException as e:
            raise TransientHistoryError(f"{where}: timed out: {_one_line(e) or type(e).__name__}") from None
        except httpx.HTTPError as e:
            raise TransientHistoryError(f"{where}: unreachable: {_one_line(e) or type(e).__name__}") from None
        error = TransientHistoryError if resp.status_code == 429 or resp.status_code >= 500 else HistoryError
        try:
            body: Any = msgspec.json.decode(resp.content)
        except msgspec.DecodeError:
            if resp.status_code >= 400:
                raise error(f"{where}: HTTP {resp.status_code}: {_one_line(resp.text, 200)}") from None
            raise HistoryError(f"{where}: invalid JSON in the answer to query_range") from None
        if not isinstance(body, dict):
            raise HistoryError(f"{where}: unexpected answer (not a JSON object)")
        if body.get("status") != "success" or resp.status_code >= 400:
            detail = body.get("error") or body.get("status") or "no status"
            kind = body.get("errorType")
            prefix = f"HTTP {resp.status_code}" if resp.status_code >= 400 else "query failed"
            raise error(f"{where}: {prefix}: {_one_line(f'{kind}: {detail}' if kind else detail, 250)}")
        data = body.get("data")
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            raise HistoryError(f"{where}: unexpected answer (expected a matrix)")
        result = data.get("result")
        if not isinstance(result, list):
            raise HistoryError(f"{where}: unexpected answer (result is not a list)")
        out: list[tuple[dict[str, str], list[tuple[float, float]]]] = []
        try:
            for series in result:
                labels = {str(k): str(v) for k, v in series["metric"].items()}
                values = [(float(t), float(v)) for t, v in series["values"]]
                out.append((labels, values))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise HistoryError(f"{where}: unexpected answer (malformed series)") from None
        return out

    def series_exist(self, selector: str) -> bool:
        """Whether any series matches ``selector`` at any time the server holds: the metric
        names of the matching series (``/api/v1/label/__name__/values``, a short answer however
        many series match).

        Raises:
            HistoryError: as :meth:`query_range`.
        """
        where = f"prometheus at {self.url}"
        try:
            resp = self._client.get(f"{self.url}/api/v1/label/__name__/values", params={"match[]": selector})
        except httpx.HTTPError as e:
            raise TransientHistoryError(f"{where}: unreachable: {_one_line(e) or type(e).__name__}") from None
        try:
            body: Any = msgspec.json.decode(resp.content)
        except msgspec.DecodeError:
            raise HistoryError(f"{where}: HTTP {resp.status_code}: {_one_line(resp.text, 200)}") from None
        if not isinstance(body, dict) or body.get("status") != "success":
            raise HistoryError(f"{where}: series lookup failed: {_one_line(body, 200)}")
        data = body.get("data")
        return isinstance(data, list) and len(data) > 0


def _ts(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".")


def _chunks(
    start: float, end: float, step: float, max_points: int = _MAX_POINTS
) -> Iterator[tuple[float, float]]:
    """Consecutive ``[lo, hi]`` ranges of evaluation instants ``start + k·step <= end``, each
    at most a day and at most ``max_points`` points (Prometheus's limit per series, 11,000),
    no instant twice."""
    span = max(step, min(_CHUNK_SECONDS, step * (max_points - 1)))
    per = max(1, int(span // step))
    lo = start
    while lo <= end:
        hi = min(end, lo + (per - 1) * step)
        yield lo, hi
        lo = hi + step


def fetch_pod_usage(
    client: PrometheusClient, start: float, end: float, step: float = 300.0, selector: str = ""
) -> dict[tuple[str, str], dict[float, list[float]]]:
    """Per pod ``(namespace, pod)``, per instant: ``[cpu millicores, memory bytes]`` from the two
    queries (NaN where one of them has no point at that instant).

    Raises:
        HistoryError: a query failed (see :meth:`PrometheusClient.query_range`), or a bad step.
    """
    if not step > 0:
        raise HistoryError(f"history step must be positive, got {step!r}")
    extra = f",{selector.strip().strip(',')}" if selector.strip() else ""
    out: dict[tuple[str, str], dict[float, list[float]]] = {}
    for col, (query, scale) in enumerate(
        ((CPU_QUERY.format(extra=extra), 1000.0), (MEMORY_QUERY.format(extra=extra), 1.0))
    ):
        for lo, hi in _chunks(start, end, step):
            for labels, values in client.query_range(query, lo, hi, step):
                ns, pod = labels.get("namespace", ""), labels.get("pod", "")
                if not pod:
                    continue
                per = out.setdefault((ns, pod), {})
                for t, v in values:
                    if not math.isfinite(v):
                        continue
                    slot = per.get(t)
                    if slot is None:
                        slot = per[t] = [math.nan, math.nan]
                    slot[col] = v * scale
    return out


def fetch_gpu_usage(
    client: PrometheusClient,
    gpus: Mapping[str, int],
    start: float,
    end: float,
    selector: str = "",
    step: float = GPU_STEP_SECONDS,
) -> dict[str, float]:
    """The real GPU usage of the nodes of ``gpus`` (node name → allocatable GPUs) over
    ``[start, end]`` (Unix seconds): per node, Σ over its GPUs of each GPU's highest
    ``DCGM_FI_DEV_GPU_UTIL`` in the window / 100 / its allocatable GPUs (the number of GPUs
    reported when none is allocatable yet), a fraction 0-1. The highest reading, not the mean:
    a GPU busy a few minutes ago is not idle. A node without any DCGM series is absent (its GPU
    usage is unknown). GPUs are told apart by their ``UUID`` label, else ``gpu``.

    Raises:
        HistoryError: the query failed (see :meth:`PrometheusClient.query_range`).
    """
    query = GPU_QUERY.format(selector=selector.strip().strip(","))
    peaks: dict[str, dict[str, float]] = {}
    for lo, hi in _chunks(start, end, step):
        for labels, values in client.query_range(query, lo, hi, step):
            node = next((labels[k] for k in GPU_NODE_LABELS if labels.get(k)), "")
            if node not in gpus:
                continue
            gpu = labels.get("UUID") or labels.get("gpu") or labels.get("device", "")
            finite = [v for _, v in values if math.isfinite(v)]
            if finite:
                per = peaks.setdefault(node, {})
                per[gpu] = max(per.get(gpu, 0.0), max(finite))
    return {
        node: sum(min(max(v, 0.0), 100.0) for v in per.values()) / 100.0 / (gpus[node] or len(per))
        for node, per in peaks.items()
    }


_SUFFIX5 = re.compile(r"^(.+)-[a-z0-9]{5}$")
_HASHED = re.compile(r"^(.+)-[a-z0-9]{1,10}-[a-z0-9]{5}$")
_ORDINAL = re.compile(r"^(.+)-\d+$")


def pod_workload_resolver(snapshot: ClusterSnapshot) -> Callable[[str, str], str | None]:
    """A function ``(namespace, pod name) -> workload key or None`` for pods seen in history.

    Pods in the snapshot resolve by :func:`~scaler.history.profiles.workload_key`. Others (pods
    that existed during the window but not now) resolve by name against the workloads the
    snapshot knows, from its pods' keys and its controllers:

    * ``NAME-HASH-XXXXX`` → Deployment ``NAME`` (pods of any ReplicaSet revision);
    * ``NAME-XXXXX`` → a ReplicaSet (or its Deployment), DaemonSet, Job or ReplicationController
      ``NAME``;
    * ``NAME-ORDINAL`` → StatefulSet ``NAME``;
    * anything else → ``None`` (dropped).
    """
    live: dict[tuple[str, str], str] = {
        (p.namespace, p.name): workload_key(p, snapshot) for p in snapshot.pods
    }
    # (namespace, name) -> key, per naming pattern.
    hashed: dict[tuple[str, str], str] = {}
    suffixed: dict[tuple[str, str], str] = {}
    ordinal: dict[tuple[str, str], str] = {}

    def add(ns: str, kind: str, name: str, key: str) -> None:
        if kind == "Deployment":
            hashed.setdefault((ns, name), key)
        elif kind == "StatefulSet":
            ordinal.setdefault((ns, name), key)
        elif kind in ("ReplicaSet", "DaemonSet", "Job", "ReplicationController"):
            suffixed.setdefault((ns, name), key)

    for key in live.values():
        ns, kind, name = key.split("/", 2)
        add(ns, kind, name, key)
    for (kind, ns, name), c in snapshot.controllers.items():
        if kind == "ReplicaSet" and c.owner is not None and c.owner.kind == "Deployment":
            dep = f"{ns}/Deployment/{c.owner.name}"
            suffixed.setdefault((ns, name), dep)
            hashed.setdefault((ns, c.owner.name), dep)
        elif kind == "Deployment":
            hashed.setdefault((ns, name), f"{ns}/Deployment/{name}")
        else:
            add(ns, kind, name, f"{ns}/{kind}/{name}")

    def resolve(namespace: str, pod: str) -> str | None:
        key = live.get((namespace, pod))
        if key is not None:
            return key
        m = _SUFFIX5.match(pod)
        if m:
            key = suffixed.get((namespace, m[1]))
            if key is not None:
                return key
        m = _HASHED.match(pod)
        if m:
            key = hashed.get((namespace, m[1]))
            if key is not None:
                return key
        m = _ORDINAL.match(pod)
        if m:
            return ordinal.get((namespace, m[1]))
        return None

    return resolve


def fetch_samples(
    url: str,
    snapshot: ClusterSnapshot,
    now: float,
    history_days: float,
    *,
    auth_file: str = "",
    step: float = 300.0,
    selector: str = "",
    timeout: float = 60.0,
    transport: httpx.BaseTransport | None = None,
) -> list[tuple[str, float, float, float]]:
    """Samples for :func:`~scaler.history.profiles.build_profiles` from Prometheus: one
    ``(workload key, unix seconds, cpu millicores, memory bytes)`` per pod and instant in
    ``[now - history_days, now)``, instants on multiples of ``step``.

    Raises:
        HistoryError: bad arguments, or any failure of the server (one-line message).
    """
    if not history_days > 0:
        raise HistoryError(f"--history-days must be positive, got {history_days!r}")
    start = math.ceil((now - history_days * 86400.0) / step) * step
    end = math.floor(now / step) * step
    if end >= now:
        end -= step
    if end < start:
        return []
    resolve = pod_workload_resolver(snapshot)
    with PrometheusClient(url, auth_file=auth_file, timeout=timeout, transport=transport) as client:
        usage = fetch_pod_usage(client, start, end, step, selector)
    out: list[tuple[str, float, float, float]] = []
    for (ns, pod), per in sorted(usage.items()):
        key = resolve(ns, pod)
        if key is None:
            continue
        for t, (cpu, mem) in sorted(per.items()):
            out.append((key, t, cpu, mem))
    return out
