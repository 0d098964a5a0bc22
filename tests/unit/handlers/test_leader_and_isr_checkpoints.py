"""LeaderAndIsr writes the leader-epoch checkpoints of its partitions as one batch before it
answers; a partition whose checkpoint could not be written is answered KAFKA_STORAGE_ERROR."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from brokers.handlers import leader_and_isr
from brokers.log.checkpoints import LEADER_EPOCH_FORMAT, CheckpointFile
from brokers.log.leader_epoch_cache import CHECKPOINT_NAME, LeaderEpochCache
from brokers.replication.replica_manager import PartitionStateUpdate
from brokers.server.dispatcher import Dispatcher
from brokers.server.routes import RouteTable
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.test_control_handlers import Node, Results, lai
from tests.unit.log.faulty_files import FaultyFiles

pytestmark = pytest.mark.unit


class EpochReplicas:
    """Each partition of the request becomes leader: its epoch cache gets the epoch at offset 0,
    as `Partition.become_leader` assigns it."""

    def __init__(self, root: Path, files: FaultyFiles) -> None:
        self.root = root
        self.files = files
        self.caches: dict[int, LeaderEpochCache] = {}

    def apply_leader_and_isr(
        self,
        controller_epoch: int,
        updates: list[PartitionStateUpdate],
        leaders: dict[int, tuple[str, int]],
    ) -> Results:
        for update in updates:
            directory = self.root / f"{update.topic}-{update.partition}"
            directory.mkdir(exist_ok=True)
            cache = LeaderEpochCache(directory / CHECKPOINT_NAME, self.files)
            cache.assign(update.leader_epoch, 0)
            assert not cache.checkpoint_path.exists(), "written before the request's batch"
            self.caches[update.partition] = cache
        return {(u.topic, u.partition): None for u in updates}

    def stop_replicas(self, partitions: list[tuple[str, int]], *, delete: bool) -> Results:
        return dict.fromkeys(partitions)


class EpochNode(Node):
    """The control routes around `EpochReplicas` instead of the recording fake."""

    def __init__(self, replicas: EpochReplicas) -> None:
        super().__init__()
        table = RouteTable()
        table.add(leader_and_isr.route(self.fence, self.metadata, replicas))
        self.dispatcher = Dispatcher(table)


def test_checkpoints_are_on_disk_when_answered_and_a_failed_one_fails_its_partition(
    tmp_path: Path,
) -> None:
    files = FaultyFiles()
    files.fail("fsync", name_suffix="orders-2", error=errno.EIO)  # that partition's directory
    replicas = EpochReplicas(tmp_path, files)
    answer = EpochNode(replicas).call(lai(1, 500, partitions=(0, 1, 2, 3)))
    codes = {p.partition_index: p.error_code for t in answer.topics for p in t.partition_errors}
    assert codes == {0: 0, 1: 0, 2: int(ErrorCode.kafka_storage_error), 3: 0}
    for partition in (0, 1, 3):
        path = replicas.caches[partition].checkpoint_path
        assert CheckpointFile(path, LEADER_EPOCH_FORMAT).read() == [(3, 0)]
