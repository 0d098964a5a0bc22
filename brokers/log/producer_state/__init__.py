"""Idempotent-producer state of a partition (KIP-98): entries, append checks, snapshots, manager."""
