"""scaler: a usage-based scale-down sidecar for Kubernetes on GKE.

Distributed on PyPI as ``gke-scaler``; the command and this package are ``scaler``.
"""

__version__ = "0.1.0"
"""The release version (PEP 440): the single source of ``scaler --version`` and of the wheel's
metadata (pyproject ``[tool.setuptools.dynamic]``). Bump it with a CHANGELOG.md entry."""
