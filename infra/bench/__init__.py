"""Benchmarks of Pier with real Kafka clients, each an entry script run from the repository root.

`produce_consume.py` (throughput, latency, memory; docs/benchmarks.md) uses `throughput`, `latency`,
`report` and `profiling` from this package; nothing here is imported by the broker or the tests.
"""
