"""Responses as a list of parts, so record data can go from a segment file to the socket unchanged.

Owns: `FileSegment` (the protocol a file region satisfies: fd, position, size, read) and
`RawResponse` (a body already encoded by hand, possibly with file regions in it). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class FileSegment(Protocol):
    """A byte range of an open file: what fetch sends with sendfile, or reads with pread. A
    sender holds the part itself while it uses `fd` (a log region keeps its file open only while
    held: file_records' `FileHandle`), never the bare number."""

    @property
    def fd(self) -> int: ...

    @property
    def position(self) -> int: ...

    @property
    def size(self) -> int: ...

    def read(self) -> bytes: ...


Part = bytes | bytearray | memoryview | FileSegment


@dataclass(frozen=True, slots=True)
class RawResponse:
    """A hand-encoded response body (header added by the connection)."""

    parts: Sequence[Part]

    @property
    def size(self) -> int:
        return sum(part_size(p) for p in self.parts)


def part_size(part: Part) -> int:
    if isinstance(part, bytes | bytearray | memoryview):
        return len(part)
    return part.size
