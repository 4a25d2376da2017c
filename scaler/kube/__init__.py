"""Writes to the Kubernetes API (taints, evictions, events, status), leader election, and the
check that scaler may make every call it will make (:mod:`scaler.kube.permissions`)."""
