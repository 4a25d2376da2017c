"""``scaler tune``: search scale-down flags over replays of the user's own history.

Modules: :mod:`~scaler.tune.space` (the search space file), :mod:`~scaler.tune.search` (the
Optuna study, evaluated in generations of Ray tasks), :mod:`~scaler.tune.frontier` (the Pareto
front, ``frontier.json``, the table and ``recommended.yaml``), :mod:`~scaler.tune.html` (the
plot) and :mod:`~scaler.tune.cli` (the command).
"""
