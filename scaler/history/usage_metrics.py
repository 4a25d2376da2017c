"""The two history sources a PromQL endpoint may hold, their metric names and labels, and how
``auto`` chooses between them (``--prometheus-metrics``).

* **cadvisor** — the kubelet's cAdvisor series, scraped by the operator's Prometheus (or by
  Google Managed Prometheus's managed collection). Per container: the CPU counter
  ``container_cpu_usage_seconds_total`` and the working set
  ``container_memory_working_set_bytes``; labels ``namespace``, ``pod``, ``container``
  (``container=""`` is the pod's own cgroup, ``pod=""`` the node's: both left out) and, where
  the collector adds it, ``cluster``. GPUs: NVIDIA DCGM's ``DCGM_FI_DEV_GPU_UTIL``.
* **gke-system** — the system metrics every GKE cluster writes to Cloud Monitoring, with no
  install, read through Cloud Monitoring's PromQL endpoint (the one Google Managed Prometheus
  uses). Names are the metric types with the first ``/`` as ``:`` and the other special
  characters as ``_`` (cloud.google.com/monitoring/promql/promql-mapping):
  ``kubernetes_io:container_cpu_core_usage_time`` (cumulative CPU seconds per container),
  ``kubernetes_io:container_memory_used_bytes`` (a gauge split by ``memory_type``: ``evictable``
  page cache the kernel may reclaim, and ``non-evictable``, what the kubelet calls the working
  set: usage minus inactive file pages; only ``non-evictable`` is read, so memory means the same
  on both sources) and ``kubernetes_io:container_accelerator_duty_cycle`` (percent of time each
  accelerator was busy, per container; labels ``accelerator_id``, ``make``, ``model``). Labels
  of the ``k8s_container`` resource: ``project_id``, ``location``, ``cluster_name``,
  ``namespace_name``, ``pod_name``, ``container_name``; ``monitored_resource="k8s_container"``
  names the resource type. Sampled every :data:`GKE_SAMPLING_SECONDS`; a sample becomes visible
  up to :data:`GKE_LATENESS_SECONDS` after it is taken.

Both give CPU in cores (``rate`` of a CPU-seconds counter over 5 minutes, summed over the pod's
containers; a container restart resets its counter, which ``rate`` handles) and memory in bytes
(summed over the pod's containers), per ``(namespace, pod)``.

``--prometheus-selector`` takes either label set: a plain list of matchers (``name op "value"``,
comma-separated) is translated to the source's names (``cluster`` ↔ ``cluster_name``,
``namespace`` ↔ ``namespace_name``, ``pod`` ↔ ``pod_name``, ``container`` ↔ ``container_name``),
so ``cluster="prod"`` and ``cluster_name="prod"`` select the same cluster on either source.

``auto`` (:func:`choose`) asks the endpoint which source has CPU series for the selector in the
window (``/api/v1/label/__name__/values`` with ``match[]``, ``start`` and ``end``: a short answer
however many series match), takes cAdvisor when both have (finer scrapes, the operator's own
choice), and says which it took and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Protocol

from scaler.history.errors import HistoryError

__all__ = [
    "CADVISOR",
    "GKE_LATENESS_SECONDS",
    "GKE_SAMPLING_SECONDS",
    "GKE_SYSTEM",
    "SOURCES",
    "MetricsChoice",
    "SeriesLookup",
    "UsageMetrics",
    "choose",
    "translate_selector",
]

MetricsChoice = Literal["cadvisor", "gke-system", "auto"]
"""``--prometheus-metrics``: a source, or ``auto``."""

GKE_SAMPLING_SECONDS = 60.0
"""GKE system metrics are sampled every 60 s."""
GKE_LATENESS_SECONDS = 240.0
"""After sampling, a GKE system metric point is not visible for up to 240 s (Cloud Monitoring's
metric list): the newest minutes of a window are not there yet."""

_LABEL_PAIRS = (("cluster", "cluster_name"), ("namespace", "namespace_name"), ("pod", "pod_name"),
                ("container", "container_name"))  # fmt: skip
_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*")\s*(?:,|$)')


@dataclass(frozen=True, slots=True)
class UsageMetrics:
    """One source's metric names and labels, and the PromQL scaler sends to it.

    Attributes:
        name: ``cadvisor`` or ``gke-system``.
        title: how messages name it.
        namespace_label, pod_label, cluster_label: the labels of a pod's namespace and name,
            and of its cluster.
        cpu_metric, memory_metric: the CPU-seconds counter and the memory gauge.
        cpu_matchers, memory_matchers: the matchers always in their selectors.
        sampling_seconds: the source's sampling interval (0: the scraper decides).
        lateness_seconds: how long after it is taken a point may still be missing.
        hint: what to check when no series match.
    """

    name: str
    title: str
    namespace_label: str
    pod_label: str
    cluster_label: str
    cpu_metric: str
    memory_metric: str
    cpu_matchers: str
    memory_matchers: str
    sampling_seconds: float
    lateness_seconds: float
    hint: str

    def selector(self, user: str) -> str:
        """``user``'s matchers (``--prometheus-selector``) in this source's label names, with a
        leading ``,`` to follow the fixed matchers (``""`` for none)."""
        s = translate_selector(user, self.name)
        return f",{s}" if s else ""

    def cpu_selector(self, user: str = "") -> str:
        """The CPU counter's series selector with ``user``'s matchers."""
        return f"{self.cpu_metric}{{{self.cpu_matchers}{self.selector(user)}}}"

    def memory_selector(self, user: str = "") -> str:
        """The memory gauge's series selector with ``user``'s matchers."""
        return f"{self.memory_metric}{{{self.memory_matchers}{self.selector(user)}}}"

    def cpu_query(self, user: str = "") -> str:
        """Per-pod CPU, cores: the counter's 5-minute rate summed by namespace and pod."""
        return f"sum by ({self.namespace_label}, {self.pod_label}) (rate({self.cpu_selector(user)}[5m]))"

    def memory_query(self, user: str = "") -> str:
        """Per-pod memory, bytes: the gauge summed by namespace and pod."""
        return f"sum by ({self.namespace_label}, {self.pod_label}) ({self.memory_selector(user)})"

    def pod_of(self, labels: dict[str, str]) -> tuple[str, str]:
        """``(namespace, pod)`` of an answer's series labels (``""`` where absent)."""
        return labels.get(self.namespace_label, ""), labels.get(self.pod_label, "")


CADVISOR = UsageMetrics(
    name="cadvisor",
    title="cAdvisor",
    namespace_label="namespace",
    pod_label="pod",
    cluster_label="cluster",
    cpu_metric="container_cpu_usage_seconds_total",
    memory_metric="container_memory_working_set_bytes",
    cpu_matchers='container!="",pod!=""',
    memory_matchers='container!="",pod!=""',
    sampling_seconds=0.0,
    lateness_seconds=0.0,
    hint="check --prometheus-selector and that the kubelet's cAdvisor metrics are scraped",
)
"""The kubelet's cAdvisor series (see the module doc)."""

GKE_SYSTEM = UsageMetrics(
    name="gke-system",
    title="GKE system metrics",
    namespace_label="namespace_name",
    pod_label="pod_name",
    cluster_label="cluster_name",
    cpu_metric="kubernetes_io:container_cpu_core_usage_time",
    memory_metric="kubernetes_io:container_memory_used_bytes",
    cpu_matchers='monitored_resource="k8s_container"',
    memory_matchers='monitored_resource="k8s_container",memory_type="non-evictable"',
    sampling_seconds=GKE_SAMPLING_SECONDS,
    lateness_seconds=GKE_LATENESS_SECONDS,
    hint="check --prometheus-selector, the project in the URL, and that the cluster sends system metrics "
    "to Cloud Monitoring (gcloud container clusters describe: monitoringConfig SYSTEM_COMPONENTS)",
)
"""GKE's system metrics in Cloud Monitoring, through its PromQL endpoint (see the module doc)."""

SOURCES = {m.name: m for m in (CADVISOR, GKE_SYSTEM)}
"""The sources by ``--prometheus-metrics`` name."""


def translate_selector(selector: str, source: str) -> str:
    """``selector`` (comma-separated ``name op "value"`` matchers) with the labels of
    :data:`_LABEL_PAIRS` renamed to ``source``'s (``cadvisor`` or ``gke-system``); returned as
    given (trimmed) when it is not such a plain list."""
    s = selector.strip().strip(",").strip()
    if not s:
        return ""
    matchers: list[tuple[str, str, str]] = []
    pos = 0
    while pos < len(s):
        m = _MATCHER.match(s, pos)
        if m is None or m.end() == pos:
            return s
        matchers.append((m[1], m[2], m[3]))
        pos = m.end()
    rename = {a: b for a, b in _LABEL_PAIRS} if source == "gke-system" else {b: a for a, b in _LABEL_PAIRS}
    return ",".join(f"{rename.get(name, name)}{op}{value}" for name, op, value in matchers)


class SeriesLookup(Protocol):
    """What :func:`choose` asks of a client (:class:`scaler.history.prometheus.PrometheusClient`)."""

    where: str

    def series_exist(self, selector: str, start: float | None = None, end: float | None = None) -> bool:
        """Whether any series matches ``selector`` (between ``start`` and ``end``)."""
        ...


def choose(
    client: SeriesLookup,
    choice: str,
    selector: str,
    start: float,
    end: float,
    fallback: UsageMetrics | None = None,
) -> tuple[UsageMetrics, str]:
    """The source to read and a line saying why: ``choice`` itself unless it is ``auto``; with
    ``auto``, the one whose CPU counter has series matching ``selector`` between ``start`` and
    ``end`` (Unix seconds), cAdvisor when both have.

    Raises:
        HistoryError: an unknown choice, a failed lookup, or (``auto``) neither source has series
            at any time, naming both selectors. When neither has series in the window but one has
            some outside it, that one is taken (reading it then says so, naming the window).
            With ``fallback``, neither having series returns it instead (the controller's
            history: no series is no history, as before a cluster has any).
    """
    if choice in SOURCES:
        return SOURCES[choice], f"{choice} (--prometheus-metrics)"
    if choice != "auto":
        raise HistoryError(f"--prometheus-metrics must be cadvisor, gke-system or auto, got {choice!r}")
    found = {
        m.name: client.series_exist(m.cpu_selector(selector), start, end) for m in (CADVISOR, GKE_SYSTEM)
    }
    have = [m for m in (CADVISOR, GKE_SYSTEM) if found[m.name]]
    if not have:  # none in the window: the one with series at any time (its error names the window)
        have = [m for m in (CADVISOR, GKE_SYSTEM) if client.series_exist(m.cpu_selector(selector))]
        if not have and fallback is not None:  # nothing to read either way: the caller's default
            return fallback, f"{fallback.name} (neither source has series)"
        if not have:
            raise HistoryError(
                f"{client.where}: empty result: neither cAdvisor ({CADVISOR.cpu_selector(selector)}) nor GKE "
                f"system metrics ({GKE_SYSTEM.cpu_selector(selector)}) have series: check --prometheus-url and "
                "--prometheus-selector"
            )
        chosen = have[0]
        return chosen, f"{chosen.name} ({chosen.cpu_metric} has series, none in the window)"
    chosen = have[0]
    other = GKE_SYSTEM if chosen is CADVISOR else CADVISOR
    also = f"{other.cpu_metric} has series too" if found[other.name] else f"{other.cpu_metric} has none"
    return chosen, f"{chosen.name} ({chosen.cpu_metric} has series; {also})"
