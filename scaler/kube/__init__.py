"""Writes to the Kubernetes API (taints, evictions, events, status) and leader election."""
