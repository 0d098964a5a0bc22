"""The one-pass path's decisions on a micro-batch's digest (`billing.rollup.one_pass`), on plain
values: an id twice in a chunk, a run inside a stored range, runs joined across chunks with
their newest hour, which runs `ranges.split` would have kept as ids, and how storage samples
count (kept, repeated, counted before) and whose hours' ids are checked."""

from __future__ import annotations

from billing.rollup.one_pass import Chunk, Digest, Sample, _kept_samples, _overlaps, _short_runs
from billing.rollup.seq_ranges import Range
from billing.rollup.sums import RollupKey, RunOutput, Sums

H = 3_600_000


def _digest(*chunks: tuple[str, int, int, int]) -> Digest:
    """(writer, chunk, rows, mask) each, in hour H."""
    return Digest(chunks={(w, c): Chunk(n, mask, H, H) for w, c, n, mask in chunks})


def test_a_chunk_with_fewer_bits_than_rows_repeats_an_id() -> None:
    assert not _digest(("g/1", 0, 3, 0b1011), ("g/1", 1, 64, -1)).repeats()
    assert _digest(("g/1", 0, 4, 0b1011)).repeats()
    assert _digest(("g/1", 1, 65, -1)).repeats()


def test_runs_are_joined_across_chunks_with_their_newest_hour() -> None:
    found = Digest(
        chunks={
            ("g/1", 0): Chunk(2, 1 << 62 | 1 << 63, H, H),  # sequences 62, 63 (signed BIGINT)
            ("g/1", 1): Chunk(2, 0b11, H, 2 * H),  # 64, 65
            ("g/1", 3): Chunk(1, 0b1, H, H),  # 192
            ("g/2", 0): Chunk(1, 0b100, H, H),  # 2
        }
    )
    assert found.runs() == [
        Range("g/1", 62, 65, 2 * H),
        Range("g/1", 192, 192, H),
        Range("g/2", 2, 2, H),
    ]
    assert found.hours() == []  # no sums: no hours of valid rows


def test_a_run_meeting_a_stored_range_is_a_replay() -> None:
    held = [Range("g/1", 0, 99, H), Range("g/1", 200, 299, H), Range("g/2", 0, 9, H)]
    assert not _overlaps([Range("g/1", 100, 199, H), Range("g/2", 10, 20, H)], held)
    assert _overlaps([Range("g/1", 150, 200, H)], held)
    assert _overlaps([Range("g/1", 99, 99, H)], held)
    assert _overlaps([Range("g/2", 5, 5, H)], held)
    assert not _overlaps([Range("g/3", 0, 500, H)], held)


def test_short_runs_are_those_split_keeps_as_ids() -> None:
    held = [Range("g/1", 0, 99, H), Range("g/1", 200, 299, H)]
    runs = [
        Range("g/1", 100, 110, H),  # touches the end of a stored range
        Range("g/1", 150, 199, H),  # long enough
        Range("g/1", 120, 130, H),  # short, alone
        Range("g/1", 190, 199, H),  # touches the start of one
        Range("g/2", 0, 0, H),  # short, alone
    ]
    assert _short_runs(runs, held) == 2


def test_samples_count_once_and_not_at_all_when_counted_before() -> None:
    found = Digest(
        valid=10,
        sums={RollupKey("acme", "sa", "", "", H): Sums(records=10)},
        samples={
            "s/acme/orders/0/5": Sample(1, "acme", "orders", 0, 5, 100, 0),
            "s/acme/orders/1/5": Sample(3, "acme", "orders", 1, 5, 200, 0),  # a write retried
            "s/acme/orders/2/5": Sample(2, "acme", "orders", 2, 5, 300, 0),  # counted before
        },
    )
    out = RunOutput("__usage", None, {}, {}, 0)
    kept = _kept_samples(found, {"s/acme/orders/2/5"}, out)
    assert [(row[0], row[9]) for row in kept] == [
        ("s/acme/orders/0/5", 100),
        ("s/acme/orders/1/5", 200),
    ]
    assert (out.records, out.duplicates) == (12, 2 + 2)
    assert found.hours() == [0, H]  # the samples' hours' counted ids are checked too
