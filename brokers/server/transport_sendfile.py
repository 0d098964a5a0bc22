"""A file region sent into a stream transport with `sendfile`, on asyncio's loop and on uvloop.

Owns: `send_region`. On a loop that implements `loop.sendfile` (asyncio's selector loop) it is
that. uvloop does not implement it (`AbstractEventLoop.sendfile` raises NotImplementedError), so
there it is done here: wait until the transport has written everything queued before (its write
buffer limits lowered to 0 for the wait, then put back), then `os.sendfile` from the file to a
duplicate of the socket's descriptor until the region is sent, waiting for the socket to be
writable with `loop.add_writer` on that duplicate (a loop will not watch a descriptor a transport
owns, and the duplicate keeps the socket open whatever the transport does meanwhile) — the same
system calls asyncio's own `sock_sendfile` makes. TLS transports and transports without a socket
raise `asyncio.SendfileNotAvailableError` (the caller copies instead); a broken or reset socket
raises ConnectionError; a file shorter than the region ends the send early, as asyncio's does.

Contract: nothing else writes to the transport until the call returns. Runs on the event loop;
not thread-safe.
"""

from __future__ import annotations

import asyncio
import errno
import os


class _FdFile:
    """The minimal file object `loop.sendfile` needs, over an fd we do not own."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:  # sendfile seeks after sending; harmless
        return offset


def _native(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the loop implements `loop.sendfile` itself (uvloop inherits the abstract one)."""
    return type(loop).sendfile is not asyncio.AbstractEventLoop.sendfile


async def send_region(writer: asyncio.StreamWriter, fd: int, position: int, size: int) -> None:
    """Send `size` bytes of `fd` from `position` after everything written to `writer` before."""
    loop = asyncio.get_running_loop()
    transport = writer.transport
    if _native(loop):
        await loop.sendfile(transport, _FdFile(fd), position, size, fallback=False)  # type: ignore[arg-type]
        return
    sock = transport.get_extra_info("socket")
    if sock is None or transport.get_extra_info("sslcontext") is not None:
        raise asyncio.SendfileNotAvailableError("not a plain socket transport")
    await _written_out(writer)
    if transport.is_closing():
        raise ConnectionError(errno.EPIPE, "socket is not connected")
    out = os.dup(sock.fileno())
    try:
        await _send(loop, out, fd, position, size)
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
    loop: asyncio.AbstractEventLoop, out: int, fd: int, position: int, size: int
) -> None:
    start, end = position, position + size
    while position < end:
        try:
            sent = os.sendfile(out, fd, position, end - position)
        except BlockingIOError:
            await _writable(loop, out)
            continue
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ConnectionError(errno.EPIPE, "socket is not connected") from exc
        except OSError as exc:
            if position == start:  # e.g. a file sendfile cannot read: the caller copies it
                raise asyncio.SendfileNotAvailableError(f"os.sendfile: {exc}") from exc
            raise
        if sent == 0:  # the file ends before the region does
            return
        position += sent


async def _writable(loop: asyncio.AbstractEventLoop, out: int) -> None:
    ready = loop.create_future()
    loop.add_writer(out, _set, ready)
    try:
        await ready
    finally:
        loop.remove_writer(out)


def _set(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)
