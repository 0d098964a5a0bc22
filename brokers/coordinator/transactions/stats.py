"""Counters the transaction coordinator keeps for its metrics.

Owns: `TxnStats` — transactions completed (committed / aborted, timed-out aborts among them)
and the load times of `__transaction_state` partitions (count, total, max: Kafka's
partition-load-time-avg/max of `transaction-coordinator-metrics`). Plain integers bumped on the
event loop and read by the metrics thread; a read may be one update stale, never torn.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class TxnStats:
    committed: int = 0
    aborted: int = 0
    timed_out: int = 0
    loads: int = 0
    load_seconds_total: float = 0.0
    load_seconds_max: float = 0.0

    def completed(self, commit: bool) -> None:
        if commit:
            self.committed += 1
        else:
            self.aborted += 1

    def loaded(self, seconds: float) -> None:
        self.loads += 1
        self.load_seconds_total += seconds
        self.load_seconds_max = max(self.load_seconds_max, seconds)
