"""Dry-run report: versioned JSON models and the terminal table."""
