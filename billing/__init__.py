"""Billing: `__usage` records → hourly rollups → monthly invoices, exactly once.

Packages: `source/` (`__usage` through Spark's Kafka source, checked in the JVM), `rollup/` (the
rollup job, its counted ids in Parquet, and its ledger: rollups and offsets in one fenced
transaction), `invoice/` (plans applied to rollups, drafts and final invoices); `jars` finds the
Kafka source's jars. Imports only `brokers.client`, `brokers.records` and `tenancy` of ours.
"""
