"""Reading a `__transaction_state` partition back into transactional ids (loadTransactionMetadata).

Owns: `load_partition` — replays every batch from the log start: the last record per id wins and
a tombstone deletes it, the view compaction converges to. Keys of unknown versions are skipped
with a warning, as Kafka does; a record or batch that does not parse is logged and skipped
rather than failing the whole partition. Yields to the event loop between batches. What to do
with transactions found in PrepareCommit/PrepareAbort (finish them) is the coordinator's, once
the partition is installed. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from brokers.coordinator.transactions.errors import TxnRecordError
from brokers.coordinator.transactions.metadata import IllegalTransitionError, TransactionMetadata
from brokers.coordinator.transactions.records import decode_key, decode_value
from brokers.coordinator.transactions.state_topic import StateTopic
from brokers.records.builder import read_batch
from brokers.records.errors import RecordError
from brokers.records.record import Record

log = logging.getLogger("pier.transactions")
_YIELD_EVERY = 64  # batches


@dataclass(slots=True)
class Loaded:
    transactions: dict[str, TransactionMetadata] = field(default_factory=dict)
    records: int = 0
    skipped: int = 0

    def apply(self, record: Record) -> None:
        if record.key is None:
            raise TxnRecordError("record without a key")
        transactional_id = decode_key(record.key)
        if transactional_id is None:
            log.warning("event=txn_state_unknown_key_version")
            return
        value = decode_value(record.value)
        if value is None:
            self.transactions.pop(transactional_id, None)
            return
        try:
            self.transactions[transactional_id] = TransactionMetadata.from_log(
                transactional_id, value
            )
        except IllegalTransitionError as exc:
            raise TxnRecordError(str(exc)) from None


async def load_partition(topic: StateTopic, partition: int) -> Loaded:
    loaded = Loaded()
    for count, batch in enumerate(topic.read_batches(partition, 0), start=1):
        _apply_batch(loaded, partition, batch)
        if count % _YIELD_EVERY == 0:
            await asyncio.sleep(0)
    log.log(
        logging.INFO if loaded.records or loaded.skipped else logging.DEBUG,
        "event=txn_state_partition_read partition=%d transactional_ids=%d records=%d skipped=%d",
        partition, len(loaded.transactions), loaded.records, loaded.skipped,
    )  # fmt: skip
    return loaded


def _apply_batch(loaded: Loaded, partition: int, batch: bytes) -> None:
    try:
        header, records = read_batch(batch)
    except RecordError as exc:
        log.error("event=txn_state_batch_unreadable partition=%d error=%r", partition, exc)
        loaded.skipped += 1
        return
    if header.is_control:
        return
    for record in records:
        try:
            loaded.apply(record)
            loaded.records += 1
        except TxnRecordError as exc:
            log.error("event=txn_state_record_unreadable partition=%d error=%r", partition, exc)
            loaded.skipped += 1
