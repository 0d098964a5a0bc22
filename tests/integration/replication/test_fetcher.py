"""The replica fetcher against a real in-process broker as leader, through the real Fetch (with a
replica id) and OffsetForLeaderEpoch APIs, into a follower `Log` on local disk."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from brokers.client import Admin, ClientConfig, TopicPartition
from brokers.client.connection import BrokerConnection
from brokers.client.consumer import FetchPosition, fetch_from
from brokers.client.producer import produce
from brokers.client.topics import NewTopic
from brokers.common.clock import SYSTEM_CLOCK
from brokers.log.config import LogConfig
from brokers.log.log import Log
from brokers.replication.fetcher import EpochAnswer, EpochQuery, Phase, ReplicaFetcher
from brokers.replication.leader_endpoint import RemoteLeader
from brokers.wire.errors import ErrorCode
from tests.integration.inproc import broker_thread
from tests.polling import wait_until_async
from tests.unit.log.partition_helpers import make_batch
from tests.unit.replication.replication_helpers import write_as_leader

pytestmark = pytest.mark.integration

TOPIC = "replicated"
TP = TopicPartition(TOPIC, 0)
FOLLOWER_ID = 1
WAIT_S = 20.0


def log_bytes(log: Log) -> bytes:
    read = log.read(log.log_start_offset, 1 << 30)
    return read.region.read() if read.region is not None else b""


async def leader_bytes(connection: BrokerConnection) -> bytes:
    answer = await fetch_from(connection, {TP: FetchPosition(0)})  # a consumer read, to the HW
    assert answer[TP].error == ErrorCode.none
    return bytes(answer[TP].records)


async def replicate(connection: BrokerConnection, log: Log, *, hw: int, until_offset: int) -> None:
    fetcher = ReplicaFetcher(
        RemoteLeader(connection, node_id=FOLLOWER_ID), clock=SYSTEM_CLOCK, backoff_s=0.05
    )
    fetcher.follow(TP, log, leader_epoch=0, high_watermark=hw)
    task = asyncio.create_task(fetcher.run())

    async def at_end() -> bool:
        return log.log_end_offset == until_offset

    async def hw_at_end() -> bool:
        return fetcher.high_watermark(TP) == until_offset

    try:
        await wait_until_async(at_end, what=f"follower at {until_offset}", timeout=WAIT_S)
        await wait_until_async(hw_at_end, what=f"follower HW at {until_offset}", timeout=WAIT_S)
    finally:
        fetcher.stop()
        await task


def test_fetcher_replicates_a_real_leader_and_truncates_a_divergent_suffix(tmp_path: Path) -> None:
    with broker_thread(tmp_path / "leader") as broker:
        asyncio.run(_scenario(broker.port, tmp_path / "follower"))


async def _scenario(port: int, follower_dir: Path) -> None:
    bootstrap = f"127.0.0.1:{port}"
    async with Admin.for_bootstrap(bootstrap, ClientConfig()) as admin:
        created = await admin.create_topics([NewTopic(TOPIC, 1, 1)])
        assert created[TOPIC] is None
        for i in range(3):
            await produce(admin.cluster, TP, make_batch(2, value=b"r%d" % i * 10), acks=-1)
        connection = await BrokerConnection.connect("127.0.0.1", port, ClientConfig())
        log = Log.open(follower_dir / f"{TOPIC}-0", LogConfig(), clock=SYSTEM_CLOCK)
        try:
            await replicate(connection, log, hw=0, until_offset=6)
            assert log_bytes(log) == await leader_bytes(connection)
            assert log.leader_epoch_cache.entries() == [(0, 0)]

            # A suffix the leader never had, in an epoch it does not know: OffsetForLeaderEpoch
            # answers "undefined", so the follower falls back to its HW (6) and refetches.
            write_as_leader(log, 1, count=2, value=b"divergent" * 3)
            await produce(admin.cluster, TP, make_batch(1, value=b"after" * 5), acks=-1)
            await replicate(connection, log, hw=6, until_offset=7)
            assert log_bytes(log) == await leader_bytes(connection)
            assert log.leader_epoch_cache.entries() == [(0, 0)]

            remote = RemoteLeader(connection, node_id=FOLLOWER_ID)
            answers = await remote.end_offsets({TP: EpochQuery(0, 0)})
            assert answers[TP] == EpochAnswer(ErrorCode.none, 0, 7)
            answers = await remote.end_offsets({TP: EpochQuery(5, 0)})
            assert answers[TP].error == ErrorCode.unknown_leader_epoch

            # An epoch newer than the leader's: UNKNOWN_LEADER_EPOCH, back off, nothing written.
            waiting = ReplicaFetcher(
                RemoteLeader(connection, node_id=FOLLOWER_ID), clock=SYSTEM_CLOCK, backoff_s=60
            )
            waiting.follow(TP, log, leader_epoch=5, high_watermark=7)
            await waiting.run_once()
            assert waiting.phase(TP) is Phase.TRUNCATING
            assert log.log_end_offset == 7
        finally:
            log.close()
            await connection.aclose()
