"""Review s36 (H4): since only the active segment holds descriptors (brokers/log/file_records.py),
reading an old `__consumer_offsets` segment back opens it, and a full descriptor table refuses that
read with StorageError (tests/unit/log/test_inactive_segment_descriptors.py: the log stays online,
the next read succeeds once a descriptor is free). A coordinator load that meets it must not leave
the partition NOT_COORDINATOR until the next leadership change: before, every loaded segment held
its descriptor and a load never opened one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from brokers.common.clock import ManualClock
from brokers.coordinator.group_coordinator import GroupCoordinator
from brokers.coordinator.group_records import (
    OffsetAndMetadata,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from brokers.log.errors import StorageError
from brokers.records.builder import build_batch
from tests.polling import wait_until_async
from tests.unit.coordinator.harness import MemoryOffsetsTopic, config

pytestmark = pytest.mark.unit


class TableFullOnce(MemoryOffsetsTopic):
    """The first read back meets a full descriptor table, as `Log.read` of a cold segment does."""

    def __init__(self) -> None:
        super().__init__(partitions=1)
        self.refused = 0

    def read_batches(self, partition: int, from_offset: int) -> Iterator[bytes]:
        if not self.refused:
            self.refused += 1
            raise StorageError("00000000000000000000.log: no descriptor to read it with")
        return super().read_batches(partition, from_offset)


def test_a_load_refused_for_want_of_a_descriptor_is_retried() -> None:
    async def scenario() -> None:
        topic = TableFullOnce()
        value = encode_offset_commit_value(OffsetAndMetadata(7, -1, "", 0))
        topic.logs[0] = [build_batch([(encode_offset_commit_key("g", "t", 0), value)])]
        coordinator = GroupCoordinator(config(), topic, ManualClock())
        coordinator.on_election(0, 1)
        await asyncio.wait_for(coordinator.ownership.wait_loaded(), 5)
        assert topic.refused == 1

        async def serving() -> bool:
            return coordinator.check("g") is None

        await wait_until_async(serving, what="partition 0 loaded after the refusal", timeout=3)

    asyncio.run(scenario())
