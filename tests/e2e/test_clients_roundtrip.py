"""Real Kafka clients × codecs: produce 10,000 keyed records with headers, read them back by
assign/seek, compare everything, and find offsets by timestamp (ListOffsets, KIP-79).

Each case gets a fresh 3-partition topic on the module's shared broker. The stored batches are
also read from disk to prove the client really used the codec and the broker kept it
(`compression.type=producer`, the default, stores batches as produced).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from brokers.records.batch import iter_headers
from infra.stack import BrokerProcess
from tests.e2e.client_drivers import NOT_FOUND, ClientDriver, ConfluentDriver
from tests.e2e.kafka_admin import StoredRecord, create_topic
from tests.e2e.kcat_driver import KCAT_HEADERS, KcatDriver
from tests.e2e.python_drivers import AioKafkaDriver, KafkaPythonDriver
from tests.e2e.workload import assert_exact_copy, assert_keyed_stream, by_partition, make_records

pytestmark = [pytest.mark.e2e]

RECORDS = 10_000
PARTITIONS = 3
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
DRIVERS: dict[str, ClientDriver] = {
    d.name: d for d in (ConfluentDriver(), KafkaPythonDriver(), AioKafkaDriver(), KcatDriver())
}


@pytest.mark.parametrize("codec", list(CODEC_IDS))
@pytest.mark.parametrize("client", list(DRIVERS))
def test_round_trip(module_broker: BrokerProcess, topic_name: str, client: str, codec: str) -> None:
    driver = DRIVERS[client]
    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, topic_name, PARTITIONS)
    # An hour in the past: inside message.timestamp.before.max.ms, far from "now".
    base_timestamp = int(time.time() * 1000) - 3_600_000
    sent = make_records(RECORDS, PARTITIONS, base_timestamp)

    window_start = int(time.time() * 1000)
    driver.produce(bootstrap, topic_name, sent, codec)
    window_end = int(time.time() * 1000)
    got = driver.read(bootstrap, topic_name, PARTITIONS)

    if driver.explicit_timestamps:
        assert_exact_copy(sent, got)
    else:
        assert_keyed_stream(sent, got, KCAT_HEADERS, (window_start, window_end))
    assert_stored_codec(module_broker.data_dir, topic_name, CODEC_IDS[codec])
    assert_offsets_for_times(driver, bootstrap, topic_name, got)


def assert_stored_codec(data_dir: Path, topic: str, codec_id: int) -> None:
    """Every batch on disk carries the producer's codec in its attributes."""
    segments = sorted(data_dir.glob(f"{topic}-*/*.log"))
    assert segments, f"no segment files for {topic} under {data_dir}"
    codecs = {
        header.compression for path in segments for _, header in iter_headers(path.read_bytes())
    }
    assert codecs == {codec_id}


def assert_offsets_for_times(
    driver: ClientDriver, bootstrap: str, topic: str, got: Sequence[StoredRecord]
) -> None:
    """For targets before, at, just after a record and past the end of every partition, the
    answer is the first offset whose timestamp is ≥ the target (NOT_FOUND past the end)."""
    partitions = by_partition(got)
    kinds: dict[str, Callable[[list[StoredRecord]], int]] = {
        "before the first record": lambda rs: rs[0].timestamp_ms - 1_000,
        "at a record": lambda rs: rs[len(rs) // 2].timestamp_ms,
        "just after a record": lambda rs: rs[len(rs) // 3].timestamp_ms + 1,
        "past the last record": lambda rs: rs[-1].timestamp_ms + 1,
    }
    for kind, pick in kinds.items():
        targets = {p: pick(records) for p, records in partitions.items()}
        expected = {p: first_at_or_after(records, targets[p]) for p, records in partitions.items()}
        got_offsets = driver.offsets_for_times(bootstrap, topic, targets)
        assert got_offsets == expected, f"{kind}: {got_offsets} != {expected}"


def first_at_or_after(records: Sequence[StoredRecord], timestamp_ms: int) -> int:
    return next((r.offset for r in records if r.timestamp_ms >= timestamp_ms), NOT_FOUND)
