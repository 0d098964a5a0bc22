"""`batch_end`: a micro-batch's end offsets read off Spark's write-ahead offset log, the file Spark
4 writes (`v1`, the batch's metadata, one line per source), and None (the batch then finds them
from its records) for a log it cannot read as expected. No Spark: the files are written here in
the format a real stream left (tests/integration/billing/test_stream.py checks a real one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from billing.rollup.stream import batch_end

pytestmark = pytest.mark.integration

METADATA = {
    "batchWatermarkMs": 0,
    "batchTimestampMs": 1795895631923,
    "conf": {"spark.sql.shuffle.partitions": "4"},
}


def _log(checkpoint: Path, batch_id: int, *lines: str) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch_id)).write_text("\n".join(lines), "utf-8")


def test_the_end_offsets_of_a_batch_come_from_its_offset_log(tmp_path: Path) -> None:
    offsets = {"__usage": {"0": 10, "1": 9, "10": 6, "11": 7}}
    _log(tmp_path, 7, "v1", json.dumps(METADATA), json.dumps(offsets))
    assert batch_end(str(tmp_path), 7, "__usage") == {0: 10, 1: 9, 10: 6, 11: 7}


def test_offsets_nested_by_source_are_found(tmp_path: Path) -> None:
    nested = {"sources": {"0": {"__usage": {"0": 3, "1": 4}}}}
    _log(tmp_path, 0, "v2", json.dumps(METADATA), json.dumps(nested))
    assert batch_end(str(tmp_path), 0, "__usage") == {0: 3, 1: 4}


@pytest.mark.parametrize(
    "lines",
    [
        ("v1", json.dumps(METADATA), "-"),  # a void offset
        ("v1", json.dumps(METADATA), '{"other": {"0": 1}}'),  # another topic
        ("v1", json.dumps(METADATA), '{"__usage": {"0": "ten"}}'),  # not an offset
        ("v1", "{not json"),
        ("v1",),
    ],
)
def test_a_log_it_cannot_read_gives_none(tmp_path: Path, lines: tuple[str, ...]) -> None:
    _log(tmp_path, 1, *lines)
    assert batch_end(str(tmp_path), 1, "__usage") is None


def test_a_missing_log_gives_none(tmp_path: Path) -> None:
    assert batch_end(str(tmp_path), 3, "__usage") is None
