"""Removal simulation: working state, filter plugins, and the node-removal simulator."""
