"""The batcher's own batch encoding gives the builder's bytes (gateway.http.batch_encoding)."""

from __future__ import annotations

import random

from brokers.records.builder import build_batch, read_batch
from brokers.records.record import Record
from gateway.http.batch_encoding import EncodedRecord, encode_batch


def _built(records: list[EncodedRecord], producer: tuple[int, int], sequence: int) -> bytes:
    base = records[0][3]
    return build_batch(
        [Record(i, t - base, k, v, h) for i, (k, v, h, t) in enumerate(records)],
        base_timestamp=base,
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
        records: list[EncodedRecord] = []
        for _ in range(rng.choice([1, 2, 7, 300])):
            headers = tuple(
                (rng.choice(["h", "trace", "é", ""]), _some_bytes(rng))
                for _ in range(rng.choice([0, 0, 1, 3]))
            )
            stamp = start + rng.choice([0, 0, 5, -3, 20_000, -(2**20)])
            records.append((_some_bytes(rng), _some_bytes(rng), headers, stamp))
        producer = (rng.randrange(0, 2**40), rng.randrange(0, 2**15))
        sequence = rng.randrange(0, 2**31 - 400)
        encoded = encode_batch(
            records, producer_id=producer[0], producer_epoch=producer[1], base_sequence=sequence
        )
        assert encoded == _built(records, producer, sequence)
        header, decoded = read_batch(encoded)  # and it reads back (the CRC holds)
        assert header.records_count == len(records)
        assert [(r.key, r.value, r.headers) for r in decoded] == [r[:3] for r in records]


def test_offset_deltas_past_the_table_are_encoded_too() -> None:
    records: list[EncodedRecord] = [(None, b"v", (), 1000)] * 17_000
    encoded = encode_batch(records, producer_id=1, producer_epoch=0, base_sequence=0)
    assert encoded == _built(records, (1, 0), 0)
