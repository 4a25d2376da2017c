"""Usage history and resource portraits (seed 001).

* :mod:`scaler.history.profiles`: per-workload 24-hour profiles (:class:`WorkloadProfile`) built
  from per-pod usage samples (:func:`build_profiles`), and :func:`workload_key`.
* :mod:`scaler.history.prometheus`: the samples from Prometheus range queries (also Google
  Managed Prometheus), raising :class:`~scaler.history.prometheus.HistoryError`.
* :mod:`scaler.history.source`: :func:`~scaler.history.source.load_profiles`, what the CLI and
  controller call with the configuration (``--history``).

The portrait plugins that read the profiles live in ``plugins/portrait.py``.
"""
