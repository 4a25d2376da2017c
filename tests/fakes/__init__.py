"""Test doubles that talk real protocols on loopback (no monkeypatching of client code)."""
