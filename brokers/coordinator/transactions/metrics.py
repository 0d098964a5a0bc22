"""Transaction coordinator metrics, computed at scrape time from the coordinator's state.

Owns: `TransactionMetricsCollector` — transactional ids served here per state, ongoing
transactions (Ongoing or Prepare*: begun, not yet complete), transactions committed / aborted
(and timed-out aborts among them) since start, transactions whose markers are being written,
and the `__transaction_state` partition load times in ms, named after Kafka's
`transaction-coordinator-metrics` `partition-load-time-max` / `-avg` as a JMX exporter shows
them. Nothing is counted on the request path beyond plain integers. Concurrency: `collect` runs
on the metrics HTTP thread while the event loop mutates the state; it copies what it reads and
retries a copy that raced a resize, so a scrape may be one operation stale but never fails.
"""

from __future__ import annotations

from collections import Counter

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from brokers.coordinator.metrics import RetryingCollector
from brokers.coordinator.transactions.coordinator import TransactionCoordinator
from brokers.coordinator.transactions.metadata import TxnState

_OPEN = (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
_LOAD = "kafka_server_transaction_coordinator_metrics_partition_load_time"


class TransactionMetricsCollector(RetryingCollector):
    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self._coordinator = coordinator

    def _families(self) -> list[Metric]:
        coordinator = self._coordinator
        states = Counter(meta.state for _, meta in coordinator.state.metadata())
        stats = coordinator.stats
        by_state = GaugeMetricFamily(
            "kafka_coordinator_transaction_transactional_ids",
            "Transactional ids this broker coordinates, by state.",
            labels=["state"],
        )
        for state in TxnState:
            by_state.add_metric([state.label], states.get(state, 0))
        ongoing = GaugeMetricFamily(
            "kafka_coordinator_transaction_ongoing",
            "Transactions begun and not yet complete (Ongoing, PrepareCommit, PrepareAbort).",
            value=sum(states.get(s, 0) for s in _OPEN),
        )
        pending = GaugeMetricFamily(
            "kafka_coordinator_transaction_pending_markers",
            "Transactions whose markers or completion record are being written.",
            value=coordinator.completion.pending,
        )
        committed = CounterMetricFamily(
            "kafka_coordinator_transaction_committed",
            "Transactions committed (CompleteCommit written) since the broker started.",
            value=stats.committed,
        )
        aborted = CounterMetricFamily(
            "kafka_coordinator_transaction_aborted",
            "Transactions aborted (CompleteAbort written) since the broker started.",
            value=stats.aborted,
        )
        timed_out = CounterMetricFamily(
            "kafka_coordinator_transaction_timed_out",
            "Transactions aborted by the coordinator for exceeding their timeout.",
            value=stats.timed_out,
        )
        average = stats.load_seconds_total / stats.loads if stats.loads else 0.0
        load_max = GaugeMetricFamily(
            f"{_LOAD}_max",
            "The longest __transaction_state partition load, in ms.",
            value=stats.load_seconds_max * 1000,
        )
        load_avg = GaugeMetricFamily(
            f"{_LOAD}_avg",
            "The average __transaction_state partition load, in ms.",
            value=average * 1000,
        )
        return [by_state, ongoing, pending, committed, aborted, timed_out, load_max, load_avg]
