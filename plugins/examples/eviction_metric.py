"""Example eviction metric ``ephemeral_storage_usage``: evict by local disk use.

This module is a template for third-party eviction metrics. An eviction metric plugin is

* a zero-argument callable (a function, like :func:`ephemeral_storage_metric`, or a class) that
  returns an :class:`~scaler.plugin_api.EvictionMetric` — or an ``EvictionMetric`` instance
  itself;
* registered under the ``scaler.eviction_metrics`` entry-point group, as this one is in scaler's
  ``pyproject.toml``::

      [project.entry-points."scaler.eviction_metrics"]
      ExampleEphemeralStorage = "plugins.examples.eviction_metric:ephemeral_storage_metric"

* loaded with :func:`scaler.eviction.metrics.load_metric_plugins`, after which a waterline can be
  set on its name and the executor sorts, evicts and credits releases for it like the built-in
  CPU and memory metrics.

The metric itself only describes: the quantity a pod uses (:attr:`EvictionMetric.usage_of`, read
here from :attr:`PodUsage.extra <scaler.plugin_api.PodUsage.extra>`), the key of the node's
usage in ``node_usage``, how pods are ordered, and whether eviction releases a known amount. The
caller supplies the numbers: for this metric, the kubelet Summary API
(``/api/v1/nodes/NODE/proxy/stats/summary``: ``pods[].ephemeral-storage.usedBytes`` and
``node.fs.usedBytes``), which metrics.k8s.io does not serve::

    usages = pod_usages(pods, pod_metrics, extra={("ns", "p"): {EPHEMERAL_STORAGE_USAGE: 3e9}})
    node_usage = {**node_usage_from_metrics(nm), EPHEMERAL_STORAGE_USAGE: 70e9}
    execute(usages, node_usage, Waterlines({EPHEMERAL_STORAGE_USAGE: 60e9}), registry, evictor)
"""

from __future__ import annotations

from scaler.plugin_api import EvictionMetric, PodUsage, class_and_priority, ordered_by, running_time, usage

__all__ = ["EPHEMERAL_STORAGE_USAGE", "ephemeral_storage_metric"]

EPHEMERAL_STORAGE_USAGE = "ephemeral_storage_usage"
"""The metric's name, its key in ``PodUsage.extra`` and in ``node_usage``; unit bytes."""


def _used_bytes(pod: PodUsage) -> float | None:
    """Ephemeral storage the pod uses (bytes), ``None`` when not measured."""
    return pod.extra.get(EPHEMERAL_STORAGE_USAGE)


def _local_volumes_first(a: PodUsage, b: PodUsage) -> int:
    """Pods with an ``emptyDir`` volume first: evicting them frees their volume too."""
    va = any(v.kind == "emptyDir" for v in a.pod.volumes)
    vb = any(v.kind == "emptyDir" for v in b.pod.volumes)
    return vb - va


def ephemeral_storage_metric() -> EvictionMetric:
    """The ``ephemeral_storage_usage`` metric (bytes).

    * ``action_priority`` 7: disk is incompressible and the kubelet itself evicts on
      ``nodefs.available``, so it outranks CPU and memory (5) when every pod has to go and one
      metric must pick the order.
    * Evictable and quantified: evicting a pod frees its writable layer, logs and emptyDirs, i.e.
      its ``usedBytes``.
    * Order: lower priority / QoS first, then the largest disk user, then pods with an emptyDir,
      then newest — :func:`~scaler.plugin_api.ordered_by` composes crane-style comparators
      with a custom one.
    """
    return EvictionMetric(
        name=EPHEMERAL_STORAGE_USAGE,
        action_priority=7,
        usage_of=_used_bytes,
        sort=ordered_by(class_and_priority, usage(_used_bytes), _local_volumes_first, running_time).compare,
        unit="bytes",
    )
