"""Produce requests carrying broken record batches, over raw sockets.

Each batch is built with `brokers.records.builder.build_batch` and then broken. Expected errors are
Kafka's, per partition, with the connection kept open:
- Produce v0–2 are advertised but refused: UNSUPPORTED_VERSION (35) for every partition;
- CRC mismatch: CORRUPT_MESSAGE (2) (`DefaultRecordBatch.ensureValid`);
- records count ≠ lastOffsetDelta + 1, a control batch from a client, a non-zero base offset, two
  batches in one partition: INVALID_RECORD (87) (`LogValidator.validateBatch`,
  `UnifiedLog.analyzeAndValidateRecords`, `ProduceRequest.validateRecords`);
- a transactional batch (here a control batch) in a request without a transactional id:
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53), KafkaApis' check before any validation;
- a magic v1 message set: INVALID_RECORD (87), as Kafka answers from `ProduceRequest.validateRecords`
  (only magic v2 is allowed in Produce v3+);
- records that disagree with their header (every record is walked, as LogValidator does): a count
  forged to 2^31−1 over one record ("premature EOF"), compressed or not, a record whose declared
  length is wrong: INVALID_RECORD (87);
- a record timestamp outside message.timestamp.before.max.ms although the header's base and max are
  fine: INVALID_TIMESTAMP (32), with the record named in `record_errors`;
- a batch whose re-encoding under the topic's compression.type exceeds max.message.bytes:
  MESSAGE_TOO_LARGE (10).
After every refusal a valid batch lands at the next offset: nothing of a refused batch was stored.
"""

from __future__ import annotations

import datetime
import struct
import time
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from brokers.records.batch import CRC_OFFSET, HEADER_SIZE, batch_crc, parse_header
from brokers.records.builder import reseal, simple_batch
from brokers.records.compression import NONE, ZSTD, compress
from infra.bench.bomb import bomb_batch
from infra.stack import BrokerProcess
from tests.e2e.broker_health import assert_still_serving
from tests.e2e.kafka_admin import create_topic
from tests.e2e.raw_wire import RawConnection, frame

pytestmark = [pytest.mark.e2e]

CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_TIMESTAMP = 2, 10, 32
UNSUPPORTED_VERSION, INVALID_RECORD, TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 35, 87, 53
_RECORDS_COUNT_OFFSET = HEADER_SIZE - 4
HOUR_MS = 3_600_000


def valid_batch() -> bytes:
    now = int(time.time() * 1000)
    return simple_batch([b"v1", b"v2", b"v3"], keys=[b"a", b"b", b"c"], timestamps=[now] * 3)


def with_fixed_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, CRC_OFFSET, batch_crc(batch, 0, len(batch)))
    return bytes(batch)


def flipped_record_byte() -> bytes:
    batch = bytearray(valid_batch())
    batch[HEADER_SIZE + 2] ^= 0x40
    return bytes(batch)


def count_too_high() -> bytes:
    batch = bytearray(valid_batch())
    struct.pack_into(">i", batch, _RECORDS_COUNT_OFFSET, 4)  # lastOffsetDelta says 3 records
    return with_fixed_crc(batch)


def forged_count(codec: int) -> Callable[[], bytes]:
    """One real record under a header claiming 2^31−1 (count and last offset delta agree)."""

    def build() -> bytes:
        one = simple_batch([b"v"], keys=[b"k"], timestamps=[int(time.time() * 1000)])
        header = parse_header(one)
        forged = header._replace(records_count=2**31 - 1, last_offset_delta=2**31 - 2)
        body = compress(codec, memoryview(one)[HEADER_SIZE:])
        return reseal(forged, body, compression=codec, max_timestamp=header.max_timestamp)

    return build


def wrong_record_length() -> bytes:
    batch = bytearray(valid_batch())
    batch[HEADER_SIZE] += 2  # the first record's length varint (one byte, zigzag): +1
    return with_fixed_crc(batch)


def control_batch(*, transactional: bool = False) -> bytes:
    now = int(time.time() * 1000)
    return simple_batch(
        [b"\x00\x00\x00\x00"],
        keys=[b"\x00\x00\x00\x00"],
        timestamps=[now],
        is_control=True,
        is_transactional=transactional,
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
    )


def transactional_control_batch() -> bytes:
    return control_batch(transactional=True)


def nonzero_base_offset() -> bytes:
    batch = bytearray(valid_batch())
    struct.pack_into(">q", batch, 0, 5)  # outside the CRC: only the validator can catch it
    return bytes(batch)


def magic_v1_message() -> bytes:
    """A legacy message set: offset, size, CRC32 (zlib), magic 1, attributes, timestamp, key, value."""
    body = struct.pack(">bbqi", 1, 0, int(time.time() * 1000), -1) + struct.pack(">i", 2) + b"v1"
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


BROKEN: dict[str, tuple[Callable[[], bytes], int]] = {
    "crc mismatch": (flipped_record_byte, CORRUPT_MESSAGE),
    "records count != lastOffsetDelta + 1": (count_too_high, INVALID_RECORD),
    "control batch from a client": (control_batch, INVALID_RECORD),
    # KafkaApis refuses the whole request before any validation: a transactional first batch
    # in a request without a transactional id
    "transactional batch, no transactional id": (
        transactional_control_batch,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ),
    "base offset 5": (nonzero_base_offset, INVALID_RECORD),
    "two batches in one partition": (lambda: valid_batch() + valid_batch(), INVALID_RECORD),
    "magic v1 message set": (magic_v1_message, INVALID_RECORD),
    "records count forged to 2^31-1": (forged_count(NONE), INVALID_RECORD),
    "records count forged to 2^31-1, zstd": (forged_count(ZSTD), INVALID_RECORD),
    "record length wrong": (wrong_record_length, INVALID_RECORD),
}


def produce(connection: RawConnection, topic: str, records: bytes) -> tuple[int, int]:
    """Produce v9 (acks=all) of one partition; (error code, base offset)."""
    partition = produce_answer(connection, topic, records)
    return int(partition.error_code), int(partition.base_offset)


def produce_answer(connection: RawConnection, topic: str, records: bytes) -> Any:
    """Produce v9 (acks=all) of one partition; the partition's answer."""
    partition_data = PartitionProduceData(index=i32(0), records=Records(records))
    request = ProduceRequest(
        acks=i16(-1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topic_data=(TopicProduceData(name=TopicName(topic), partition_data=(partition_data,)),),
    )
    response = connection.call(request, ProduceResponse)
    (partition,) = response.responses[0].partition_responses
    return partition


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_batch_is_refused_per_partition(
    module_broker: BrokerProcess, sentinel: RawConnection, topic_name: str, case: str
) -> None:
    create_topic(module_broker.bootstrap, topic_name)
    build, expected = BROKEN[case]
    with RawConnection(module_broker.host, module_broker.port) as connection:
        assert produce(connection, topic_name, valid_batch()) == (0, 0)
        code, _ = produce(connection, topic_name, build())
        assert code == expected, f"{case}: error {code}, Kafka answers {expected}"
        # Same connection: a refused batch is data, not a protocol violation.
        assert produce(connection, topic_name, valid_batch()) == (0, 3)
    assert_still_serving(module_broker, sentinel)


def test_every_record_timestamp_is_checked(
    module_broker: BrokerProcess, sentinel: RawConnection, topic_name: str
) -> None:
    create_topic(
        module_broker.bootstrap,
        topic_name,
        config={"message.timestamp.before.max.ms": str(HOUR_MS)},
    )
    now = int(time.time() * 1000)
    stale = simple_batch(
        [b"v1", b"v2", b"v3"], keys=[b"a", b"b", b"c"], timestamps=[now, now - 48 * HOUR_MS, now]
    )
    header = parse_header(stale)
    assert now - header.base_timestamp < HOUR_MS and now - header.max_timestamp < HOUR_MS
    with RawConnection(module_broker.host, module_broker.port) as connection:
        answer = produce_answer(connection, topic_name, stale)
        assert answer.error_code == INVALID_TIMESTAMP, f"error {answer.error_code}, Kafka: 32"
        assert [e.batch_index for e in answer.record_errors] == [1], answer.record_errors
        assert produce(connection, topic_name, valid_batch()) == (0, 0)
    assert_still_serving(module_broker, sentinel)


def test_reencoding_past_max_message_bytes_is_refused(
    module_broker: BrokerProcess, sentinel: RawConnection, topic_name: str
) -> None:
    create_topic(module_broker.bootstrap, topic_name, config={"compression.type": "uncompressed"})
    bomb = bomb_batch(200_000, int(time.time() * 1000))  # ~0.15 MiB of zstd, ~2 MiB re-encoded
    assert len(bomb) < 1_048_588
    with RawConnection(module_broker.host, module_broker.port) as connection:
        code, _ = produce(connection, topic_name, bomb)
        assert code == MESSAGE_TOO_LARGE, f"error {code}, Kafka answers RECORD_TOO_LARGE (10)"
        assert produce(connection, topic_name, valid_batch()) == (0, 0)
    assert_still_serving(module_broker, sentinel)


def test_produce_v2_answers_unsupported_version_per_partition(
    module_broker: BrokerProcess, sentinel: RawConnection
) -> None:
    topics = {b"legacy-a": [0, 1], b"legacy-b": [4]}
    body = struct.pack(">hii", -1, 5000, len(topics))
    for name, partitions in topics.items():
        body += struct.pack(">h", len(name)) + name + struct.pack(">i", len(partitions))
        for index in partitions:
            message_set = magic_v1_message()
            body += struct.pack(">ii", index, len(message_set)) + message_set
    header = struct.pack(">hhih", 0, 2, 77, 3) + b"old"
    with RawConnection(module_broker.host, module_broker.port) as connection:
        connection.send(frame(header + body))
        answered = parse_produce_v2_response(connection.read_frame())
    assert answered == {
        (name.decode(), index): UNSUPPORTED_VERSION
        for name, partitions in topics.items()
        for index in partitions
    }
    assert_still_serving(module_broker, sentinel)


def parse_produce_v2_response(payload: bytes) -> dict[tuple[str, int], int]:
    """Response header v0 + Produce v2 body → {(topic, partition): error code}."""
    (correlation_id, topic_count), pos = struct.unpack_from(">ii", payload), 8
    assert correlation_id == 77
    errors: dict[tuple[str, int], int] = {}
    for _ in range(topic_count):
        (length,) = struct.unpack_from(">h", payload, pos)
        name = payload[pos + 2 : pos + 2 + length].decode()
        (count,) = struct.unpack_from(">i", payload, pos + 2 + length)
        pos += 6 + length
        for _ in range(count):
            index, code, _base, _append_time = struct.unpack_from(">ihqq", payload, pos)
            errors[(name, index)] = code
            pos += 22
    (_throttle,) = struct.unpack_from(">i", payload, pos)
    assert pos + 4 == len(payload), "trailing bytes after throttle_time_ms"
    return errors
