"""Producer id blocks claimed in `/latest_producer_id_block` (Kafka's `ZkProducerIdManager`).

Owns: a `BlockStore` (see `brokers.coordinator.producer_ids`) shared by every broker of the
cluster. A claim reads the latest block, writes the next one conditional on the znode version,
and retries when another broker won the race, so two brokers never hand out the same id; blocks
are contiguous and both ends inclusive in the znode (`block_end` = start + size - 1), as Kafka
writes them. `claim_next_block` is synchronous (the `BlockStore` protocol): it blocks its caller
for a few ZooKeeper round trips once per block; `claim_block` is the event-loop version.
One instance per broker; not thread-safe.
"""

from __future__ import annotations

from brokers.controller import zk_paths
from brokers.controller.errors import (
    ControllerError,
    ZNodeExistsError,
    ZNodeFormatError,
    ZNodeMissingError,
    ZNodeVersionError,
)
from brokers.controller.zk_client import Versioned, ZkClient
from brokers.controller.zk_paths import ProducerIdBlock

MAX_ATTEMPTS = 50
NO_BLOCK = -1


def next_block(current: Versioned | None, broker_id: int, size: int) -> ProducerIdBlock:
    """The block after the one in `current` (an empty znode means none was claimed yet)."""
    if size <= 0:
        raise ControllerError("block size must be positive")
    start = 0
    if current is not None and current.data:
        start = zk_paths.decode_producer_id_block(current.data).last + 1
    if start + size - 1 > 2**63 - 1:
        raise ZNodeFormatError("producer ids exhausted")
    return ProducerIdBlock(broker_id, start, start + size - 1)


class ZkBlockStore:
    def __init__(self, zk: ZkClient, broker_id: int) -> None:
        self._zk = zk
        self._broker_id = broker_id

    def claim_next_block(self, size: int) -> int:
        """Durably reserve [start, start + size) for this broker and return start."""
        for _ in range(MAX_ATTEMPTS):
            try:
                current = self._zk.get_blocking(zk_paths.LATEST_PRODUCER_ID_BLOCK)
            except ZNodeMissingError:
                current = None
            block = next_block(current, self._broker_id, size)
            data = zk_paths.encode_producer_id_block(block)
            try:
                if current is None:
                    self._zk.create_blocking(zk_paths.LATEST_PRODUCER_ID_BLOCK, data)
                else:
                    self._zk.set_blocking(zk_paths.LATEST_PRODUCER_ID_BLOCK, data, current.version)
            except (ZNodeVersionError, ZNodeExistsError):
                continue  # another broker claimed first: read again
            return block.first
        raise ZNodeVersionError(f"could not claim a producer id block in {MAX_ATTEMPTS} attempts")

    async def claim_block(self, size: int) -> int:
        """As `claim_next_block`, without blocking the event loop."""
        for _ in range(MAX_ATTEMPTS):
            try:
                current: Versioned | None = await self._zk.get(zk_paths.LATEST_PRODUCER_ID_BLOCK)
            except ZNodeMissingError:
                current = None
            block = next_block(current, self._broker_id, size)
            data = zk_paths.encode_producer_id_block(block)
            try:
                if current is None:
                    await self._zk.create(zk_paths.LATEST_PRODUCER_ID_BLOCK, data)
                else:
                    await self._zk.set(zk_paths.LATEST_PRODUCER_ID_BLOCK, data, current.version)
            except (ZNodeVersionError, ZNodeExistsError):
                continue
            return block.first
        raise ZNodeVersionError(f"could not claim a producer id block in {MAX_ATTEMPTS} attempts")
