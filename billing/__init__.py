"""Billing: `__usage` records → hourly rollups → monthly invoices, exactly once.

Packages: `source/` (the `pier-usage` Spark data source), `rollup/` (the rollup job and its ledger:
rollups and offsets in one fenced transaction), `invoice/` (plans applied to rollups, drafts and
final invoices). Imports only `brokers.client`, `brokers.records` and `tenancy` of ours.
"""
