"""scaler beside the real cluster-autoscaler (issue 17): the same cluster, loaded into a real
kube-apiserver, read by both at the same moment.

:mod:`benchmarks.peer.objects` reshapes a snapshot's objects for a real API server (kwok-shaped
nodes, owner references re-pointed), :mod:`benchmarks.peer.loader` creates them many at once,
:mod:`benchmarks.peer.harness` runs both autoscalers on the loaded cluster and
:mod:`benchmarks.peer.run` (``python -m benchmarks.peer``) compares their decisions and loop
times and writes ``docs/peer.json`` and the side-by-side section of ``docs/benchmarks.md``.
"""
