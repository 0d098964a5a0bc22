"""Forgetting transactional ids idle for `transactional.id.expiration.ms` (Kafka's
removeExpiredTransactionalIds).

Owns: `expire_ids` — every served id in Empty/CompleteCommit/CompleteAbort, with no pending
transition and last updated at least the expiration ago, goes to pending Dead; their tombstones
are written per partition in batches of at most ~512 KiB of keys; an id is removed from the
cache only if the write succeeded, the partition is still the same load, the id is still Dead
pending and its epoch unchanged; otherwise its pending state is cleared and it stays.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from brokers.coordinator.transactions.metadata import TransactionMetadata, TxnState, TxnTransit
from brokers.coordinator.transactions.state import TransactionLog, TxnPartition
from brokers.wire.errors import ErrorCode

log = logging.getLogger("pier.transactions")
TOMBSTONE_BATCH_BYTES = 512 * 1024
Expiring = tuple[TransactionMetadata, TxnTransit]


async def expire_ids(state: TransactionLog, now_ms: int, expiration_ms: int) -> int:
    """Returns how many ids were removed."""
    threshold = now_ms - expiration_ms
    by_partition: dict[int, tuple[TxnPartition, list[Expiring]]] = {}
    for entry, meta in state.metadata():
        if meta.pending or not meta.state.expiration_allowed or meta.update_ms > threshold:
            continue
        item = (meta, meta.prepare_dead())
        by_partition.setdefault(entry.index, (entry, []))[1].append(item)
    removed = 0
    for entry, items in by_partition.values():
        for chunk in _chunks(items):
            removed += await _write_expiry(state, entry, chunk)
    return removed


async def _write_expiry(state: TransactionLog, entry: TxnPartition, items: list[Expiring]) -> int:
    error = await state.write_tombstones(entry, [meta.transactional_id for meta, _ in items])
    removed = 0
    for meta, transit in items:
        tid = meta.transactional_id
        still = state.is_current(entry) and entry.transactions.get(tid) is meta
        dead = meta.pending_state is TxnState.DEAD and meta.producer_epoch == transit.producer_epoch
        if error == ErrorCode.none and still and dead:
            del entry.transactions[tid]
            removed += 1
        else:
            meta.pending_state = None
    if error != ErrorCode.none:
        log.warning("event=txn_expiry_failed partition=%d error=%s", entry.index, error.name)
    elif removed:
        log.info("event=txn_ids_expired partition=%d count=%d", entry.index, removed)
    return removed


def _chunks(items: list[Expiring]) -> Iterable[list[Expiring]]:
    chunk: list[Expiring] = []
    size = 0
    for item in items:
        key_size = len(item[0].transactional_id.encode("utf-8")) + 32  # + record overhead
        if chunk and size + key_size > TOMBSTONE_BATCH_BYTES:
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += key_size
    if chunk:
        yield chunk
