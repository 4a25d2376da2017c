"""Imperative shell of a scale-down: taint, re-check, drain, verify, delete, roll back."""
