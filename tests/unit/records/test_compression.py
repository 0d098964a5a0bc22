"""Codecs by Kafka id: round trips, other clients' framings, corrupt data, decompression bombs."""

from __future__ import annotations

import contextlib
import gzip
import random
import struct
import zlib

import cramjam
import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from brokers.records.compression import (
    CODEC_NAMES,
    GZIP,
    LZ4,
    MAX_FRAMES,
    NONE,
    SNAPPY,
    ZSTD,
    compress,
    decompress,
)
from brokers.records.errors import (
    CorruptRecordError,
    DecodeBudgetError,
    DecompressedSizeError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)
from brokers.records.snappy_framing import XERIAL_HEADER, XERIAL_MAGIC

pytestmark = pytest.mark.unit

CODECS = sorted(CODEC_NAMES)
COMPRESSING = [GZIP, SNAPPY, LZ4, ZSTD]
JSONISH = b"".join(
    b'{"user": %d, "event": "click", "page": "/p/%d"}\n' % (i, i % 97) for i in range(3000)
)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(CODECS), st.binary(max_size=3000))
def test_round_trip(codec: int, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", COMPRESSING)
def test_round_trip_large_and_compressing(codec: int) -> None:
    data = JSONISH * 30  # several blocks of every framing
    packed = compress(codec, data)
    assert len(packed) < len(data) // 3
    assert decompress(codec, memoryview(packed)) == data


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec(codec: int) -> None:
    with pytest.raises(UnsupportedCompressionError):
        compress(codec, b"x")
    with pytest.raises(UnsupportedCompressionError):
        decompress(codec, b"x")


@pytest.mark.parametrize("codec", COMPRESSING)
@pytest.mark.parametrize("garbage", [b"", b"\x07", b"not compressed at all, just text" * 3])
def test_garbage_is_corrupt(codec: int, garbage: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(codec, garbage)


@pytest.mark.parametrize("codec", COMPRESSING)
def test_truncated_is_corrupt(codec: int) -> None:
    packed = compress(codec, JSONISH)
    with pytest.raises(CorruptRecordError):
        decompress(codec, packed[: len(packed) - 7])


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(COMPRESSING), st.binary(max_size=200), st.data())
def test_mangled_data_raises_only_corrupt(codec: int, data: bytes, draw: st.DataObject) -> None:
    packed = bytearray(compress(codec, data))
    index = draw.draw(st.integers(0, len(packed) - 1))
    packed[index] ^= draw.draw(st.integers(1, 255))
    with contextlib.suppress(CorruptRecordError):
        decompress(codec, bytes(packed))


@pytest.mark.parametrize("codec", COMPRESSING)
def test_bomb_is_refused(codec: int) -> None:
    packed = compress(codec, bytes(4 * 1024 * 1024))
    assert decompress(codec, packed, max_size=4 * 1024 * 1024) == bytes(4 * 1024 * 1024)
    # Too large, not corrupt: the produce path answers MESSAGE_TOO_LARGE.
    with pytest.raises(DecompressedSizeError):
        decompress(codec, packed, max_size=4 * 1024 * 1024 - 1)
    with pytest.raises(DecompressedSizeError):
        decompress(codec, packed, max_size=1000)


@pytest.mark.parametrize(
    ("codec", "empty"),
    [
        (GZIP, gzip.compress(b"", mtime=0)),
        (LZ4, lz4.frame.compress(b"", block_linked=False)),
        (ZSTD, zstandard.ZstdCompressor().compress(b"")),
    ],
    ids=["gzip", "lz4", "zstd"],
)
def test_at_most_sixteen_frames_or_members(codec: int, empty: bytes) -> None:
    # Every frame is a Python step copying the rest of the input: 10^5 empty frames in 1 MiB
    # took seconds. Clients write one.
    assert decompress(codec, empty * MAX_FRAMES) == b""
    with pytest.raises(CorruptRecordError, match="more than 16"):
        decompress(codec, empty * (MAX_FRAMES + 1))
    with pytest.raises(CorruptRecordError, match="more than 16"):
        decompress(codec, empty * (1_000_000 // len(empty)))


def test_snappy_block_budget() -> None:
    packed = compress(SNAPPY, JSONISH * 20)  # several 32 KiB blocks
    assert decompress(SNAPPY, packed, max_blocks=100) == JSONISH * 20
    with pytest.raises(DecodeBudgetError):
        decompress(SNAPPY, packed, max_blocks=2)


def test_codec_none_copies() -> None:
    assert decompress(NONE, memoryview(b"abc")) == b"abc"
    assert compress(NONE, bytearray(b"abc")) == b"abc"


# --- snappy: xerial framing (Java, kafka-python, aiokafka) and raw (librdkafka) ---


def test_snappy_writes_xerial_framing_like_java() -> None:
    packed = compress(SNAPPY, JSONISH)
    assert packed.startswith(XERIAL_HEADER)
    assert XERIAL_MAGIC == b"\x82SNAPPY\x00"
    (first_block,) = struct.unpack_from(">i", packed, 16)
    # 32 KiB of input per block, as snappy-java's SnappyOutputStream writes.
    assert len(cramjam.snappy.decompress_raw(packed[20 : 20 + first_block])) == 32 * 1024
    assert kafka_codec.snappy_decode(packed) == JSONISH


def test_snappy_reads_kafka_python_xerial() -> None:
    packed = kafka_codec.snappy_encode(JSONISH, xerial_compatible=True)
    assert packed.startswith(XERIAL_MAGIC)
    assert decompress(SNAPPY, packed) == JSONISH


def test_snappy_reads_raw_as_librdkafka_writes_it() -> None:
    assert decompress(SNAPPY, snappy.compress(JSONISH)) == JSONISH
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(b"short"))) == b"short"


def test_snappy_xerial_block_overrun_is_corrupt() -> None:
    packed = XERIAL_HEADER + struct.pack(">i", 1000) + b"\x05abcde"
    with pytest.raises(CorruptRecordError):
        decompress(SNAPPY, packed)
    with pytest.raises(CorruptRecordError):
        decompress(SNAPPY, XERIAL_HEADER + struct.pack(">i", -5) + b"\x05abcde")


# --- gzip ---


def test_gzip_reads_gzip_module_and_concatenated_members() -> None:
    assert decompress(GZIP, gzip.compress(b"abc")) == b"abc"
    assert decompress(GZIP, gzip.compress(b"abc") + gzip.compress(b"def")) == b"abcdef"
    assert compress(GZIP, b"abc")[:2] == b"\x1f\x8b"  # RFC 1952 magic: Java reads only gzip


def test_gzip_trailing_garbage_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        decompress(GZIP, gzip.compress(b"abc") + b"junk")


def test_gzip_accepts_zlib_stream() -> None:
    assert decompress(GZIP, zlib.compress(b"abc")) == b"abc"


# --- lz4: frame format, independent blocks (KIP-57) ---


def test_lz4_frame_uses_independent_blocks_and_no_content_size() -> None:
    packed = compress(LZ4, JSONISH)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic, little endian
    flags = packed[4]
    assert flags & 0x20, "block independence must be set: Kafka's Java reader needs it"
    assert not flags & 0x08, "no content size, as Java writes it"
    assert kafka_codec.lz4_decode(packed) == JSONISH


def test_lz4_reads_linked_blocks_and_content_size() -> None:
    data = JSONISH * 30
    packed = lz4.frame.compress(data, block_linked=True, store_size=True, content_checksum=True)
    assert decompress(LZ4, packed) == data


def test_lz4_concatenated_frames() -> None:
    assert decompress(LZ4, compress(LZ4, b"ab") + compress(LZ4, b"cd")) == b"abcd"


# --- zstd ---


def test_zstd_reads_streamed_frames_without_content_size() -> None:
    # zstd-jni's ZstdOutputStream, which the Java client uses, writes no content size.
    data = JSONISH * 30
    packed = zstandard.ZstdCompressor(write_content_size=False, write_checksum=True).compress(data)
    assert zstandard.frame_content_size(packed) == -1
    assert decompress(ZSTD, packed) == data
    assert decompress(ZSTD, packed, max_size=len(data)) == data
    with pytest.raises(DecompressedSizeError):
        decompress(ZSTD, packed, max_size=len(data) - 1)


def test_zstd_reads_multiple_frames_and_skips_skippable_ones() -> None:
    skippable = struct.pack("<II", 0x184D2A53, 3) + b"xyz"
    packed = compress(ZSTD, b"ab") + skippable + compress(ZSTD, b"cd")
    assert decompress(ZSTD, packed) == b"abcd"


def test_zstd_declared_size_beyond_limit_is_refused_before_decoding() -> None:
    packed = compress(ZSTD, bytes(10_000))
    assert zstandard.frame_content_size(packed) == 10_000
    with pytest.raises(DecompressedSizeError, match="limit"):
        decompress(ZSTD, packed, max_size=9_999)


def test_zstd_lying_content_size_is_corrupt() -> None:
    packed = bytearray(zstandard.ZstdCompressor().compress(b"hello"))
    # Single-segment frame with a 1-byte content size field right after the descriptor.
    assert packed[4] & 0x20 and packed[4] >> 6 == 0
    packed[5] = 200
    with pytest.raises(CorruptRecordError):
        decompress(ZSTD, bytes(packed))


def test_zstd_trailing_garbage_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        decompress(ZSTD, compress(ZSTD, b"abc") + b"junk")


# --- compression bounded by the size the result may have (re-encoding to a topic's codec) ---


@pytest.mark.parametrize("codec", CODECS)
def test_bounded_compression_round_trips(codec: int) -> None:
    data = JSONISH * 40  # over 1 MiB: several steps
    packed = compress(codec, data, max_size=len(data) + 1024)
    assert decompress(codec, packed) == data
    assert compress(codec, b"", max_size=100) == compress(codec, b"")


@pytest.mark.parametrize("codec", CODECS)
def test_bounded_compression_stops_past_the_limit(codec: int) -> None:
    incompressible = random.Random(5).randbytes(1536 * 1024)
    with pytest.raises(RecordTooLargeError, match="limit"):
        compress(codec, incompressible, max_size=64 * 1024)


def test_bounded_lz4_keeps_kafkas_frame_format() -> None:
    packed = compress(LZ4, JSONISH * 40, max_size=10**8)
    flags = packed[4]
    assert flags & 0x20 and not flags & 0x08  # independent blocks, no content size
    assert kafka_codec.lz4_decode(packed) == JSONISH * 40
