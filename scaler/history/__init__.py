"""Usage history and resource portraits (seed 001).

* :mod:`scaler.history.profiles`: per-workload 24-hour profiles (:class:`WorkloadProfile`) built
  from per-pod usage samples (:func:`build_profiles`), and :func:`workload_key`.
* :mod:`scaler.history.prometheus`: the samples from Prometheus range queries (also Google
  Managed Prometheus), raising :class:`~scaler.history.prometheus.HistoryError`.
* :mod:`scaler.history.source`: :func:`~scaler.history.source.load_profiles`, what the CLI and
  controller call with the configuration (``--history``).
* :mod:`scaler.history.export`: pod usage from Prometheus into the replay's long format
  (Parquet), for ``scaler history export`` and ``scaler replay --prometheus-url``;
  :mod:`scaler.history.cli` is the command.

The portrait plugins that read the profiles live in ``plugins/portrait.py``.
"""
