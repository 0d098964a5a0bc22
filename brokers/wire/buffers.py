"""Buffers that bytes from a socket are read into, allocated without filling them with zeros.

Owns: `receive_buffer(size)`, a bytearray of `size` bytes whose contents are undefined until
written, and `IMPLEMENTATION` ("native" or "python"). `bytearray(size)` zero-fills its memory
first, and a request read into it then writes every byte again: measured on a broker under 1 KiB
lz4 produce, the fill was 9 % of its CPU samples (docs/benchmarks.md, "Produce requests read as
views"). The native `brokers.wire._buffers` (compiled from `_buffers.c` by `pip install`, see
setup.py) returns the allocator's memory as it is; its pure-Python twin, used when the
extension is not built, is `bytearray(size)`. The memory may hold bytes of an earlier request
(another tenant's), so a caller must never read a byte of it before the socket wrote it: the
frame reader hands out a frame only once every byte of it arrived, and a streamed chunk only up
to what was read. Thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable


def _load() -> Callable[[int], bytearray] | None:
    try:
        from brokers.wire._buffers import uninitialized
    except ImportError:  # a checkout that was never installed: the twin (tests assert native)
        return None
    return uninitialized


_UNINITIALIZED = _load()
IMPLEMENTATION = "python" if _UNINITIALIZED is None else "native"


def receive_buffer(size: int) -> bytearray:
    """`size` bytes to be overwritten by a read before anything reads them."""
    if _UNINITIALIZED is None:
        return bytearray(size)
    return _UNINITIALIZED(size)
