"""``scaler replay``: what-if replay of real usage history over a simulated cluster.

Modules: :mod:`~scaler.replay.traces` (Bitbrains and long-format traces),
:mod:`~scaler.replay.inputs` (which pod follows which series, the step grid),
:mod:`~scaler.replay.bundled` (the pod → VM maps of the Bitbrains-built snapshots),
:mod:`~scaler.replay.policies` (built-in and user policies), :mod:`~scaler.replay.world` (the
simulated cluster, in layers: :mod:`~scaler.replay.world_store` its objects and the Kubernetes
writes, :mod:`~scaler.replay.world_usage` its usage, :mod:`~scaler.replay.world_scheduler` its
scheduler, :mod:`~scaler.replay.world_scaleup` its cloud's scale-up; the controller's Kubernetes
and cloud stand-ins in :mod:`~scaler.replay.sim_cluster`),
:mod:`~scaler.replay.simulate` (the live controller driven over the replay),
:mod:`~scaler.replay.report` and :mod:`~scaler.replay.html` (outputs),
:mod:`~scaler.replay.load` (what a replay reads, from a typed spec),
:mod:`~scaler.replay.command` (the flags and terminal rules ``scaler replay`` and ``scaler tune``
share) and :mod:`~scaler.replay.cli` (the command). Machine-type prices live below the replay and the controller, in
:mod:`scaler.prices`.
"""
