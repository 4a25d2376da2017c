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

Nothing the server says is trusted. Every call has an overall deadline and a byte cap
(:mod:`scaler.history.http`), and every answer is checked before any number of it is used
(:meth:`PrometheusClient.query_range`): a JSON object (not nested deeper than a Prometheus answer
is), a matrix, string labels, no two series alike, at most :data:`MAX_SERIES` series, and points
on the query's step grid inside its window, strictly increasing in time, with finite values
>= 0. Every failure (unreachable server, deadline, size, HTTP error, bad JSON, a non-success
status, an answer that fails a check, an unreadable auth file) raises :class:`HistoryError` with
a one-line message naming the server (its URL redacted) and the query.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import httpx
import msgspec
import numpy as np
import numpy.typing as npt

from scaler.history.errors import HistoryError, TransientHistoryError, with_suffix
from scaler.history.errors import one_line as _one_line
from scaler.history.google_auth import GOOGLE_HOSTS, GoogleCredentials
from scaler.history.http import (
    DEFAULT_DEADLINE_SECONDS,
    DEFAULT_MAX_BYTES,
    Answer,
    bounded_call,
    retry_after_seconds,
)
from scaler.history.profiles import workload_key
from scaler.history.usage_metrics import CADVISOR, GKE_SYSTEM, UsageMetrics
from scaler.specs import prometheus_url_problem, redact_url

if TYPE_CHECKING:
    from scaler.model.snapshot import ClusterSnapshot

__all__ = [
    "FIRST_WINDOW_STEPS",
    "GKE_GPU_QUERY",
    "GPU_NODE_LABELS",
    "GPU_QUERY",
    "GPU_STEP_SECONDS",
    "MAX_SERIES",
    "POINTS_PER_ANSWER",
    "HistoryError",
    "PrometheusClient",
    "RangeSeries",
    "TransientHistoryError",
    "Windows",
    "fetch_gpu_usage",
    "fetch_pod_usage",
    "fetch_samples",
    "pod_workload_resolver",
    "read_auth_header",
]

GPU_QUERY = "DCGM_FI_DEV_GPU_UTIL{{{selector}}}"
"""PromQL for the GPU utilization NVIDIA's DCGM exporter reports (percent 0-100, one series per
GPU, the node in its ``Hostname`` label; GKE's managed DCGM metrics use the same name);
``{selector}`` takes ``--prometheus-selector`` or nothing. The cAdvisor source's GPU query."""
GKE_GPU_QUERY = (
    "max by (namespace_name, pod_name, accelerator_id) "
    '(kubernetes_io:container_accelerator_duty_cycle{{monitored_resource="k8s_container"{extra}}})'
)
"""PromQL for GKE's accelerator duty cycle (percent 0-100 of the time each accelerator was busy,
per container; the gke-system source's GPU query, no DCGM exporter needed); ``{extra}`` takes
``,<selector>`` or nothing. Pods map to their nodes through the snapshot."""
GPU_NODE_LABELS = ("Hostname", "node", "kubernetes_node")
"""Labels naming a DCGM series' node, in the order they are read: dcgm-exporter's own
``Hostname``, then the usual relabelled names."""
GPU_STEP_SECONDS = 60.0
"""Resolution of the GPU usage range query (seconds)."""

MAX_SERIES = 500_000
"""The most series one answer may hold (a month of a 5,000-node cluster's pods is ~150,000)."""
POINTS_PER_ANSWER = 250_000
"""How many points (series × instants) a range query asks for once the series count is known:
answers stay around 10 MB, far below the sizes Cloud Monitoring refuses as too large."""
FIRST_WINDOW_STEPS = 3
"""The instants of the first query of a range, which tells how many series there are."""

_CHUNK_SECONDS = 86400.0
_MAX_POINTS = 11000
_HEADER = re.compile(r"^([A-Za-z0-9!#$%&'*+.^_`|~-]+):\s*(.+)$")


class RangeSeries(NamedTuple):
    """One series of a validated ``query_range`` answer: its labels and its points, ``times``
    (Unix seconds, strictly increasing, on the query's step grid inside its window) and
    ``values`` (finite, >= 0), two float64 arrays of one length."""

    labels: dict[str, str]
    times: npt.NDArray[np.float64]
    values: npt.NDArray[np.float64]


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


class _Body(msgspec.Struct):
    """The envelope of every Prometheus API answer (``data`` decoded later, by its kind)."""

    status: str = ""
    data: msgspec.Raw = msgspec.Raw(b"null")
    error: str = ""
    errorType: str = ""


class _Matrix(msgspec.Struct):
    resultType: str
    result: msgspec.Raw = msgspec.Raw(b"[]")


class _Series(msgspec.Struct):
    metric: dict[str, str]
    values: list[tuple[float, str]] = []


class PrometheusClient:
    """A client of the Prometheus HTTP query API (``/api/v1/query_range``) that trusts nothing
    it reads: every call has an overall deadline and a byte cap (:func:`~scaler.history.http.
    bounded_call`), and every answer is validated (:meth:`query_range`).

    Args:
        url: base URL, the part before ``/api/v1`` (a trailing ``/`` is fine); no credentials
            in it (:func:`scaler.specs.prometheus_url_problem`). Errors name it redacted.
        auth_file: optional auth file (:func:`read_auth_header`), read once here.
        auth: ``auto`` (the auth file when given, else Google Application Default Credentials
            for ``monitoring.googleapis.com``, else nothing), ``google`` (Application Default
            Credentials whatever the host) or ``none``.
        deadline: seconds one call may take in all (connect, wait, body).
        max_bytes: the largest answer read (bytes, decompressed).
        max_series: the most series one answer may hold.
        transport: an httpx transport (tests).

    Raises:
        HistoryError: no URL, a URL refused, an unreadable auth file, an auth file with
            ``auth=google``, or no Application Default Credentials where they are needed.
    """

    def __init__(
        self,
        url: str,
        *,
        auth_file: str = "",
        auth: str = "auto",
        deadline: float = DEFAULT_DEADLINE_SECONDS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_series: int = MAX_SERIES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not url:
            raise HistoryError("--prometheus-url is required with --history=prometheus")
        problem = prometheus_url_problem(url)
        if problem:
            raise HistoryError(problem)
        self.url = url.rstrip("/")
        self.where = f"prometheus at {redact_url(self.url)}"
        """How errors name the server (its URL, redacted)."""
        self.deadline = deadline
        self.max_bytes = max_bytes
        self.max_series = max_series
        self._headers = {"Accept": "application/json", "User-Agent": "scaler-history"}
        if auth not in ("auto", "google", "none"):
            raise HistoryError(f"--prometheus-auth must be auto, google or none, got {auth!r}")
        if auth_file and auth != "auto":
            raise HistoryError(f"--prometheus-auth-file is read only with --prometheus-auth auto, not {auth}")
        if auth_file:
            name, value = read_auth_header(auth_file)
            self._headers[name] = value
        self._client = httpx.Client(transport=transport, follow_redirects=False)
        self._google: GoogleCredentials | None = None
        host = httpx.URL(self.url).host
        if auth == "google" or (auth == "auto" and not auth_file and host in GOOGLE_HOSTS):
            self._google = GoogleCredentials(self._client, min(deadline, 30.0))

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    def __enter__(self) -> PrometheusClient:
        """Use as a context manager (closes on exit)."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the client."""
        self.close()

    def _get(self, path: str, params: Mapping[str, str]) -> tuple[Answer, _Body]:
        """GET ``path`` with ``params``: the answer and its decoded envelope, ``status: success``.

        Raises:
            HistoryError: transport failures (:func:`bounded_call`), an HTTP error, a body that
                is not a JSON object, nested too deeply, or a non-success status.
        """
        url = f"{self.url}{path}"
        headers = dict(self._headers)
        if self._google is not None:
            try:
                headers.update(self._google.headers("GET", url))
            except HistoryError as e:
                raise HistoryError(f"{self.where}: {e}") from None
        answer = bounded_call(
            self._client, "GET", url, where=self.where, params=params,
            headers=headers, deadline=self.deadline, max_bytes=self.max_bytes,
        )  # fmt: skip
        status = answer.status
        error = TransientHistoryError if status == 429 or status >= 500 else HistoryError
        try:
            body = msgspec.json.decode(answer.body, type=_Body)
        except RecursionError:
            raise HistoryError(f"{self.where}: answer nested too deeply (not a Prometheus answer)") from None
        except msgspec.ValidationError as e:
            if status >= 400:
                raise _http_error(error, self.where, answer) from None
            what = str(e) if " - at " in str(e) else "not a JSON object"
            raise HistoryError(f"{self.where}: unexpected answer ({_one_line(what, 200)})") from None
        except msgspec.DecodeError:
            if status >= 400:
                raise _http_error(error, self.where, answer) from None
            raise HistoryError(
                f"{self.where}: invalid JSON in the answer to {path.rsplit('/', 1)[-1]}"
            ) from None
        if body.status != "success" or status >= 400:
            detail = body.error or body.status or "no status"
            prefix = f"HTTP {status}" if status >= 400 else "query failed"
            text = f"{body.errorType}: {detail}" if body.errorType else detail
            failure = error(f"{self.where}: {prefix}: {_one_line(text, 250)}")
            if isinstance(failure, TransientHistoryError):
                failure.retry_after = retry_after_seconds(answer.headers.get("retry-after"))
            raise failure
        return answer, body

    def query_range(self, query: str, start: float, end: float, step: float) -> list[RangeSeries]:
        """Run one range query and validate its answer: a matrix whose series have string labels,
        no two alike, at most ``max_series`` of them, and whose points are on the step grid
        ``start + k·step`` inside ``[start, end]``, strictly increasing in time, with finite
        values >= 0 (Prometheus's own encoding: ``[unix seconds, "value"]``).

        Raises:
            HistoryError: the call failed (:meth:`_get`), or the answer fails validation: one
                line naming the server, the query and what was wrong.
        """
        params = {"query": query, "start": _ts(start), "end": _ts(end), "step": _ts(step)}
        try:
            _, body = self._get("/api/v1/query_range", params)
        except HistoryError as e:
            raise with_suffix(e, f" (query {_one_line(query, 400)})") from None
        return _validated_matrix(body.data, query, start, end, step, self.where, self.max_series)

    def series_exist(self, selector: str, start: float | None = None, end: float | None = None) -> bool:
        """Whether any series matches ``selector`` between ``start`` and ``end`` (Unix seconds;
        ``None``: any time the server holds): the metric names of the matching series
        (``/api/v1/label/__name__/values``, a short answer however many series match).

        Raises:
            HistoryError: as :meth:`query_range`, or an answer that is not a list of names.
        """
        params = {"match[]": selector}
        if start is not None and end is not None:
            params |= {"start": _ts(start), "end": _ts(end)}
        try:
            _, body = self._get("/api/v1/label/__name__/values", params)
        except HistoryError as e:
            raise with_suffix(e, f" (series {_one_line(selector, 400)})") from None
        try:
            names = msgspec.json.decode(body.data, type=list[str])
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            raise HistoryError(
                f"{self.where}: series lookup: unexpected answer (not a list of names)"
            ) from None
        return len(names) > 0


def _http_error(error: type[HistoryError], where: str, answer: Answer) -> HistoryError:
    """The error of an HTTP error status whose body is no Prometheus answer."""
    e = error(f"{where}: HTTP {answer.status}: {_one_line(answer.text, 200)}")
    if isinstance(e, TransientHistoryError):
        e.retry_after = retry_after_seconds(answer.headers.get("retry-after"))
    return e


def _validated_matrix(
    data: msgspec.Raw, query: str, start: float, end: float, step: float, where: str, max_series: int
) -> list[RangeSeries]:
    """The series of a ``query_range`` answer's ``data``, checked (see
    :meth:`PrometheusClient.query_range`).

    Raises:
        HistoryError: one line naming ``where``, the query and the first thing wrong.
    """

    def bad(what: str) -> HistoryError:
        return HistoryError(f"{where}: bad answer to {_one_line(query, 400)}: {_one_line(what, 300)}")

    try:
        matrix = msgspec.json.decode(data, type=_Matrix)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        raise HistoryError(
            f"{where}: unexpected answer (expected a matrix) to {_one_line(query, 400)}"
        ) from None
    if matrix.resultType != "matrix":
        raise HistoryError(f"{where}: unexpected answer (expected a matrix, got {matrix.resultType!r}) to "
                           f"{_one_line(query, 400)}")  # fmt: skip
    try:
        result = msgspec.json.decode(matrix.result, type=list[_Series])
    except RecursionError:
        raise bad("nested too deeply") from None
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        raise bad(f"malformed series: {e}") from None
    if len(result) > max_series:
        raise bad(f"{len(result):,} series, over the bound of {max_series:,}")
    out: list[RangeSeries] = []
    seen: set[tuple[tuple[str, str], ...]] = set()
    tolerance = 1e-3  # Prometheus answers with millisecond timestamps
    for s in result:
        labels = s.metric
        key = tuple(sorted(labels.items()))
        name = _labels_text(labels)
        if key in seen:
            raise bad(f"two series {name}")
        seen.add(key)
        n = len(s.values)
        times = np.fromiter((p[0] for p in s.values), dtype=np.float64, count=n)
        try:
            values = np.asarray([p[1] for p in s.values], dtype=np.float64).reshape(n)
        except ValueError:
            text = next(p[1] for p in s.values if not _is_float(p[1]))
            raise bad(f"series {name}: value {text!r} is not a number") from None
        if n == 0:
            continue
        if not np.all(np.isfinite(times)):
            raise bad(f"series {name}: a timestamp is not a finite number")
        if np.any(np.diff(times) <= 0):
            i = int(np.flatnonzero(np.diff(times) <= 0)[0])
            raise bad(
                f"series {name}: timestamps not strictly increasing ({_ts(times[i])} then {_ts(times[i + 1])})"
            )
        k = np.rint((times - start) / step)
        off = np.abs(times - (start + k * step)) > tolerance
        if off.any():
            t = times[int(np.flatnonzero(off)[0])]
            raise bad(
                f"series {name}: timestamp {_ts(t)} is off the step grid ({_ts(start)} + k·{_ts(step)} s)"
            )
        outside = (times < start - tolerance) | (times > end + tolerance)
        if outside.any():
            t = times[int(np.flatnonzero(outside)[0])]
            raise bad(f"series {name}: timestamp {_ts(t)} is outside the window {_ts(start)}..{_ts(end)}")
        finite = np.isfinite(values)
        if not finite.all():
            i = int(np.flatnonzero(~finite)[0])
            raise bad(f"series {name}: value {s.values[i][1]!r} at {_ts(times[i])} is not a finite number")
        if np.any(values < 0):
            i = int(np.flatnonzero(values < 0)[0])
            raise bad(f"series {name}: negative value {s.values[i][1]!r} at {_ts(times[i])}")
        out.append(RangeSeries(labels, start + k * step, values))
    return out


def _labels_text(labels: Mapping[str, str]) -> str:
    return "{" + ",".join(f"{k}={v!r}" for k, v in sorted(labels.items())) + "}"


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _ts(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".")


class Windows:
    """The query windows of a range: consecutive ``(lo, hi)`` spans of the evaluation instants
    ``start + k·step <= end``, no instant twice. The first holds :data:`FIRST_WINDOW_STEPS`
    instants; each next one as many as keep an answer near ``points`` points for the most
    series seen so far (:meth:`saw`), at most ``max_points`` (Prometheus's and Cloud
    Monitoring's limit per series, 11,000) and a day. A small cluster is read a day per query,
    a large one in shorter spans, so that no answer grows with the cluster.
    """

    def __init__(
        self,
        start: float,
        end: float,
        step: float,
        max_points: int = _MAX_POINTS,
        points: int = POINTS_PER_ANSWER,
    ) -> None:
        self.start, self.end, self.step = start, end, step
        self.max_points = max_points
        self.points = points
        self.series = 0
        self.day = max(1, min(max_points, int(_CHUNK_SECONDS // step)))
        self.next_lo = start

    def saw(self, series: int) -> None:
        """Record that a window's answer held ``series`` series."""
        self.series = max(self.series, series)

    def size(self) -> int:
        """Instants in the next window."""
        if self.series == 0 and self.next_lo == self.start:
            return min(FIRST_WINDOW_STEPS, self.day)
        return max(1, min(self.day, self.points // max(self.series, 1)))

    def left(self) -> int:
        """Windows still to come at the current size (an estimate, for progress)."""
        steps = round((self.end - self.next_lo) / self.step) + 1
        return 0 if steps <= 0 else -(-steps // self.size())

    def __iter__(self) -> Iterator[tuple[float, float]]:
        """The windows, sized as they come."""
        while self.next_lo <= self.end + 1e-9:
            lo = self.next_lo
            hi = min(self.end, lo + (self.size() - 1) * self.step)
            self.next_lo = hi + self.step
            yield lo, hi


def fetch_pod_usage(
    client: PrometheusClient,
    start: float,
    end: float,
    step: float = 300.0,
    selector: str = "",
    metrics: UsageMetrics = CADVISOR,
) -> dict[tuple[str, str], dict[float, list[float]]]:
    """Per pod ``(namespace, pod)``, per instant: ``[cpu millicores, memory bytes]`` from the two
    queries of ``metrics`` (NaN where one of them has no point at that instant), read window by
    window (:class:`Windows`).

    Raises:
        HistoryError: a query failed (see :meth:`PrometheusClient.query_range`), or a bad step.
    """
    if not step > 0:
        raise HistoryError(f"history step must be positive, got {step!r}")
    queries = ((metrics.cpu_query(selector), 1000.0), (metrics.memory_query(selector), 1.0))
    out: dict[tuple[str, str], dict[float, list[float]]] = {}
    windows = Windows(start, end, step)
    for lo, hi in windows:
        for col, (query, scale) in enumerate(queries):
            answer = client.query_range(query, lo, hi, step)
            windows.saw(len(answer))
            for labels, times, values in answer:
                ns, pod = metrics.pod_of(labels)
                if not pod:
                    continue
                per = out.setdefault((ns, pod), {})
                for t, v in zip(times.tolist(), values.tolist(), strict=True):
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
    metrics: UsageMetrics = CADVISOR,
    pod_nodes: Mapping[tuple[str, str], str] | None = None,
) -> dict[str, float]:
    """The real GPU usage of the nodes of ``gpus`` (node name → allocatable GPUs) over
    ``[start, end]`` (Unix seconds): per node, Σ over its GPUs of each GPU's highest reading in
    the window / 100 / its allocatable GPUs (the number of GPUs reported when none is
    allocatable yet), a fraction 0-1. The highest reading, not the mean: a GPU busy a few
    minutes ago is not idle. A node without any series is absent (its GPU usage is unknown).

    With the cAdvisor source the readings are DCGM's ``DCGM_FI_DEV_GPU_UTIL`` (the node in a
    :data:`GPU_NODE_LABELS` label; GPUs told apart by ``UUID``, else ``gpu``); with GKE system
    metrics, the accelerator duty cycle of each pod's containers (:data:`GKE_GPU_QUERY`; the pod
    placed on its node by ``pod_nodes``, ``(namespace, pod)`` → node, from the snapshot; GPUs told
    apart by ``accelerator_id``).

    Raises:
        HistoryError: the query failed (see :meth:`PrometheusClient.query_range`).
    """
    gke = metrics is GKE_SYSTEM
    if gke:
        query = GKE_GPU_QUERY.format(extra=metrics.selector(selector))
    else:
        query = GPU_QUERY.format(selector=selector.strip().strip(","))
    peaks: dict[str, dict[str, float]] = {}
    windows = Windows(start, end, step)
    for lo, hi in windows:
        answer = client.query_range(query, lo, hi, step)
        windows.saw(len(answer))
        for labels, _times, values in answer:
            if gke:
                node = (pod_nodes or {}).get(metrics.pod_of(labels), "")
                gpu = labels.get("accelerator_id", "")
            else:
                node = next((labels[k] for k in GPU_NODE_LABELS if labels.get(k)), "")
                gpu = labels.get("UUID") or labels.get("gpu") or labels.get("device", "")
            if node not in gpus or len(values) == 0:
                continue
            per = peaks.setdefault(node, {})
            per[gpu] = max(per.get(gpu, 0.0), float(values.max()))
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
    auth: str = "auto",
    step: float = 300.0,
    selector: str = "",
    metrics: str = "auto",
    deadline: float = DEFAULT_DEADLINE_SECONDS,
    transport: httpx.BaseTransport | None = None,
) -> list[tuple[str, float, float, float]]:
    """Samples for :func:`~scaler.history.profiles.build_profiles` from Prometheus: one
    ``(workload key, unix seconds, cpu millicores, memory bytes)`` per pod and instant in
    ``[now - history_days, now)``, instants on multiples of ``step``, from the source
    ``metrics`` names (``cadvisor``, ``gke-system``, or ``auto``: :func:`~scaler.history.
    usage_metrics.choose`).

    Raises:
        HistoryError: bad arguments, or any failure of the server (one-line message).
    """
    from scaler.history.usage_metrics import choose

    if not history_days > 0:
        raise HistoryError(f"--history-days must be positive, got {history_days!r}")
    start = math.ceil((now - history_days * 86400.0) / step) * step
    end = math.floor(now / step) * step
    if end >= now:
        end -= step
    if end < start:
        return []
    resolve = pod_workload_resolver(snapshot)
    with PrometheusClient(
        url, auth_file=auth_file, auth=auth, deadline=deadline, transport=transport
    ) as client:
        source, _why = choose(client, metrics, selector, start, end, fallback=CADVISOR)
        usage = fetch_pod_usage(client, start, end, step, selector, source)
    out: list[tuple[str, float, float, float]] = []
    for (ns, pod), per in sorted(usage.items()):
        key = resolve(ns, pod)
        if key is None:
            continue
        for t, (cpu, mem) in sorted(per.items()):
            out.append((key, t, cpu, mem))
    return out
