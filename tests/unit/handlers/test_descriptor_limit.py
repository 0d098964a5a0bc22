"""CreateTopics / CreatePartitions against the open-file limit: refused whole, or rolled back.

The budget check runs before any log is opened (POLICY_VIOLATION naming the limit, `validate_only`
too). Should opening logs still fail with EMFILE — here this test process's own RLIMIT_NOFILE is
lowered for a moment, with a budget that believes there is room — the logs the request opened
are deleted again and nothing is persisted (KAFKA_STORAGE_ERROR).
"""

from __future__ import annotations

import datetime
import json
import resource
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from brokers.app.runtime import Broker
from brokers.common.descriptors import (
    DescriptorBudget,
    open_by_kind,
    open_descriptors,
    reserve_for,
)
from brokers.handlers import create_partitions, create_topics
from brokers.replication.local_topics import REGISTRY_FILE, LocalTopicRegistry
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.admin_harness import call, entity, standalone_broker

pytestmark = pytest.mark.unit
LIMIT = 200
OPEN = 100  # 200 - 100 open - 64 reserved = 36 partitions available (1 descriptor each)


@contextmanager
def broker_with_budget(tmp_path: Path, budget: DescriptorBudget) -> Iterator[Broker]:
    with standalone_broker(tmp_path) as broker:
        broker.topics = LocalTopicRegistry(
            tmp_path / "data",
            broker.replicas,
            broker.metadata,
            node_id=0,
            broker_defaults={},
            descriptors=budget,
        )
        broker.topics.load()
        yield broker


def create(broker: Broker, name: str, partitions: int, *, validate_only: bool = False) -> Any:
    topic = entity(19, 7, "CreatableTopic", name=name, num_partitions=partitions,
                   replication_factor=1, assignments=(), configs=())  # fmt: skip
    request = entity(19, 7, "CreateTopicsRequest", topics=(topic,), validate_only=validate_only)
    (result,) = call(
        create_topics.route(broker.config, broker.metadata, broker.topics, False), 7, request
    ).topics
    return result


def grow(broker: Broker, name: str, count: int) -> Any:
    topic = entity(37, 3, "CreatePartitionsTopic", name=name, count=count, assignments=None)
    request = entity(37, 3, "CreatePartitionsRequest", topics=(topic,),
                     timeout=datetime.timedelta(seconds=5), validate_only=False)  # fmt: skip
    (result,) = call(
        create_partitions.route(broker.config, broker.metadata, broker.topics, False), 3, request
    ).results
    return result


def persisted_topics(tmp_path: Path) -> set[str]:
    return set(json.loads((tmp_path / "data" / REGISTRY_FILE).read_text())["topics"])


def log_dirs(tmp_path: Path, name: str) -> list[str]:
    return [p.name for p in (tmp_path / "data").iterdir() if p.name.startswith(f"{name}-")]


def test_budget_counts_what_is_open_and_keeps_a_reserve() -> None:
    budget = DescriptorBudget(lambda: LIMIT, lambda: OPEN)
    assert reserve_for(LIMIT) == 64 and budget.partitions_available() == 36
    assert DescriptorBudget(lambda: None).partitions_available() is None
    assert reserve_for(100_000) == 10_000
    assert 3 <= open_descriptors() < resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def test_create_topics_over_the_limit_is_refused_before_anything_is_created(
    tmp_path: Path,
) -> None:
    budget = DescriptorBudget(lambda: LIMIT, lambda: OPEN)
    with broker_with_budget(tmp_path, budget) as broker:
        for validate_only in (True, False):
            result = create(broker, "big", 100, validate_only=validate_only)
            assert result.error_code == ErrorCode.policy_violation, result
            assert "open-file limit (200) allows 36 more partitions" in result.error_message
            assert "topic 'big' needs 100" in result.error_message
            assert "each holds 1 descriptor;" in result.error_message
        assert "big" not in broker.metadata.topics
        assert broker.replicas.find("big", 0) is None and log_dirs(tmp_path, "big") == []
        assert "big" not in persisted_topics(tmp_path)
        assert create(broker, "fits", 36).error_code == ErrorCode.none


def test_create_partitions_over_the_limit_is_refused_before_anything_is_created(
    tmp_path: Path,
) -> None:
    budget = DescriptorBudget(lambda: LIMIT, lambda: OPEN)
    with broker_with_budget(tmp_path, budget) as broker:
        assert create(broker, "t", 1).error_code == ErrorCode.none
        result = grow(broker, "t", 38)  # 37 more, 36 fit (t-0 holds its descriptor)
        assert result.error_code == ErrorCode.policy_violation, result
        assert "allows 36 more partitions; growing topic 't' to 38 partitions needs 37" in (
            result.error_message
        )
        assert len(broker.metadata.topics["t"].partitions) == 1
        assert sorted(log_dirs(tmp_path, "t")) == ["t-0"]
        assert grow(broker, "t", 37).error_code == ErrorCode.none


@contextmanager
def open_file_limit(soft: int) -> Iterator[None]:
    saved = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, saved[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, saved)


def test_emfile_while_opening_logs_rolls_the_whole_topic_back(tmp_path: Path) -> None:
    believes_there_is_room = DescriptorBudget(lambda: 10**6, lambda: 0)
    with broker_with_budget(tmp_path, believes_there_is_room) as broker:
        with open_file_limit(open_descriptors() + 20):  # room for ~19 partitions of 1 each
            result = create(broker, "half", 30)
        assert result.error_code == ErrorCode.kafka_storage_error, result
        assert "ran out of file descriptors" in result.error_message
        assert "none of the 30 partitions was created" in result.error_message
        assert "half" not in broker.metadata.topics
        assert all(broker.replicas.find("half", i) is None for i in range(30))
        assert all(name.endswith("-delete") for name in log_dirs(tmp_path, "half"))
        assert "half" not in persisted_topics(tmp_path)
        # The limit back, the same topic is created whole.
        assert create(broker, "half", 30).error_code == ErrorCode.none
        assert len(broker.metadata.topics["half"].partitions) == 30


def test_the_default_budget_follows_this_process_limit_as_it_changes() -> None:
    # The smallest limit leaving room for 5 partitions costing 4 descriptors each plus 2 spare,
    # so a descriptor another thread opens or closes meanwhile does not change the answer (at 1
    # descriptor a partition every one would); the reserve grows with the limit (a tenth of it)
    # once many descriptors are open.
    now = open_by_kind()  # sockets draw on the reserve (module doc)
    limit = next(
        n
        for n in range(now.files, now.files + 10_000)
        if n - now.files - max(reserve_for(n), now.others) >= 22
    )
    with open_file_limit(limit):
        assert DescriptorBudget(per_partition=4).partitions_available() == 5
    assert (DescriptorBudget(per_partition=4).partitions_available() or 0) > 5
