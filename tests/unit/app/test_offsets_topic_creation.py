"""The group wiring's internal topic: when `__consumer_offsets` cannot be created because the
broker is out of open files (or its disk fails), FindCoordinator's path answers the retriable
COORDINATOR_NOT_AVAILABLE, never the descriptor budget's POLICY_VIOLATION meant for CreateTopics."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokers.app.groups import BrokerOffsetsTopic
from brokers.common.clock import ManualClock
from brokers.common.descriptors import DescriptorLimitError
from brokers.coordinator.config import GroupConfig
from brokers.coordinator.errors import CoordinatorNotAvailableError
from brokers.log.config import LogConfig
from brokers.log.errors import StorageError
from brokers.log.log_manager import LogManager
from brokers.replication.metadata_cache import MetadataCache
from brokers.replication.replica_manager import ReplicaManager
from brokers.server.purgatory import Purgatory

pytestmark = pytest.mark.unit


class RefusingTopics:
    """A topic admin whose every create fails with `error`."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    def create_topic(self, *args: object, **kwargs: object) -> None:
        self.calls += 1
        raise self.error


@pytest.mark.parametrize(
    "error",
    [
        DescriptorLimitError("the broker's open-file limit (256) allows 3 more partitions"),
        StorageError("Too many open files"),
    ],
)
def test_internal_topic_out_of_descriptors_is_coordinator_not_available(
    tmp_path: Path, error: Exception
) -> None:
    clock = ManualClock(1_700_000_000_000)
    logs = LogManager(tmp_path, clock=clock, default_config=LogConfig())
    purgatory = Purgatory()
    replicas = ReplicaManager(logs, tmp_path, node_id=0, clock=clock, on_append=purgatory.notify)
    topics = RefusingTopics(error)
    offsets = BrokerOffsetsTopic(
        GroupConfig.from_properties({}),
        metadata=MetadataCache(cluster_id="c", controller_id=0),
        topics=topics,  # type: ignore[arg-type]
        replicas=replicas,
        purgatory=purgatory,
        clock=clock,
        zookeeper_mode=False,
    )
    with pytest.raises(CoordinatorNotAvailableError, match="cannot be created"):
        offsets.ensure_created()
    assert topics.calls == 1
