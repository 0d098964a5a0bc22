"""Interop with the Python Kafka clients' own batch code, under every codec they support.

Their builders stand in for real producers (kafka-python, aiokafka in both its pure-Python and
Cython builds); their readers stand in for consumers of what the broker writes. librdkafka's
batches are checked end to end against a running broker elsewhere.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.record import default_records as aiokafka_records
from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPythonBuilder

from brokers.records.builder import build_batch, read_batch
from brokers.records.compression import CODEC_NAMES, NONE
from brokers.records.record import Record
from brokers.records.validate import validate_for_append

pytestmark = pytest.mark.unit

CODECS = sorted(CODEC_NAMES)
BUILDERS = {
    "kafka-python": KafkaPythonBuilder,
    "aiokafka-py": aiokafka_records._DefaultRecordBatchBuilderPy,
    "aiokafka-c": aiokafka_records.DefaultRecordBatchBuilder,
}
READERS = {
    "kafka-python": KafkaPythonBatch,
    "aiokafka-py": aiokafka_records._DefaultRecordBatchPy,
    "aiokafka-c": aiokafka_records.DefaultRecordBatch,
}
BASE_TS = 1_700_000_000_000


def _rows() -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    # Repetitive values so that the clients' "send uncompressed unless it helps" keeps the codec.
    rows = []
    for i in range(40):
        key = None if i % 7 == 0 else b"key-%d" % (i % 5)
        value = None if i % 11 == 3 else b'{"n": %d, "text": "%s"}' % (i, b"lorem ipsum " * 8)
        headers = [("trace", b"abc"), ("empty", b"")] if i % 4 == 0 else []
        rows.append((BASE_TS + i * 3 - (5 if i == 2 else 0), key, value, headers))
    return rows


def _expected(rows: list[Any]) -> list[Record]:
    base = rows[0][0]
    return [
        Record(i, ts - base, key, value, tuple(headers))
        for i, (ts, key, value, headers) in enumerate(rows)
    ]


@pytest.mark.parametrize("builder_name", sorted(BUILDERS))
@pytest.mark.parametrize("codec", CODECS)
def test_client_built_batches_decode(builder_name: str, codec: int) -> None:
    builder = BUILDERS[builder_name](
        magic=2, compression_type=codec, is_transactional=1, producer_id=1234,
        producer_epoch=5, base_sequence=17, batch_size=1 << 20,
    )  # fmt: skip
    rows = _rows()
    for offset, (ts, key, value, headers) in enumerate(rows):
        assert builder.append(offset, timestamp=ts, key=key, value=value, headers=headers)
    batch = bytes(builder.build())
    header, records = read_batch(batch)
    assert header.compression == codec, "the client skipped compression; test data too random"
    assert records == _expected(rows)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (1234, 5, 17)
    assert header.is_transactional
    assert header.base_timestamp == BASE_TS
    assert header.max_timestamp == max(row[0] for row in rows)
    assert header.records_count == header.last_offset_delta + 1 == len(rows)
    validated = validate_for_append(
        batch, now_ms=BASE_TS, max_message_bytes=1 << 20, timestamp_before_max_ms=60_000,
        timestamp_after_max_ms=60_000, requires_keys=False,
    )  # fmt: skip
    assert validated == [(0, header)]


@pytest.mark.parametrize("reader_name", sorted(READERS))
@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_decode_in_clients(reader_name: str, codec: int) -> None:
    rows = _rows()
    records = _expected(rows)
    batch = build_batch(
        records, compression=codec, base_offset=500, base_timestamp=BASE_TS,
        producer_id=9, producer_epoch=1, base_sequence=0,
    )  # fmt: skip
    reader = READERS[reader_name](bytearray(batch))
    assert reader.validate_crc()
    assert reader.compression_type == codec
    decoded = list(reader)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in decoded] == [
        (500 + i, ts, key, value) for i, (ts, key, value, _) in enumerate(rows)
    ]
    assert [list(r.headers) for r in decoded] == [h for *_, h in rows]


def test_uncompressed_bytes_identical_to_kafka_python() -> None:
    rows = _rows()
    builder = KafkaPythonBuilder(
        magic=2, compression_type=NONE, is_transactional=0, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    for offset, (ts, key, value, headers) in enumerate(rows):
        builder.append(offset, timestamp=ts, key=key, value=value, headers=headers)
    ours = build_batch(_expected(rows), base_timestamp=BASE_TS, partition_leader_epoch=0)
    assert ours == bytes(builder.build())  # kafka-python writes leader epoch 0 where Java writes -1
