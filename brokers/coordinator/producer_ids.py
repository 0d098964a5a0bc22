"""Producer id allocation for idempotent producers (InitProducerId).

Owns: handing out unique producer ids in blocks. A block's end is made durable before any id in
it is used (Kafka's `/latest_producer_id_block` idea), so a crash can skip ids but never reuse
one. Standalone, the block pointer lives in `<data dir>/pier-producer-id-block`; the cluster issue
supplies a ZooKeeper-backed `BlockStore`. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

BLOCK_SIZE = 1000


class BlockStore(Protocol):
    def claim_next_block(self, size: int) -> int:
        """Durably reserve [start, start + size) and return start."""
        ...


class FileBlockStore:
    def __init__(self, path: Path) -> None:
        self._path = path

    def claim_next_block(self, size: int) -> int:
        start = int(self._path.read_text()) if self._path.exists() else 0
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as handle:
            handle.write(str(start + size))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self._path)
        return start


class ProducerIdManager:
    def __init__(self, store: BlockStore, block_size: int = BLOCK_SIZE) -> None:
        self._store = store
        self._block_size = block_size
        self._next = 0
        self._end = 0

    def next_producer_id(self) -> int:
        if self._next >= self._end:
            self._next = self._store.claim_next_block(self._block_size)
            self._end = self._next + self._block_size
        producer_id = self._next
        self._next += 1
        return producer_id
