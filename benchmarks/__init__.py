"""Benchmarks of scaler's full evaluation on large generated GKE clusters (issue 5).

``python -m benchmarks`` (or ``make bench``) writes ``docs/benchmarks.md`` and
``docs/benchmarks.png``; :mod:`benchmarks.generate` builds the clusters, :mod:`benchmarks.trace`
caches the Bitbrains samples they draw from.
"""
