"""The rest of a streamed Fetch answer moved from the broker's socket to the client's inside the
kernel (Linux `splice(2)` through a pipe): the record bytes never enter user space.

Owns: `SpliceRelay`, which takes over one answer once its renamed head has gone out
(`gateway.kafka.fetch`, `raw.fetch_stream`) and both sockets are plain TCP with nothing queued
for the client. It asks its `RelaySource` (the answer's walk) what comes next: record bytes are
spliced socket → pipe → socket (`SPLICE_F_MOVE`: pages are moved, not copied); the few bytes the
walk must read (each partition's head, a few dozen bytes) are read exactly (never past the
answer's end) and written out, in order, with what the walk gives back. Partial splices and
writes are resumed; `EAGAIN` on either side parks the relay on that socket's readiness
(`loop.add_reader`/`add_writer` on duplicated descriptors: the transports keep their own, and a
duplicate keeps the socket open while the relay uses it, whatever its transport does), except a
splice into the pipe refused while the broker's socket holds bytes: the pipe is full (its slots
are per fragment, not per byte: small fragments fill it long before `PIPE_BYTES`), so the relay
waits for the client's side alone (measured, 1 KiB records: parked on the readable broker socket
instead, a relay was woken 5,735 times for 300 MB, 5,675 of them moving nothing). At most
`PUMP_SLICE_BYTES` move per turn of the event loop, so one large answer does not starve other
connections. It ends by calling `on_done(None)` once every byte is written to the client, or
`on_done(reason)` when either socket fails (a client gone mid-answer: the upstream connection is
mid-frame and must be dropped by the caller); `cancel` stops it silently. Every descriptor it
opened (two duplicates and a pipe) is closed when it ends. Runs on the event loop; not
thread-safe.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import logging
import os
import socket
import sys
import termios
from collections.abc import Callable
from typing import Protocol

from gateway.kafka.frames import unsent

log = logging.getLogger("pier.gateway.splice")
PIPE_BYTES = 1024 * 1024  # asked of F_SETPIPE_SZ (Linux's default pipe-max-size); 64 KiB if refused
PUMP_SLICE_BYTES = 8 * 1024 * 1024  # moved per turn of the event loop at most
# Socket buffers while relaying (the broker side's receive, the client side's send): Linux's
# default autotuning ceiling, set outright so each wake-up moves megabytes, not tens of KiB
# (measured: the relay's CPU per GB 0.36-0.39 s → 0.28-0.30 s over loopback).
SOCKET_BYTES = 4 * 1024 * 1024
# While the relay waits for the broker's bytes, the socket wakes it only once this many are there
# (SO_RCVLOWAT; never more than the step still wants): one wake-up per arriving segment (~64 KiB
# over loopback) cost more Python than the copies splice saves. Back to 1 when the relay ends:
# the transport reads that socket again.
WAKE_BYTES = 512 * 1024
_SPLICE_FLAGS = getattr(os, "SPLICE_F_MOVE", 1) | getattr(os, "SPLICE_F_NONBLOCK", 2)
_MORE = getattr(os, "SPLICE_F_MORE", 4)
# `PIER_GATEWAY_SPLICE=off` keeps every answer in user space (a kernel or sandbox without splice
# on sockets; and the benchmark's before/after comparison).
AVAILABLE = (
    hasattr(os, "splice")
    and hasattr(os, "pipe2")
    and os.environ.get("PIER_GATEWAY_SPLICE", "on").lower() != "off"
)


class RelaySource(Protocol):
    """The walk over the answer being relayed."""

    def next_step(self) -> tuple[bool, int]:
        """(True, n): n bytes to pass on untouched; (False, n): n bytes to read and `take`."""
        ...

    def take(self, chunk: memoryview) -> list[memoryview]:
        """Bytes read for the walk; what goes to the client for them (in order)."""
        ...

    def skipped(self, count: int) -> None:
        """`count` bytes of the pass step were spliced."""
        ...


class SpliceRelay:
    def __init__(
        self,
        source_fd: int,
        sink_fd: int,
        left: int,
        source: RelaySource,
        on_done: Callable[[str | None], None],
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._left = left  # bytes of the answer still in the broker's socket
        self._source = source
        self._on_done = on_done
        self._out: list[memoryview] = []  # read bytes' output, to write before the pipe's
        self._in_pipe = 0
        self.spliced = 0  # bytes moved socket to socket
        self._read_fd = self._write_fd = -1
        self._pipe_r = self._pipe_w = -1
        self._reading = self._writing = False
        self._finished = False
        self._read_wanted = 1  # what the step blocked on the broker's socket wants
        self._lowat = 1  # the broker socket's SO_RCVLOWAT now
        try:
            self._read_fd = os.dup(source_fd)
            self._write_fd = os.dup(sink_fd)
            self._pipe_r, self._pipe_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            self._close_fds()
            raise
        self._capacity = _grow_pipe(self._pipe_w)
        _size_buffer(self._read_fd, socket.SO_RCVBUF)
        _size_buffer(self._write_fd, socket.SO_SNDBUF)

    def start(self) -> None:
        self._pump()

    def cancel(self) -> None:
        """Stop now (the connection is closing); `on_done` is not called."""
        self._finish(None, notify=False)

    # -- the pump ----------------------------------------------------------------------------
    def _pump(self) -> None:
        if self._finished:
            return
        try:
            blocked = self._move()
        except _Failed as exc:
            self._finish(str(exc))
            return
        if not self._finished:
            self._watch(*(blocked or (False, False)))

    def _watch(self, read: bool, write: bool) -> None:
        """Wait on exactly these sockets' readiness; a watch already in place stays (no system
        call per wake-up while the relay keeps waiting on the same side)."""
        if read:
            self._wake_at(min(WAKE_BYTES, self._read_wanted))
        if read != self._reading:
            if read:
                self._loop.add_reader(self._read_fd, self._pump)
            else:
                self._loop.remove_reader(self._read_fd)
            self._reading = read
        if write != self._writing:
            if write:
                self._loop.add_writer(self._write_fd, self._pump)
            else:
                self._loop.remove_writer(self._write_fd)
            self._writing = write

    def _move(self) -> tuple[bool, bool] | None:
        """Move what can be moved now; what it waits for (readable, writable), or None when it
        ended or yielded its turn."""
        moved = 0
        while moved < PUMP_SLICE_BYTES:
            written, write_blocked = self._write()
            read, read_blocked = self._read()
            moved += written + read
            if self._left == 0 and not self._out and not self._in_pipe:
                self._finish(None)
                return None
            if not written and not read:
                if not (read_blocked or write_blocked):
                    raise _Failed("the relay cannot move")  # a bug: never park with no wake-up
                return read_blocked, write_blocked
        self._loop.call_soon(self._pump)
        return None

    def _write(self) -> tuple[int, bool]:
        """Bytes written to the client (the walk's output first, then the pipe's); blocked?"""
        try:
            if self._out:
                written = os.writev(self._write_fd, self._out)
                self._out = unsent(self._out, written)
                return written, False
            if self._in_pipe:
                written = os.splice(
                    self._pipe_r, self._write_fd, self._in_pipe, flags=_SPLICE_FLAGS
                )
                self._in_pipe -= written
                self.spliced += written
                return written, False
        except BlockingIOError:
            return 0, True
        except OSError as exc:
            raise _Failed(f"client socket: {errno.errorcode.get(exc.errno or 0, exc)}") from None
        return 0, False

    def _read(self) -> tuple[int, bool]:
        """Bytes taken from the broker's socket (into the pipe, or read for the walk); blocked?"""
        if self._left == 0:
            return 0, False
        passing, wanted = self._source.next_step()
        if wanted <= 0 or wanted > self._left:
            raise _Failed(f"the walk wants {wanted} bytes, {self._left} left in the answer")
        try:
            if passing:
                room = self._capacity - self._in_pipe
                if room <= 0:
                    return 0, False
                count = self._read_wanted = min(wanted, room)
                flags = _SPLICE_FLAGS | (_MORE if count < self._left else 0)
                taken = os.splice(self._read_fd, self._pipe_w, count, flags=flags)
                if taken:
                    self._in_pipe += taken
                    self._left -= taken
                    self._source.skipped(taken)
            else:
                if self._out or self._in_pipe:
                    return 0, False  # what the walk gives back goes after what is queued
                self._read_wanted = wanted
                data = os.read(self._read_fd, wanted)
                taken = len(data)
                if taken:
                    self._left -= taken
                    self._out = self._source.take(memoryview(data))
        except BlockingIOError:
            if passing and self._in_pipe and _unread(self._read_fd):
                return 0, False  # the pipe is full: the client's side must drain it first
            return 0, True
        except OSError as exc:
            raise _Failed(f"broker socket: {errno.errorcode.get(exc.errno or 0, exc)}") from None
        if not taken:
            raise _Failed("broker socket closed mid-answer")
        return taken, False

    # -- the end -----------------------------------------------------------------------------
    def _finish(self, failure: str | None, *, notify: bool = True) -> None:
        if self._finished:
            return
        self._finished = True
        self._watch(False, False)
        self._wake_at(1)
        self._close_fds()
        if notify:
            self._on_done(failure)

    def _wake_at(self, count: int) -> None:
        """The broker socket's SO_RCVLOWAT (a socket that refuses it wakes at 1 byte: no harm)."""
        if count == self._lowat or self._read_fd < 0:
            return
        sock = socket.socket(fileno=self._read_fd)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, count)
            self._lowat = count
        except OSError:
            self._lowat = count  # not asked again
        finally:
            sock.detach()

    def _close_fds(self) -> None:
        for fd in (self._read_fd, self._write_fd, self._pipe_r, self._pipe_w):
            if fd >= 0:
                os.close(fd)
        self._read_fd = self._write_fd = self._pipe_r = self._pipe_w = -1


class _Failed(Exception):
    """A socket failed mid-answer."""


def _unread(fd: int) -> int:
    """Bytes the socket holds unread (`FIONREAD`); 0 when it cannot tell."""
    try:
        return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, bytes(4)), sys.byteorder)
    except OSError:
        return 0


def _grow_pipe(fd: int) -> int:
    """The pipe's capacity, raised to `PIPE_BYTES` when the system allows it."""
    try:
        return int(fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES))
    except OSError:
        return int(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ))


def _size_buffer(fd: int, option: int) -> None:
    """Raise a socket buffer to `SOCKET_BYTES` (never lower it); a refusal is not an error."""
    sock = socket.socket(fileno=fd)
    try:
        if sock.getsockopt(socket.SOL_SOCKET, option) < SOCKET_BYTES:
            sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BYTES)
    except OSError:
        pass
    finally:
        sock.detach()  # the descriptor stays the relay's
