"""Hourly usage rollups: `job` (the Spark run), `frames` (its DataFrame steps), `ledger` (the one
fenced database transaction), `sums` (the values they exchange)."""
