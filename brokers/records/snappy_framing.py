"""Snappy for record batches: xerial (snappy-java) framing as Kafka's Java client writes it, and raw.

Owns: `compress_xerial` (and `xerial_block`, one framed block), `decompress_snappy`. Kafka's Java client wraps snappy in snappy-java's
stream format: the 16-byte header `\\x82SNAPPY\\x00` + version 1 + compatible version 1 (int32 BE),
then blocks of `int32 BE length + raw snappy` holding up to 32 KiB of input each. librdkafka reads
that framing (and raw snappy) but writes raw snappy; kafka-python and aiokafka write xerial. So we
read both and write xerial, which every client and Kafka itself read.
Every block's uncompressed length is read from its snappy preamble before anything is allocated,
which is how the `max_size` guard works (DecompressedSizeError). Pure functions on cramjam;
thread-safe.
"""

from __future__ import annotations

import struct

import cramjam
from typing_extensions import Buffer

from brokers.records.errors import CorruptRecordError, DecodeBudgetError, DecompressedSizeError

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default block size, as the Java client uses
_BLOCK_LENGTH = struct.Struct(">i")

_raw_compress = cramjam.snappy.compress_raw
_raw_decompress = cramjam.snappy.decompress_raw
_raw_length = cramjam.snappy.decompress_raw_len


def compress_xerial(data: Buffer) -> bytes:
    view = memoryview(data)
    if not view:
        # A header-only stream is too short for librdkafka's framing test; raw is read by all.
        return bytes(_raw_compress(view))
    parts: list[bytes] = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        parts.append(xerial_block(view[start : start + XERIAL_BLOCK_SIZE]))
    return b"".join(parts)


def xerial_block(chunk: Buffer) -> bytes:
    """One xerial block: int32 BE length + raw snappy of `chunk` (at most 32 KiB of input)."""
    block = bytes(_raw_compress(chunk))
    return _BLOCK_LENGTH.pack(len(block)) + block


def is_xerial(view: memoryview) -> bool:
    return len(view) >= len(XERIAL_HEADER) and view[: len(XERIAL_MAGIC)] == XERIAL_MAGIC


def decompress_snappy(data: Buffer, max_size: int, max_blocks: int | None = None) -> bytes:
    """Raw or xerial snappy; at most `max_size` bytes out and `max_blocks` xerial blocks."""
    view = memoryview(data)
    try:
        if is_xerial(view):
            return _decompress_xerial(view, max_size, max_blocks)
        return _decompress_raw(view, max_size)
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"invalid snappy data: {exc}") from exc


def _decompress_raw(view: memoryview, max_size: int) -> bytes:
    length = _raw_length(view)
    if length > max_size:
        raise DecompressedSizeError(f"snappy data expands to {length} bytes, limit {max_size}")
    return bytes(_raw_decompress(view))


def _decompress_xerial(view: memoryview, max_size: int, max_blocks: int | None) -> bytes:
    parts: list[bytes] = []
    end = len(view)
    pos = len(XERIAL_HEADER)
    budget = max_size
    while pos < end:
        if max_blocks is not None and len(parts) == max_blocks:
            raise DecodeBudgetError(f"xerial snappy data holds more than {max_blocks} blocks")
        if end - pos < 4:
            raise CorruptRecordError(f"xerial snappy block length truncated at {pos}")
        (length,) = _BLOCK_LENGTH.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CorruptRecordError(f"xerial snappy block of {length} bytes at {pos} overruns")
        block = _decompress_raw(view[pos : pos + length], budget)
        budget -= len(block)
        parts.append(block)
        pos += length
    return b"".join(parts)
