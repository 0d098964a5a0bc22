"""Zstandard frame walking: where each frame ends and how much it can decompress to, before decoding.

Owns: `walk_frames(view) -> list[ZstdFrame]`. The decompressors preallocate their output (the
declared content size, or the caller's maximum when a frame has none, as Java's zstd-jni stream
writes it), and a truncated stream decodes "successfully" to a prefix. Walking the block headers
(RFC 8878 §3.1) first proves every frame is complete and gives a tight upper bound on its output
(raw and RLE blocks exactly, compressed blocks at most min(window, 128 KiB)), so the decoder can
be given a small exact buffer and decompression bombs are refused without allocating.
Pure functions; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from brokers.records.errors import CorruptRecordError

ZSTD_MAGIC = 0xFD2FB528
_SKIPPABLE_MASK = 0xFFFFFFF0
_SKIPPABLE_MAGIC = 0x184D2A50
_MAX_BLOCK_SIZE = 128 * 1024
_DICT_ID_SIZES = (0, 1, 2, 4)
_CONTENT_SIZE_SIZES = (0, 2, 4, 8)
_RAW, _RLE, _COMPRESSED = 0, 1, 2


@dataclass(frozen=True, slots=True)
class ZstdFrame:
    start: int
    end: int
    max_output: int  # exact when content_size is declared, otherwise an upper bound
    content_size: int | None


def walk_frames(view: memoryview) -> list[ZstdFrame]:
    """Return the data frames of a zstd stream (skippable frames dropped); raise on bad structure."""
    frames: list[ZstdFrame] = []
    pos = 0
    end = len(view)
    while pos < end:
        magic = _le(view, pos, 4)
        if magic & _SKIPPABLE_MASK == _SKIPPABLE_MAGIC:
            pos += 8 + _le(view, pos + 4, 4)
            if pos > end:
                raise CorruptRecordError("zstd skippable frame overruns the data")
            continue
        if magic != ZSTD_MAGIC:
            raise CorruptRecordError(f"not a zstd frame at {pos} (magic {magic:#010x})")
        frame = _walk_frame(view, pos)
        frames.append(frame)
        pos = frame.end
    if not frames:
        raise CorruptRecordError("zstd data holds no frame")
    return frames


def _walk_frame(view: memoryview, start: int) -> ZstdFrame:
    descriptor = _le(view, start + 4, 1)
    if descriptor & 0x08:
        raise CorruptRecordError("zstd frame header has the reserved bit set")
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
        raise CorruptRecordError("zstd frame truncated")
    if content_size is not None:
        if content_size > bound:
            raise CorruptRecordError(f"zstd frame declares {content_size} bytes, blocks hold less")
        bound = content_size
    return ZstdFrame(start, pos, bound, content_size)


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
            raise CorruptRecordError("zstd block of the reserved type")
        if pos > end:
            raise CorruptRecordError("zstd block truncated")
        if header & 0x01:
            return pos, bound


def _window_size(descriptor: int) -> int:
    base = 1 << (10 + (descriptor >> 3))
    return base + (base >> 3) * (descriptor & 0x07)


def _le(view: memoryview, pos: int, size: int) -> int:
    if pos + size > len(view):
        raise CorruptRecordError("zstd frame header truncated")
    return int.from_bytes(view[pos : pos + size], "little")
