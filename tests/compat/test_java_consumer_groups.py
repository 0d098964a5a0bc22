"""`kafka-consumer-groups.sh` (org.apache.kafka.tools.consumer.group.ConsumerGroupCommand,
kafka-tools 4.1.1) against Pier and against Apache Kafka 4.1.1: describe (offsets, state), list,
every reset mode (dry run and execute), delete offsets, delete, on a group whose offsets were
committed by confluent-kafka over records with fixed timestamps; outputs must match."""

from __future__ import annotations

import pytest

from tests.compat import data
from tests.compat.side_by_side import Ran, SideBySide, assert_same

pytestmark = [pytest.mark.compat]

GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
RECORDS = 5  # per partition, at BASE_TIMESTAMP_MS + 0..4 s
# Each reset mode with the new offsets it gives partitions 0 and 1 from committed (3, 2).
RESETS = {
    "--to-earliest": ((), (0, 0)),
    "--to-latest": ((), (5, 5)),
    "--to-current": ((), (3, 2)),
    "--to-offset": (("2",), (2, 2)),
    "--shift-by": (("-1",), (2, 1)),
    "--to-datetime": (("2023-11-14T22:13:22.000",), (2, 2)),
    "--by-duration": (("PT0S",), (5, 5)),
}


def groups(pair: SideBySide, *args: str) -> tuple[Ran, Ran]:
    return pair.run("tool", GROUPS, "--bootstrap-server", "{bootstrap}", *args)


@pytest.fixture
def group(side_by_side: SideBySide, topic_name: str) -> str:
    name = f"{topic_name}-group"
    for target in data.targets(side_by_side):
        data.create_topic(target, topic_name, 2, config=data.KEEP_RECORDS)
        data.produce(target, topic_name, 2, RECORDS)
        data.commit(target, name, {(topic_name, 0): 3, (topic_name, 1): 2})
    return name


def test_describe_and_list(side_by_side: SideBySide, topic_name: str, group: str) -> None:
    names = {topic_name: "<T>", group: "<G>"}
    offsets = assert_same(
        *groups(side_by_side, "--describe", "--group", group), names, sort_lines=True
    )
    assert "<G> <T> 0 3 5 2 - - -" in [" ".join(line.split()) for line in offsets.splitlines()]
    state = assert_same(*groups(side_by_side, "--describe", "--group", group, "--state"), names)
    assert " ".join(state.split()).endswith("- Empty 0")
    pier, kafka = groups(side_by_side, "--list")
    assert group in pier.stdout.splitlines() and group in kafka.stdout.splitlines()


@pytest.mark.parametrize("mode", RESETS)
def test_reset_offsets_dry_run(
    side_by_side: SideBySide, topic_name: str, group: str, mode: str
) -> None:
    names = {topic_name: "<T>", group: "<G>"}
    extra, (p0, p1) = RESETS[mode]
    out = assert_same(
        *groups(side_by_side, "--reset-offsets", "--group", group, "--topic", topic_name, mode,
                *extra, "--dry-run"),
        names,
        sort_lines=True,
    )  # fmt: skip
    rows = {tuple(line.split()) for line in out.splitlines()}
    assert {("<G>", "<T>", "0", str(p0)), ("<G>", "<T>", "1", str(p1))} <= rows, out


def test_reset_execute_delete_offsets_delete(
    side_by_side: SideBySide, topic_name: str, group: str
) -> None:
    names = {topic_name: "<T>", group: "<G>"}
    assert_same(
        *groups(side_by_side, "--reset-offsets", "--group", group, "--topic", f"{topic_name}:1",
                "--shift-by", "2", "--execute"),
        names,
    )  # fmt: skip
    offsets = assert_same(
        *groups(side_by_side, "--describe", "--group", group), names, sort_lines=True
    )
    assert "<G> <T> 1 4 5 1 - - -" in [" ".join(line.split()) for line in offsets.splitlines()]
    deleted = assert_same(
        *groups(side_by_side, "--delete-offsets", "--group", group, "--topic", topic_name),
        names,
        sort_lines=True,
    )
    assert "Request succeeded for deleting offsets from group <G>." in deleted
    assert_same(*groups(side_by_side, "--delete", "--group", group), names)
    pier, kafka = groups(side_by_side, "--describe", "--group", group)
    assert_same(pier, kafka, names)
    assert error_text(pier) == error_text(kafka)


def error_text(ran: Ran) -> str:
    return " ".join(
        line for line in ran.stderr.splitlines() if "Error" in line or "not exist" in line
    )
