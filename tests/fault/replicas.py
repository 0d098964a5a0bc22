"""Replica comparison for fault tests: after faults heal, every replica holds identical batches.

Owns: reading the batch headers of a replica straight from its data dir's segment files (Kafka's
layout: `<log.dir>/<topic>-<partition>/<base offset>.log`), checking each batch's stored CRC32C
against its bytes, and comparing (base offset, last offset, CRC, partition leader epoch) of every
batch across the replicas of every partition. The leader epoch is outside the CRC (the broker
stamps it), so it is compared on its own: a follower that copied a batch from a stale leader
would differ there even with equal CRCs (KIP-101). Files may be read while brokers run: a batch
still being written at a segment's tail is left out, and `assert_replicas_identical` polls until
the replicas agree (followers catch up) or its deadline passes (`tests.polling.wait_until`).
Blocking; any thread.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from brokers.records.batch import LOG_OVERHEAD, PREFIX, iter_headers, verify_crc
from brokers.records.errors import CorruptRecordError
from tests.polling import wait_until

_PARTITION_DIR = re.compile(r"(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>[0-9]+)")
_SEGMENT = re.compile(r"[0-9]{20}\.log")


@dataclass(frozen=True, slots=True)
class BatchSummary:
    base_offset: int
    last_offset: int
    crc: int
    leader_epoch: int


Replica = tuple[str, int]  # topic, partition


def _complete_prefix(data: bytes) -> bytes:
    """The bytes of the whole batches at the start of `data` (a tail being written is cut)."""
    pos = 0
    while pos + PREFIX.size <= len(data):
        _, length = PREFIX.unpack_from(data, pos)
        if length <= 0 or pos + LOG_OVERHEAD + length > len(data):
            break
        pos += LOG_OVERHEAD + length
    return data[:pos]


def replica_batches(partition_dir: Path) -> list[BatchSummary]:
    """Every complete batch of one replica, in offset order; CorruptRecordError on a bad CRC."""
    batches: list[BatchSummary] = []
    for segment in sorted(p for p in partition_dir.iterdir() if _SEGMENT.fullmatch(p.name)):
        data = _complete_prefix(segment.read_bytes())
        for pos, header in iter_headers(data):
            verify_crc(data, pos, header)
            batches.append(
                BatchSummary(
                    header.base_offset,
                    header.last_offset,
                    header.crc,
                    header.partition_leader_epoch,
                )
            )
    return batches


def hosted_partitions(data_dir: Path) -> set[Replica]:
    """The partitions whose replica lives in `data_dir` (directories pending deletion skipped)."""
    if not data_dir.is_dir():
        return set()
    found: set[Replica] = set()
    for child in data_dir.iterdir():
        match = _PARTITION_DIR.fullmatch(child.name)
        if child.is_dir() and match is not None:
            found.add((match["topic"], int(match["partition"])))
    return found


def replica_differences(
    data_dirs: Mapping[int, Path], topics: Collection[str] | None = None
) -> list[str]:
    """What differs between the replicas of each partition (empty when all are identical)."""
    hosts: dict[Replica, list[int]] = {}
    for broker, data_dir in sorted(data_dirs.items()):
        for replica in hosted_partitions(data_dir):
            if topics is None or replica[0] in topics:
                hosts.setdefault(replica, []).append(broker)
    differences: list[str] = []
    for (topic, partition), brokers in sorted(hosts.items()):
        logs = {b: replica_batches(data_dirs[b] / f"{topic}-{partition}") for b in brokers}
        reference_broker = brokers[0]
        for broker in brokers[1:]:
            if logs[broker] != logs[reference_broker]:
                differences.append(
                    f"{topic}-{partition}: broker {broker} "
                    f"{_describe(logs[broker], logs[reference_broker])} "
                    f"vs broker {reference_broker}"
                )
    return differences


def _describe(batches: list[BatchSummary], reference: list[BatchSummary]) -> str:
    for index, (ours, theirs) in enumerate(zip(batches, reference, strict=False)):
        if ours != theirs:
            return f"batch #{index} {ours} != {theirs}"
    return f"has {len(batches)} batches, reference has {len(reference)}"


def assert_replicas_identical(
    data_dirs: Mapping[int, Path],
    topics: Collection[str] | None = None,
    *,
    expect: Iterable[Replica] = (),
    timeout: float = 60.0,
) -> None:
    """Poll until every partition's replicas (optionally only `topics`') hold identical batches.

    `expect` names partitions that must be present and non-empty on every broker of `data_dirs`,
    so a comparison of nothing cannot pass.
    """
    expected = list(expect)
    problems: list[str] = []

    def identical() -> bool:
        problems[:] = _missing(data_dirs, expected)
        try:
            problems.extend(replica_differences(data_dirs, topics))
        except CorruptRecordError as exc:  # a tail being written, or a real corruption: reported
            problems.append(f"corrupt batch: {exc}")
        return not problems

    try:
        wait_until(identical, what="identical replicas", timeout=timeout, interval=0.2)
    except AssertionError as timed_out:
        raise AssertionError("replicas differ:\n" + "\n".join(problems)) from timed_out


def _missing(data_dirs: Mapping[int, Path], expected: list[Replica]) -> list[str]:
    problems: list[str] = []
    for broker, data_dir in sorted(data_dirs.items()):
        for topic, partition in expected:
            path = data_dir / f"{topic}-{partition}"
            if not path.is_dir() or not replica_batches(path):
                problems.append(f"{topic}-{partition}: no batches on broker {broker}")
    return problems
