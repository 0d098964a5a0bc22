"""Zstandard frame walking: where each frame ends and how much it can decompress to, before decoding.

Owns: `walk_frames(view) -> list[ZstdFrame]` and its pure-Python twin `walk_frames_py` (the
native `_native.zstd_frames` runs when built; tests compare the two). The decompressors
preallocate their output (the declared content size, or the caller's maximum when a frame has
none, as Java's zstd-jni stream writes it), and a truncated stream decodes "successfully" to a
prefix. Walking the block headers (RFC 8878 §3.1) first proves every frame is complete and gives a
tight upper bound on its output (raw and RLE blocks exactly, compressed blocks at most min(window,
128 KiB)), so the decoder can be given a small exact buffer and decompression bombs are refused
without allocating. A crafted stream of tiny blocks makes this a loop of ~4 bytes a step: that is
why it is native. Pure functions; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from brokers.records.errors import CorruptRecordError
from brokers.records.native import NATIVE

ZSTD_MAGIC = 0xFD2FB528
_SKIPPABLE_MASK = 0xFFFFFFF0
_SKIPPABLE_MAGIC = 0x184D2A50
_MAX_BLOCK_SIZE = 128 * 1024
_DICT_ID_SIZES = (0, 1, 2, 4)
_CONTENT_SIZE_SIZES = (0, 2, 4, 8)
_RAW, _RLE, _COMPRESSED = 0, 1, 2

# Errors, as _native.c numbers them.
HEADER_TRUNCATED, SKIPPABLE_OVERRUN, BAD_MAGIC, RESERVED_BIT, RESERVED_BLOCK = 1, 2, 3, 4, 5
BLOCK_TRUNCATED, FRAME_TRUNCATED, CONTENT_SIZE, NO_FRAME = 6, 7, 8, 9
_MESSAGES = {
    HEADER_TRUNCATED: "zstd frame header truncated",
    SKIPPABLE_OVERRUN: "zstd skippable frame overruns the data",
    BAD_MAGIC: "not a zstd frame at {pos} (magic {value:#010x})",
    RESERVED_BIT: "zstd frame header has the reserved bit set",
    RESERVED_BLOCK: "zstd block of the reserved type",
    BLOCK_TRUNCATED: "zstd block truncated",
    FRAME_TRUNCATED: "zstd frame truncated",
    CONTENT_SIZE: "zstd frame declares {value} bytes, blocks hold less",
    NO_FRAME: "zstd data holds no frame",
}

FrameTuple = tuple[int, int, int, int | None]  # start, end, max_output, content_size
FrameWalk = tuple[list[FrameTuple], int, int, int]  # frames, error, position, value


@dataclass(frozen=True, slots=True)
class ZstdFrame:
    start: int
    end: int
    max_output: int  # exact when content_size is declared, otherwise an upper bound
    content_size: int | None


def walk_frames(view: memoryview) -> list[ZstdFrame]:
    """Return the data frames of a zstd stream (skippable frames dropped); raise on bad structure."""
    walked = NATIVE.zstd_frames(view) if NATIVE is not None else walk_frames_py(view)
    frames, error, pos, value = walked
    if error:
        raise CorruptRecordError(_MESSAGES[error].format(pos=pos, value=value))
    return [ZstdFrame(*frame) for frame in frames]


class _FrameError(Exception):
    def __init__(self, error: int, value: int = 0) -> None:
        self.error = error
        self.value = value


def walk_frames_py(view: memoryview) -> FrameWalk:
    """What `_native.zstd_frames` returns, computed in Python."""
    frames: list[FrameTuple] = []
    pos = 0
    end = len(view)
    try:
        while pos < end:
            magic = _le(view, pos, 4)
            if magic & _SKIPPABLE_MASK == _SKIPPABLE_MAGIC:
                pos += 8 + _le(view, pos + 4, 4)
                if pos > end:
                    return frames, SKIPPABLE_OVERRUN, pos, 0
                continue
            if magic != ZSTD_MAGIC:
                return frames, BAD_MAGIC, pos, magic
            frame = _walk_frame(view, pos)
            frames.append(frame)
            pos = frame[1]
    except _FrameError as exc:
        return frames, exc.error, pos, exc.value
    return frames, 0 if frames else NO_FRAME, pos, 0


def _walk_frame(view: memoryview, start: int) -> FrameTuple:
    descriptor = _le(view, start + 4, 1)
    if descriptor & 0x08:
        raise _FrameError(RESERVED_BIT)
    single_segment = bool(descriptor & 0x20)
    pos = start + 5
    window = 0
    if not single_segment:
        window = _window_size(_le(view, pos, 1))
        pos += 1
    pos += _DICT_ID_SIZES[descriptor & 0x03]
    size_len = _CONTENT_SIZE_SIZES[descriptor >> 6] or (1 if single_segment else 0)
    content_size = _le(view, pos, size_len) if size_len else None
    if content_size is not None and size_len == 2:
        content_size += 256  # RFC 8878: the 2-byte field is offset by 256
    pos += size_len
    if single_segment:
        window = content_size or 0
    pos, bound = _walk_blocks(view, pos, min(window, _MAX_BLOCK_SIZE))
    if descriptor & 0x04:
        pos += 4  # content checksum
    if pos > len(view):
        raise _FrameError(FRAME_TRUNCATED)
    if content_size is not None:
        if content_size > bound:
            raise _FrameError(CONTENT_SIZE, content_size)
        bound = content_size
    return start, pos, bound, content_size


def _walk_blocks(view: memoryview, pos: int, block_max: int) -> tuple[int, int]:
    bound = 0
    end = len(view)
    while True:
        header = _le(view, pos, 3)
        block_type = (header >> 1) & 0x03
        block_size = header >> 3
        pos += 3
        if block_type == _RAW:
            pos += block_size
            bound += block_size
        elif block_type == _RLE:
            pos += 1
            bound += block_size
        elif block_type == _COMPRESSED:
            pos += block_size
            bound += block_max
        else:
            raise _FrameError(RESERVED_BLOCK)
        if pos > end:
            raise _FrameError(BLOCK_TRUNCATED)
        if header & 0x01:
            return pos, bound


def _window_size(descriptor: int) -> int:
    base = 1 << (10 + (descriptor >> 3))
    return base + (base >> 3) * (descriptor & 0x07)


def _le(view: memoryview, pos: int, size: int) -> int:
    if pos + size > len(view):
        raise _FrameError(HEADER_TRUNCATED)
    return int.from_bytes(view[pos : pos + size], "little")
