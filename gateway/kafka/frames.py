"""Frames on the gateway's sockets: the reader (brokers/wire/frame_reader.py, shared with the
broker) and writing frames made of many buffers.

Owns: `write_parts` (a frame of many parts in one gathering `writev` where the socket takes it),
`plain_fd`, `raise_buffer`, `unsent`. Re-exports `FrameReader` and its constants for the
gateway's modules. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Sequence
from typing import TypeVar, cast

from brokers.wire.frame_reader import (
    MIN_FRAME,
    SCRATCH_BYTES,
    STREAM_CHUNK_BYTES,
    FrameReader,
    FrameTooLargeError,
    StreamTo,
)

__all__ = [
    "MIN_FRAME",
    "SCRATCH_BYTES",
    "STREAM_CHUNK_BYTES",
    "FrameReader",
    "FrameTooLargeError",
    "StreamTo",
    "plain_fd",
    "raise_buffer",
    "unsent",
    "write_parts",
]
_COALESCE = 16 * 1024  # parts below this are joined before writing; larger ones go as they are
_IOV_MAX = 1024  # buffers per writev (Linux's IOV_MAX)
Buffer = bytes | bytearray | memoryview
AnyBuffer = TypeVar("AnyBuffer", bound=Buffer)


def raise_buffer(sock: socket.socket, option: int, size: int) -> None:
    """Raise a socket buffer (`SO_SNDBUF`/`SO_RCVBUF`) to `size`, never lower it; a refusal is
    not an error (the kernel's autotuning stays)."""
    try:
        if sock.getsockopt(socket.SOL_SOCKET, option) < size:
            sock.setsockopt(socket.SOL_SOCKET, option, size)
    except OSError:
        pass


def write_parts(transport: asyncio.WriteTransport, parts: Sequence[Buffer]) -> None:
    """Write a frame made of parts. While nothing is queued in the transport, the parts go to a
    plain socket in one gathering `os.writev` (the record batches' views are not copied, and the
    frame costs one system call); what the socket does not take, and everything on a TLS
    transport or behind queued bytes, goes through `transport.write` (which copies what it
    cannot send at once): small parts joined, large ones handed over as they are (Python 3.11's
    `writelines` would first join everything into one new buffer)."""
    fd = plain_fd(transport)
    if fd is not None:
        parts = _send_direct(fd, parts)
    small: list[Buffer] = []
    for part in parts:
        if len(part) < _COALESCE:
            small.append(part)
            continue
        if small:
            transport.write(b"".join(small))
            small = []
        transport.write(part)
    if small:
        transport.write(b"".join(small))


def plain_fd(transport: asyncio.BaseTransport) -> int | None:
    """The socket's descriptor when bytes may be written to it directly now: a plain (not TLS)
    socket transport, open, with nothing queued (the transport itself sends at once then)."""
    sock = transport.get_extra_info("socket")
    if sock is None or transport.get_extra_info("sslcontext") is not None:
        return None
    if transport.is_closing():
        return None
    if cast(asyncio.WriteTransport, transport).get_write_buffer_size():  # uvloop's too
        return None
    return int(sock.fileno())


def _send_direct(fd: int, parts: Sequence[Buffer]) -> Sequence[Buffer]:
    """Send what the socket takes now; the parts (or part of one) it did not take."""
    sent = 0
    try:
        for start in range(0, len(parts), _IOV_MAX):
            batch = parts[start : start + _IOV_MAX]
            wanted = sum(len(p) for p in batch)
            written = os.writev(fd, batch)
            sent += written
            if written < wanted:
                break
    except OSError:  # would block, or a broken socket: the transport's own write meets the
        pass  # same error and closes the connection as it always does
    return unsent(parts, sent)


def unsent(parts: Sequence[AnyBuffer], sent: int) -> list[AnyBuffer | memoryview]:
    """The parts after the first `sent` bytes (a partly sent part as a view of its rest)."""
    rest: list[AnyBuffer | memoryview] = []
    for part in parts:
        size = len(part)
        if sent >= size:
            sent -= size
            continue
        rest.append(memoryview(part)[sent:] if sent else part)
        sent = 0
    return rest
