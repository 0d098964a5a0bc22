"""The numbered, keyed, headered record stream the round-trip tests produce and check.

Owns: generating `Outgoing` records (sequence number in the value, so order and gaps are visible),
and the checks a read-back must pass: same content, per-partition order, keys, headers and
timestamps. Pure; thread-safe.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from tests.e2e.kafka_admin import StoredRecord

KEY_SPACE = 53  # keys repeat, so one key's records must stay on one partition
VALUE_PADDING = b"pier-roundtrip-" * 6  # ~100-byte values that every codec can shrink


@dataclass(frozen=True, slots=True)
class Outgoing:
    seq: int
    partition: int
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


def make_records(count: int, partitions: int, base_timestamp_ms: int) -> list[Outgoing]:
    """Record i goes to partition i % partitions with timestamp base + 3·i (strictly increasing)."""
    return [
        Outgoing(
            seq=i,
            partition=i % partitions,
            key=b"key-%d" % (i % KEY_SPACE),
            value=b"%08d:" % i + VALUE_PADDING,
            headers=(("seq", b"%d" % i), ("dup", b"first"), ("dup", b"second"), ("empty", b"")),
            timestamp_ms=base_timestamp_ms + 3 * i,
        )
        for i in range(count)
    ]


def seq_of(value: bytes | None) -> int:
    assert value is not None, "a produced value came back null"
    return int(value.split(b":", 1)[0])


def by_partition(records: Sequence[StoredRecord]) -> dict[int, list[StoredRecord]]:
    grouped: dict[int, list[StoredRecord]] = defaultdict(list)
    for record in records:
        grouped[record.partition].append(record)
    return dict(grouped)


def assert_offsets_dense(records: Sequence[StoredRecord]) -> None:
    """Offsets of each partition start at 0 and have no holes (no transactions, no compaction)."""
    for partition, stored in by_partition(records).items():
        offsets = [r.offset for r in stored]
        assert offsets == list(range(len(stored))), f"partition {partition} offsets not dense"


def assert_exact_copy(sent: Sequence[Outgoing], got: Sequence[StoredRecord]) -> None:
    """Every record came back once, on its partition, in produce order, with key/headers/ts."""
    assert len(got) == len(sent), f"sent {len(sent)} records, read {len(got)}"
    assert_offsets_dense(got)
    expected = {p: [r for r in sent if r.partition == p] for p in {r.partition for r in sent}}
    actual = by_partition(got)
    assert sorted(actual) == sorted(expected)
    for partition, records in expected.items():
        for want, have in zip(records, actual[partition], strict=True):
            assert (have.key, have.value) == (want.key, want.value), f"p{partition}@{have.offset}"
            assert have.headers == want.headers, f"headers at p{partition}@{have.offset}"
            assert have.timestamp_ms == want.timestamp_ms, (
                f"timestamp at p{partition}@{have.offset}"
            )


def assert_keyed_stream(
    sent: Sequence[Outgoing],
    got: Sequence[StoredRecord],
    headers: tuple[tuple[str, bytes], ...],
    window_ms: tuple[int, int],
) -> None:
    """For a client that picks partitions and timestamps itself (kcat): every record came back
    once, each key on one partition, per-partition order kept, fixed headers, timestamps set by
    the client inside the produce window and non-decreasing along each partition."""
    assert len(got) == len(sent), f"sent {len(sent)} records, read {len(got)}"
    assert_offsets_dense(got)
    sent_by_seq = {r.seq: r for r in sent}
    assert sorted(seq_of(r.value) for r in got) == sorted(sent_by_seq)
    partition_of_key: dict[bytes | None, int] = {}
    for partition, records in by_partition(got).items():
        seqs = [seq_of(r.value) for r in records]
        assert seqs == sorted(seqs), f"partition {partition} out of produce order"
        stamps = [r.timestamp_ms for r in records]
        assert stamps == sorted(stamps), f"partition {partition} timestamps go backwards"
        for record in records:
            want = sent_by_seq[seq_of(record.value)]
            assert (record.key, record.value) == (want.key, want.value)
            assert record.headers == headers
            assert window_ms[0] <= record.timestamp_ms <= window_ms[1]
            assert partition_of_key.setdefault(record.key, partition) == partition
