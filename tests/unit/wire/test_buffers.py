"""Receive buffers without the zero fill: the native allocator is in use, and it gives writable
bytearrays of exactly the size asked, like its twin `bytearray(size)`."""

from __future__ import annotations

import pytest

from brokers.wire import buffers
from brokers.wire.frame_reader import FrameReader

pytestmark = pytest.mark.unit


def test_native_allocator_is_in_use() -> None:
    assert buffers.IMPLEMENTATION == "native", (
        "brokers.wire._buffers did not import: `pip install -e .` must build _buffers.c "
        "(setup.py); without it every request buffer is zero-filled first"
    )


@pytest.mark.parametrize("size", [0, 1, 4096, 1 << 20])
def test_a_buffer_of_the_size_asked_that_takes_every_byte(size: int) -> None:
    buffer = buffers.receive_buffer(size)
    assert type(buffer) is bytearray and len(buffer) == size
    pattern = bytes(range(256)) * (size // 256 + 1)
    memoryview(buffer)[:] = pattern[:size]
    assert buffer == pattern[:size]


def test_a_negative_size_is_refused() -> None:
    with pytest.raises(ValueError):
        buffers.receive_buffer(-1)


def test_a_frame_read_in_pieces_holds_exactly_the_bytes_sent() -> None:
    """Reused heap memory under the frame's buffer never shows: each frame comes out only once
    the socket wrote all of it."""
    reader = FrameReader(limit=1 << 20)
    bodies = [bytes([n]) * (100_000 + n) for n in range(1, 6)]
    stream = b"".join(len(b).to_bytes(4, "big") + b for b in bodies)
    frames = []
    for start in range(0, len(stream), 7_919):
        frames += [bytes(f) for f in reader.feed(stream[start : start + 7_919])]
    assert frames == bodies
