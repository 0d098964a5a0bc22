"""A follower below the leader's local log start rebuilds from the remote tier (KIP-405).

Owns: `RemoteAuxState` (what the remote tier keeps beside a copied segment that a follower needs
to restart at the leader's local log start: the leader epochs up to it and the producer snapshot
taken there), `RemoteAuxSource` (who finds it: `brokers.tiered.remote_log_manager` on a broker
with tiered storage; this layer may not import the tiered one) and `rebuild`, which empties the
follower's log and restarts it at that offset with those epochs and producers — Kafka's
`TierStateMachine.buildRemoteLogAuxState` after the leader answered a replica fetch with
OFFSET_MOVED_TO_TIERED_STORAGE and ListOffsets -4 named its local log start. Without it the
follower would restart with an empty epoch cache and producer table, and after a leader change
an idempotent producer whose last batches were tiered would be refused (OUT_OF_ORDER_SEQUENCE).

`rebuild` runs on the event loop (a small snapshot file write); not thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from brokers.log.file_ops import OS_FILES, write_atomically
from brokers.log.log import Log


@dataclass(frozen=True, slots=True)
class RemoteAuxState:
    leader_epochs: tuple[tuple[int, int], ...]  # (epoch, start offset), ascending, all < start
    producer_snapshot: bytes  # the snapshot file's bytes at `start` (b"": no producers)


class RemoteAuxSource(Protocol):
    async def aux_state(self, log: Log, next_offset: int) -> RemoteAuxState | None:
        """The epochs and producer snapshot of the remote segment holding `next_offset - 1`;
        None when this broker's remote metadata does not know that segment (yet). Raises
        `brokers.tiered.store.RemoteStorageError` when the store fails."""
        ...


def rebuild(log: Log, start: int, aux: RemoteAuxState) -> None:
    """Empty `log` and restart it at `start` with the remote tier's epochs and producers."""
    log.truncate_fully_and_start_at(start)
    for epoch, offset in aux.leader_epochs:
        if offset < start:
            log.leader_epoch_cache.assign(epoch, offset)
    producers = log.producer_state
    if aux.producer_snapshot:
        write_atomically(OS_FILES, producers.snapshot_path(start), aux.producer_snapshot)
    producers.load(start, start)
