"""Example plugins for third parties: copy one, rename it, and register it under the
``scaler.plugins`` entry-point group of your own distribution, e.g. in ``pyproject.toml``::

    [project.entry-points."scaler.plugins"]
    MyScore = "my_package.my_module:MyScore"

then enable it with ``score-plugins: [MyScore]`` (or ``filter-plugins`` for a filter) in the
configuration. See :mod:`scaler.simulator.registry` for how plugins are found and checked.
"""
