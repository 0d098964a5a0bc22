"""A file region sent into a stream transport with `sendfile`, on asyncio's loop and on uvloop.

Owns: `send_region`, one path on both loops (uvloop has no `loop.sendfile`, and asyncio's hangs
when the transport is closed during the send): wait until the transport has written everything
queued before (its write buffer limits lowered to 0 for the wait, then put back), then
`os.sendfile` from the file to a duplicate of the socket's descriptor until the region is sent,
waiting for the socket to be writable with `loop.add_writer` on that duplicate (a loop will not
watch a descriptor a transport owns, and the duplicate keeps the socket open whatever the
transport does meanwhile) or for the connection to be closed (`close()` by the idle check while
the client reads nothing: ConnectionError, and the duplicate is closed). TLS transports and
transports without a socket raise `asyncio.SendfileNotAvailableError` (the caller copies
instead), as does a file sendfile cannot read before anything was sent; a broken or reset socket
raises ConnectionError, as does a file shorter than the region (the connection ends rather
than let the next answer's bytes stand in for the missing ones). The call holds the region
object, which keeps its file open however long it waits (not a bare descriptor number that a
deletion could close and an `open` reuse).

Contract: nothing else writes to the transport until the call returns. Runs on the event loop;
not thread-safe.
"""

from __future__ import annotations

import asyncio
import errno
import os

from brokers.server.response import FileSegment


async def send_region(
    writer: asyncio.StreamWriter,
    region: FileSegment,
    closed: asyncio.Future[None],
) -> None:
    """Send `region` after everything written to `writer` before. The region is held for the
    whole call, and with it its file (file_records' `FileHandle`): however long the wait for the
    transport, its descriptor number names that file, never one opened since. `closed`, done
    when the connection's owner closes it, ends a wait for a writable socket at once."""
    transport = writer.transport
    sock = transport.get_extra_info("socket")
    if sock is None or transport.get_extra_info("sslcontext") is not None:
        raise asyncio.SendfileNotAvailableError("not a plain socket transport")
    await _written_out(writer)
    if transport.is_closing():
        raise ConnectionError(errno.EPIPE, "socket is not connected")
    out = os.dup(sock.fileno())
    try:
        await _send(writer, out, region.fd, region.position, region.size, closed)
    finally:
        os.close(out)


async def _written_out(writer: asyncio.StreamWriter) -> None:
    """Return once the transport's write buffer is empty."""
    transport = writer.transport
    if not transport.get_write_buffer_size():
        return
    low, high = transport.get_write_buffer_limits()
    transport.set_write_buffer_limits(high=0, low=0)
    try:
        await writer.drain()  # paused above 0 bytes, resumed at 0
    finally:
        if not transport.is_closing():
            transport.set_write_buffer_limits(high=high, low=low)


async def _send(
    writer: asyncio.StreamWriter,
    out: int,
    fd: int,
    position: int,
    size: int,
    closed: asyncio.Future[None],
) -> None:
    loop = asyncio.get_running_loop()
    start, end = position, position + size
    while position < end:
        try:
            sent = os.sendfile(out, fd, position, end - position)
        except BlockingIOError:
            await _writable(loop, out, writer, closed)
            continue
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ConnectionError(errno.EPIPE, "socket is not connected") from exc
        except OSError as exc:
            if position == start:  # e.g. a file sendfile cannot read: the caller copies it
                raise asyncio.SendfileNotAvailableError(f"os.sendfile: {exc}") from exc
            raise
        if sent == 0:  # the file ends before the region does: the answer cannot be sent whole
            raise ConnectionError(errno.EIO, "a fetch region's file ends before the region does")
        position += sent


async def _writable(
    loop: asyncio.AbstractEventLoop,
    out: int,
    writer: asyncio.StreamWriter,
    closed: asyncio.Future[None],
) -> None:
    """Return once the socket takes bytes again; ConnectionError once the connection is closed
    instead (the idle check's `close()`: the duplicate keeps the socket open, so a client that
    reads nothing would otherwise hold the send, and the connection, forever). The close is
    seen through `closed` (its owner's, done at its `close`), not `writer.wait_closed()`: that
    in a task cancelled afterwards would cancel the protocol's own close future with it, and
    every later `wait_closed` of the connection would raise CancelledError at once. A peer that leaves wakes the duplicate."""
    ready = loop.create_future()
    loop.add_writer(out, _set, ready)
    try:
        while not ready.done():
            if writer.transport.is_closing() or closed.done():
                raise ConnectionError(errno.EPIPE, "the connection was closed during sendfile")
            await asyncio.wait((ready, closed), return_when=asyncio.FIRST_COMPLETED)
    finally:
        loop.remove_writer(out)


def _set(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)
