"""A fetch region never sends another file's bytes through a reused descriptor number (security).

A region is handed to a connection, waits there (behind an answer its client does not read yet),
and meanwhile its segment is deleted (`file.delete.delay.ms` passed: `FileRecords.delete`, as
`LogSegments.delete_expired_files` does) and another file is opened — on Linux `open` takes the
lowest free number, so it gets the number the segment's descriptor had if that was closed. Then
the client reads: it must get the segment's own bytes, or a closed connection; never the other
file's (another tenant's). Every real send path: the writer thread (sendfile, and pread for a
small region), and the transport on asyncio's loop and on uvloop (sendfile; a small region is
copied with pread at once). Real files (`FileRecords`), a real `Connection` on a real socketpair,
real loops and the real writer thread. Also: the region's file closes once the last region of a
deleted segment is dropped (no descriptor leak).
"""

from __future__ import annotations

import asyncio
import os
import struct
from pathlib import Path

import pytest

from brokers.log.file_records import FileRecords
from brokers.server.answer_writer import AnswerWriter
from tests.polling import wait_until_async
from tests.unit.log.partition_helpers import held_by_process
from tests.unit.server.echo_connection import Echo, frame, run_on, serve

pytestmark = pytest.mark.unit

FILL = 3 * 1024 * 1024  # an answer the client does not read yet: the socket fills, the region waits
SENDFILE_REGION = 256 * 1024  # sent with sendfile on every path
SMALL_REGION = 16 * 1024  # copied with pread (below the paths' 64 KiB sendfile threshold)
FINISH_S = 30.0  # bounds a hang only
REQUESTS = (b"fill-request", b"file-request", b"next-request")
CASES = [
    pytest.param(path, size, id=f"{path}-{name}")
    for path in ("thread", "asyncio", "uvloop")
    for name, size in (("sendfile", SENDFILE_REGION), ("pread", SMALL_REGION))
]


def _segment(directory: Path, name: str, content: bytes) -> FileRecords:
    records = FileRecords.open(directory / name, create=True)
    records.append([content])
    return records


def test_a_region_reads_its_own_file_after_its_segment_is_deleted(tmp_path: Path) -> None:
    mine, theirs = os.urandom(SMALL_REGION), os.urandom(SMALL_REGION)
    segment = _segment(tmp_path, "mine.log", mine)
    region = segment.region(0, len(mine))
    segment.delete()
    other = _segment(tmp_path, "theirs.log", theirs)  # takes the lowest free descriptor number
    try:
        assert region.read() == mine
    finally:
        other.close()


def test_the_file_closes_when_the_last_region_of_a_deleted_segment_is_dropped(
    tmp_path: Path,
) -> None:
    segment = _segment(tmp_path, "mine.log", b"m" * 1000)
    region = segment.region(0, 1000)
    segment.delete()
    assert held_by_process(tmp_path / "mine.log")  # the region keeps it open
    del region
    assert not held_by_process(tmp_path / "mine.log")


def test_a_segment_closed_with_no_region_out_closes_its_file_at_once(tmp_path: Path) -> None:
    segment = _segment(tmp_path, "mine.log", b"m" * 1000)
    segment.region(0, 1000).read()
    segment.close()
    assert not held_by_process(tmp_path / "mine.log")


async def _queued(path: str, echo: Echo) -> bool:
    """Whether the region waits in the connection and nothing but the send path holds it: on
    the writer thread the next request was answered too (the connection dropped its reply); on
    the transport the next request waits for the region's send."""
    return echo.file_answered.is_set() and (path != "thread" or echo.correlation == len(REQUESTS))


def _received_region(content: bytes, answer: bytes) -> bytes:
    """The region answer's body (after its size and correlation id)."""
    size, _correlation = struct.unpack(">ii", answer[:8])
    assert size == 4 + len(content)
    return answer[8:]


@pytest.mark.parametrize(("path", "size"), CASES)
def test_a_queued_region_never_sends_the_file_that_reused_its_number(
    tmp_path: Path, path: str, size: int
) -> None:
    mine, theirs = os.urandom(size), os.urandom(size)

    async def scenario(writer: AnswerWriter | None) -> bytes:
        segment = _segment(tmp_path, "mine.log", mine)
        echo = Echo(region=segment.region(0, size), fill_bytes=FILL)
        served = await serve(echo, writer)
        other: FileRecords | None = None
        try:
            served.client.write(b"".join(frame(r) for r in REQUESTS))
            await wait_until_async(lambda: _queued(path, echo), what="region queued")
            segment.delete()  # the delete delay passed while the answer waited
            other = _segment(tmp_path, "theirs.log", theirs)  # reuses a freed number
            async with asyncio.timeout(FINISH_S):
                await served.reader.readexactly(8 + FILL)
                try:
                    return await served.reader.readexactly(8 + size)
                except asyncio.IncompleteReadError as exc:
                    return exc.partial  # a closed connection: allowed, if nothing foreign came
        finally:
            served.client.close()
            await asyncio.wait_for(served.task, FINISH_S)
            if other is not None:
                other.close()

    answer: bytes = run_on(path, scenario)
    assert not held_by_process(tmp_path / "mine.log")  # let go once sent (on the writer thread)
    if len(answer) < 8 + size:  # the connection was closed: what came must be our own bytes
        assert mine.startswith(answer[8:])
        return
    body = _received_region(mine, answer)
    sent = (
        "theirs (a reused descriptor number)" if body == theirs else "mine" if body == mine else "?"
    )
    assert sent == "mine"
