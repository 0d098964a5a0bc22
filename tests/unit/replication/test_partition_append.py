"""The leader append in steps: the policy a partition hands to `prepare_append` follows its topic
and broker configuration, and the append after the (possibly off-loop) prepare checks again."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.config import TOPIC_CONFIGS, LogConfig
from brokers.log.errors import InvalidConfigError
from brokers.log.log import Log
from brokers.records.builder import simple_batch
from brokers.records.compression import LZ4
from brokers.records.prepare import prepare_append
from brokers.replication.errors import NotLeaderOrFollowerError
from brokers.replication.partition import LeadershipState, Partition

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000


def make_partition(tmp_path: Path, config: LogConfig) -> Partition:
    clock = ManualClock(NOW)
    log = Log.open(tmp_path / "topic-0", config, clock=clock)
    return Partition(
        log, node_id=0, clock=clock, high_watermark=0, on_high_watermark=lambda p: None
    )


def test_policy_follows_topic_and_broker_configuration(tmp_path: Path) -> None:
    config = LogConfig.from_properties(
        {
            "cleanup.policy": "compact",
            "compression.type": "lz4",
            "compression.lz4.level": "5",
            "message.timestamp.type": "LogAppendTime",
            "max.message.bytes": "500000",
        },
        {"pier.batch.max.decompressed.bytes": "1000000", "pier.batch.max.records": "1000"},
    )
    policy = make_partition(tmp_path, config).append_policy()
    assert (policy.requires_keys, policy.log_append_time) == (True, True)
    assert (policy.target_codec, policy.compression_level) == (LZ4, 5)
    assert policy.max_message_bytes == 500_000 and policy.now_ms == NOW
    assert (policy.max_decompressed_bytes, policy.max_records) == (1_000_000, 1000)
    default = make_partition(tmp_path / "other", LogConfig()).append_policy()
    assert (default.target_codec, default.requires_keys, default.log_append_time) == (
        None,
        False,
        False,
    )


def test_batch_caps_are_broker_settings_not_topic_configs() -> None:
    assert not any(name.startswith("pier.") for name in TOPIC_CONFIGS)
    with pytest.raises(InvalidConfigError, match=r"pier\.batch\.max\.records"):
        LogConfig.from_properties({}, {"pier.batch.max.records": "0"})
    with pytest.raises(InvalidConfigError, match="Not a number"):
        LogConfig.from_properties({}, {"pier.batch.max.decompressed.bytes": "lots"})


def test_append_after_prepare_checks_leadership_again(tmp_path: Path) -> None:
    partition = make_partition(tmp_path, LogConfig())
    batch = simple_batch([b"v"], keys=[b"k"], timestamps=[NOW])
    prepared = prepare_append(batch, partition.append_policy())  # as a worker would
    partition.become_follower(
        LeadershipState(leader_id=1, leader_epoch=1, replicas=[0, 1], isr=[1])
    )
    with pytest.raises(NotLeaderOrFollowerError):
        partition.append_prepared(prepared)
    assert partition.log.log_end_offset == 0
