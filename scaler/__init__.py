"""scaler: a usage-based scale-down sidecar for Kubernetes on GKE."""

__version__ = "0.1.0"
