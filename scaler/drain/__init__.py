"""Drainability rules (cluster-autoscaler\x27s twelve) and PDB accounting."""
