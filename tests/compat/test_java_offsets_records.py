"""`kafka-get-offsets.sh` (org.apache.kafka.tools.GetOffsetShell) and `kafka-delete-records.sh`
(org.apache.kafka.tools.DeleteRecordsCommand), kafka-tools 4.1.1, against Pier and against Apache
Kafka 4.1.1: latest, earliest, by timestamp and max-timestamp offsets of records with fixed
timestamps, then records deleted below an offset (and past the end: OFFSET_OUT_OF_RANGE), and the
earliest offsets after; outputs must match after masking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.compat import data
from tests.compat.side_by_side import Ran, SideBySide, assert_same

pytestmark = [pytest.mark.compat]

OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
DELETE = "org.apache.kafka.tools.DeleteRecordsCommand"
RECORDS = 5  # per partition, at BASE_TIMESTAMP_MS + 0..4 s
# --time argument -> the offset of both partitions
TIMES = {
    "-1": RECORDS,  # latest
    "-2": 0,  # earliest
    "-3": RECORDS - 1,  # the record with the largest timestamp
    str(data.BASE_TIMESTAMP_MS + 2500): 3,  # first record at or after the time
    str(data.BASE_TIMESTAMP_MS + 60_000): None,  # after every record: no offset printed
}


def offsets(pair: SideBySide, topic: str, time: str) -> tuple[Ran, Ran]:
    return pair.run(
        "tool", OFFSETS, "--bootstrap-server", "{bootstrap}", "--topic", topic, "--time", time
    )


@pytest.fixture
def topic(side_by_side: SideBySide, topic_name: str) -> str:
    for target in data.targets(side_by_side):
        data.create_topic(target, topic_name, 2, config=data.KEEP_RECORDS)
        data.produce(target, topic_name, 2, RECORDS)
    return topic_name


@pytest.mark.parametrize("time", TIMES)
def test_get_offsets(side_by_side: SideBySide, topic: str, time: str) -> None:
    out = assert_same(*offsets(side_by_side, topic, time), {topic: "<T>"}, sort_lines=True)
    expected = TIMES[time]
    lines = sorted(out.splitlines())
    if expected is None:
        assert lines in ([], ["<T>:0:", "<T>:1:"]), out
    else:
        assert lines == [f"<T>:0:{expected}", f"<T>:1:{expected}"]


def write_json(path: Path, partitions: list[tuple[str, int, int]]) -> str:
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": t, "partition": p, "offset": o} for t, p, o in partitions],
            }
        )
    )
    return str(path)


def test_delete_records(side_by_side: SideBySide, topic: str, tmp_path: Path) -> None:
    names = {topic: "<T>"}
    below = write_json(tmp_path / "below.json", [(topic, 0, 3), (topic, 1, -1)])
    deleted = assert_same(
        *side_by_side.run(
            "tool", DELETE, "--bootstrap-server", "{bootstrap}", "--offset-json-file", below
        ),
        names,
        sort_lines=True,
    )
    assert "partition: <T>-0\tlow_watermark: 3" in deleted
    assert "partition: <T>-1\tlow_watermark: 5" in deleted
    earliest = assert_same(*offsets(side_by_side, topic, "-2"), names, sort_lines=True)
    assert earliest.splitlines() == ["<T>:0:3", "<T>:1:5"]
    past = write_json(tmp_path / "past.json", [(topic, 0, 99)])
    refused = assert_same(
        *side_by_side.run(
            "tool", DELETE, "--bootstrap-server", "{bootstrap}", "--offset-json-file", past
        ),
        names,
    )
    assert (
        "partition: <T>-0\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException"
        in refused
    )
