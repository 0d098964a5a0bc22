"""The HTTP producer's batches (`brokers.records.builder.build_rows_batch`, plain rows) are the
builder's bytes for the same records, and the builder's one table-based record encoder writes
what the byte-at-a-time reference (`brokers.records.record.encode_records`) writes."""

from __future__ import annotations

import random

from brokers.records.batch import HEADER_SIZE
from brokers.records.builder import Row, build_batch, build_rows_batch, read_batch
from brokers.records.record import Record, encode_records


def _records(rows: list[Row]) -> list[Record]:
    base = rows[0][3]
    return [Record(i, t - base, k, v, h) for i, (k, v, h, t) in enumerate(rows)]


def _built(rows: list[Row], producer: tuple[int, int], sequence: int) -> bytes:
    return build_batch(
        _records(rows),
        base_timestamp=rows[0][3],
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=sequence,
    )


def _some_bytes(rng: random.Random) -> bytes | None:
    size = rng.choice([-1, 0, 1, 63, 64, 127, 128, 8191, 8192, 20_000])
    return None if size < 0 else rng.randbytes(size)


def test_batches_are_the_builders_bytes_for_any_records() -> None:
    rng = random.Random(24)
    for _ in range(60):
        start = rng.choice([0, 1_700_000_000_000, 2**40])
        rows: list[Row] = []
        for _ in range(rng.choice([1, 2, 7, 300])):
            headers = tuple(
                (rng.choice(["h", "trace", "é", ""]), _some_bytes(rng))
                for _ in range(rng.choice([0, 0, 1, 3]))
            )
            stamp = start + rng.choice([0, 0, 5, -3, 20_000, -(2**20)])
            rows.append((_some_bytes(rng), _some_bytes(rng), headers, stamp))
        producer = (rng.randrange(0, 2**40), rng.randrange(0, 2**15))
        sequence = rng.randrange(0, 2**31 - 400)
        encoded = build_rows_batch(
            rows, producer_id=producer[0], producer_epoch=producer[1], base_sequence=sequence
        )
        assert encoded == _built(rows, producer, sequence)
        assert encoded[HEADER_SIZE:] == encode_records(_records(rows))  # the reference's records
        header, decoded = read_batch(encoded)  # and it reads back (the CRC holds)
        assert header.records_count == len(rows)
        assert [(r.key, r.value, r.headers) for r in decoded] == [r[:3] for r in rows]


def test_any_attributes_and_deltas_are_the_references_bytes() -> None:
    rng = random.Random(7)
    records = [
        Record(
            rng.choice([0, 5, 16_383, 16_384, 2**31 - 1]),
            rng.choice([0, -1, 16_383, 16_384, -(2**40), 2**40]),
            _some_bytes(rng),
            _some_bytes(rng),
            (("k", b"v"),) if rng.random() < 0.3 else (),
            rng.choice([0, 1, 0x7F, 0x80, 0xFF]),
        )
        for _ in range(400)
    ]
    assert build_batch(records)[HEADER_SIZE:] == encode_records(records)


def test_offset_deltas_past_the_table_are_encoded_too() -> None:
    rows: list[Row] = [(None, b"v", (), 1000)] * 17_000
    encoded = build_rows_batch(rows, producer_id=1, producer_epoch=0, base_sequence=0)
    assert encoded == _built(rows, (1, 0), 0)
