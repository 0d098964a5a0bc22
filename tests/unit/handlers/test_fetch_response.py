import os
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from brokers.handlers.fetch_response import (
    LeaderEndpoint,
    PartitionData,
    TopicData,
    encode_fetch_response,
)
from brokers.replication.metadata_cache import BrokerEndpoint
from brokers.server.response import Part, part_size
from brokers.wire.errors import ErrorCode

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class Region:
    fd: int
    position: int
    size: int

    def read(self) -> bytes:
        return os.pread(self.fd, self.size, self.position)


def _flatten(parts: Sequence[Part]) -> bytes:
    return b"".join(
        bytes(p) if isinstance(p, bytes | bytearray | memoryview) else p.read() for p in parts
    )


def _decode(version: int, body: bytes) -> tuple[Any, int]:
    decoded, consumed = entity_reader(load_response_schema(1, version))(body, 0)
    return decoded, consumed


ORDERS_ID = uuid.UUID("6a3b1c1e-58b4-4ef1-9c3a-2f1d7c0e9b11")


@pytest.mark.parametrize("version", range(4, 19))
def test_kio_decodes_what_we_encode(version: int) -> None:
    with tempfile.TemporaryFile() as handle:
        handle.write(b"HEAD" + b"R" * 100 + b"TAIL")
        handle.flush()
        region = Region(handle.fileno(), 4, 100)
        topics = [
            TopicData(
                "orders",
                [
                    PartitionData(0, ErrorCode.none, 10, 10, 2, region),
                    PartitionData(1, ErrorCode.offset_out_of_range, -1, -1, -1, None),
                ],
                ORDERS_ID.bytes,
            ),
            TopicData("empty", []),
        ]
        raw = encode_fetch_response(version, topics, read_committed=version % 2 == 0)
        body = _flatten(list(raw.parts))
        assert raw.size == len(body) == sum(part_size(p) for p in raw.parts)
        decoded, consumed = _decode(version, body)
    assert consumed == len(body)
    topic = decoded.responses[0]
    if version >= 13:  # KIP-516: by id
        assert topic.topic_id == ORDERS_ID
        assert decoded.responses[1].topic_id is None  # kio reads the zero id as None
    else:
        assert topic.topic == "orders"
    first, second = topic.partitions
    assert (first.partition_index, first.high_watermark, first.records) == (0, 10, b"R" * 100)
    assert second.error_code == ErrorCode.offset_out_of_range
    assert not second.records
    assert decoded.responses[1].partitions == ()
    if version >= 5:
        assert first.log_start_offset == 2


@pytest.mark.parametrize("version", [12, 16, 18])
def test_leader_errors_name_the_current_leader_from_v16(version: int) -> None:
    """KIP-951: v16+ answers NOT_LEADER_OR_FOLLOWER with the leader, epoch and its endpoint."""
    leader = LeaderEndpoint(2, 7, BrokerEndpoint(2, "b2.example", 9093, "r1"))
    topics = [TopicData("t", [PartitionData(0, ErrorCode.not_leader_or_follower)], ORDERS_ID.bytes)]
    raw = encode_fetch_response(version, topics, leaders={("t", 0): leader})
    body = _flatten(list(raw.parts))
    decoded, consumed = _decode(version, body)
    assert consumed == len(body)
    partition = decoded.responses[0].partitions[0]
    if version < 16:
        return
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (2, 7)
    (node,) = decoded.node_endpoints
    assert (node.node_id, node.host, node.port, node.rack) == (2, "b2.example", 9093, "r1")


def test_large_regions_stay_file_parts() -> None:
    region = Region(0, 0, 1 << 20)
    raw = encode_fetch_response(
        12, [TopicData("t", [PartitionData(0, ErrorCode.none, 1, 1, 0, region)])]
    )
    assert region in raw.parts


@pytest.mark.parametrize("version", range(4, 13))
def test_aborted_transactions_by_isolation_level(version: int) -> None:
    """read_committed: each partition's aborted list (empty when none or on errors);
    read_uncommitted: null, as Kafka answers."""
    listed = PartitionData(0, ErrorCode.none, 9, 4, 0, aborted=[(7, 0), (8, 2)])
    errored = PartitionData(1, ErrorCode.not_leader_or_follower)

    def decode(read_committed: bool, partitions: list[PartitionData]) -> tuple[Any, ...]:
        raw = encode_fetch_response(
            version, [TopicData("t", partitions)], read_committed=read_committed
        )
        body = _flatten(list(raw.parts))
        decoded, consumed = _decode(version, body)
        assert consumed == len(body)
        return tuple(decoded.responses[0].partitions)

    first, second = decode(True, [listed, errored])
    assert [(a.producer_id, a.first_offset) for a in first.aborted_transactions] == [(7, 0), (8, 2)]
    assert first.last_stable_offset == 4
    assert second.aborted_transactions == ()
    (plain,) = decode(False, [PartitionData(0, ErrorCode.none, 9, 9, 0)])
    assert plain.aborted_transactions is None
