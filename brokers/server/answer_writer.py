"""Answers' socket writes on a thread of their own, beside the event loop.

Owns: `AnswerWriter`, one thread per broker that does the `writev`/`sendfile` system calls of every
connection's answers, and `Outbox`, a connection's queue on it. On loopback the sender's system
call carries the receiver's TCP work and its wake-up (41 % of the loop's samples at OMB's fixed
rate, docs/benchmarks.md); the GIL is released inside the call, so on this thread that work runs
beside the loop instead of in it. Opt-in (`PIER_ANSWER_WRITER_THREAD=1`, read by `connection`): at
that rate on a 2-core machine shared with the 32 client processes it lengthened the tail
(docs/benchmarks.md, "Answers off the loop").

Contract: the loop thread calls `Outbox.send`, `pending`, `drained`, `finish` and `abort`; the
writer thread calls nothing of the loop's except `call_soon_threadsafe`. Everything they share is
behind one lock. Per connection, bytes leave in the order `send` queued them (one FIFO, taken from
the front by one thread), consecutive buffers in one `writev`; a file region goes with `sendfile`
(or `pread` then `writev`, below `_SMALL_REGION` or where sendfile fails). The writer writes to a
`dup` of the socket's descriptor, made on the loop thread while the transport is open (so it is
that socket's) and closed by the writer thread alone once the queue is empty: a descriptor number
reused by a new connection after the transport closed can never receive another connection's
bytes, and an idle connection holds one descriptor, as before. A socket that
would block is polled for POLLOUT; a write error (the client left) drops that outbox's queue and
ends it (`failed`) and tells the connection, which closes; so does a region that cannot be read or
whose file ends before it. A queued region is held by its slice (not copied to a bare descriptor
number), so its file stays open until it is written or dropped, and the number cannot be reused
meanwhile for another file (another tenant's segment); dropping the last slice of a deleted
segment's region closes that file on whichever thread drops it (a `close` is thread-safe). `finish` resolves when everything queued before it is written or
dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import select
import threading
from collections import deque
from collections.abc import Callable, Sequence

from brokers.server.response import FileSegment

log = logging.getLogger("pier.server")
_SMALL_REGION = 64 * 1024  # below this a pread copy is cheaper than a sendfile round trip
_WRITEV_BUFFERS = 64  # buffers per writev (IOV_MAX is 1024)
_RETRY = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR})


Item = bytes | bytearray | memoryview | FileSegment


class _FileSlice:
    """What is left to send of a region (the writer's own, mutable copy). It holds the region,
    which holds its file open: `fd` names that file for as long as the slice exists, even if the
    segment was deleted meanwhile (file_records' `FileHandle`)."""

    __slots__ = ("fd", "position", "region", "sendfile", "size")

    def __init__(self, region: FileSegment, sendfile: bool) -> None:
        self.region = region
        self.fd, self.position, self.size = region.fd, region.position, region.size
        self.sendfile = sendfile and region.size >= _SMALL_REGION


class Outbox:
    """One connection's queue of answer bytes on the writer thread."""

    def __init__(
        self,
        writer: AnswerWriter,
        socket_fd: Callable[[], int | None],
        *,
        use_sendfile: bool = True,
        on_failed: Callable[[], None] | None = None,
    ) -> None:
        """`socket_fd`: the connection's socket descriptor while its transport is open, else
        None (read on the loop thread, right before the `dup`). `on_failed` runs on the loop
        when a write fails (the client left, or a region could not be read or was cut short):
        the connection must close, since the answers after it can no longer arrive."""
        self._on_failed = on_failed
        self._writer = writer
        self._loop = asyncio.get_running_loop()
        self._socket_fd = socket_fd
        self.fd: int | None = None  # a dup while answers wait; closed by the writer thread only
        self._use_sendfile = use_sendfile
        self._queue: deque[bytes | bytearray | memoryview | _FileSlice | None] = deque()
        self._pending = 0  # bytes queued, not yet written (both threads: under the lock)
        self._scheduled = False  # in the writer's ready list or being written
        self._blocked = False  # waiting for POLLOUT
        self.failed = False
        self.closed = False  # the descriptor is closed: nothing more is written
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []  # (bytes at most, future)

    # --- the loop thread ----------------------------------------------------------------------

    @property
    def pending(self) -> int:
        return self._pending

    @property
    def held(self) -> bool:
        """Whether the connection waits for its answers to drain (backpressure)."""
        return any(below >= 0 for below, _future in self._waiters)

    def send(self, items: Sequence[Item]) -> None:
        """Queue `items` in order; a queued region is held (and with it its file) until it is
        written or dropped."""
        if self.closed:
            return
        size = 0
        queued: list[bytes | bytearray | memoryview | _FileSlice] = []
        for item in items:
            if isinstance(item, bytes | bytearray | memoryview):
                size += len(item)
                queued.append(item)
            elif item.size > 0:
                size += item.size
                queued.append(_FileSlice(item, self._use_sendfile))
        if queued:
            self._writer.enqueue(self, queued, size)

    async def drained(self, below: int) -> None:
        """Return once at most `below` bytes are waiting (or the outbox ended)."""
        with self._writer.lock:
            if self._pending <= below or self.closed:
                return
            future: asyncio.Future[None] = self._loop.create_future()
            self._waiters.append((below, future))
        await future

    async def finish(self) -> None:
        """Write out everything queued, then close the descriptor (at once if failed)."""
        with self._writer.lock:
            if self.closed:
                return
            future: asyncio.Future[None] = self._loop.create_future()
            self._waiters.append((-1, future))
        self._writer.enqueue(self, [None], 0)
        await future

    def abort(self) -> None:
        """Drop what is queued and close the descriptor (a connection closed by the broker)."""
        self._writer.enqueue(self, [None], 0, drop=True)

    # --- the writer thread (under the lock where it says so) ----------------------------------

    def wake_waiters(self) -> None:
        """Under the lock: resolve the waiters whose condition now holds."""
        left = []
        for below, future in self._waiters:
            if self.closed or (below >= 0 and self._pending <= below):
                self._resolve(future)
            else:
                left.append((below, future))
        self._waiters = left

    def _resolve(self, future: asyncio.Future[None]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            self._loop.call_soon_threadsafe(_settle, future)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class AnswerWriter:
    """The writer thread; `shared()` is the process's one (started on first use, a daemon)."""

    _shared: AnswerWriter | None = None
    _shared_lock = threading.Lock()

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._ready: deque[Outbox] = deque()
        self._sleeping = False
        # the loop where a `_kick` waits in the ready queue (another loop's closing cannot leave
        # the thread unwoken: it is per loop)
        self._kick_loop: asyncio.AbstractEventLoop | None = None
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._poll = select.poll()
        self._poll.register(self._wake_fd, select.POLLIN)
        self._blocked: dict[int, Outbox] = {}  # writer thread only
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="pier-answer-writer", daemon=True)
        self._thread.start()

    @classmethod
    def shared(cls) -> AnswerWriter:
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    @classmethod
    def _forget_shared(cls) -> None:
        """In a forked child: the parent's thread is not there; the next `shared()` starts one."""
        cls._shared = None
        cls._shared_lock = threading.Lock()

    def enqueue(
        self,
        box: Outbox,
        items: Sequence[bytes | bytearray | memoryview | _FileSlice | None],
        size: int,
        *,
        drop: bool = False,
    ) -> None:
        with self.lock:
            if box.closed:
                return
            if drop:
                box._queue.clear()
                box._pending = 0
            if box.fd is None and not box._queue:
                if size == 0:  # `finish`/`abort` with nothing queued: it ends here
                    self._close(box)
                    return
                source = box._socket_fd()
                if source is None:  # the transport closed: nothing can be written any more
                    return
                box.fd = os.dup(source)  # the socket is open: this fd is not another's yet
            box._queue.extend(items)
            box._pending += size
            kick = False
            if not box._scheduled and (not box._blocked or drop):
                box._scheduled = True
                self._ready.append(box)
                kick = self._sleeping and self._kick_loop is not box._loop
                if kick:
                    self._kick_loop = box._loop
        if kick:  # one wake-up of the thread per turn of the loop, after all of the turn's answers
            box._loop.call_soon(self._kick)

    def _kick(self) -> None:
        """On the loop: wake the thread if it sleeps (answers were queued in the last turn)."""
        with self.lock:
            self._kick_loop = None
            wake, self._sleeping = self._sleeping, False
        if wake:
            os.eventfd_write(self._wake_fd, 1)

    def stop(self) -> None:
        """End the thread (tests; the shared writer lives as long as the process)."""
        with self.lock:
            self._stopping = True
        os.eventfd_write(self._wake_fd, 1)
        self._thread.join(10)
        os.close(self._wake_fd)

    # --- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self.lock:
                if self._stopping:
                    return
                box = self._ready.popleft() if self._ready else None
                if box is None:
                    self._sleeping = True
            if box is not None:
                self._pump(box)
                continue
            self._wait()

    def _wait(self) -> None:
        for fd, _events in self._poll.poll():
            if fd == self._wake_fd:
                with contextlib.suppress(BlockingIOError):
                    os.eventfd_read(self._wake_fd)
                continue
            box = self._blocked.pop(fd, None)
            if box is None:
                continue
            self._poll.unregister(fd)
            with self.lock:
                box._blocked = False
                if not box._scheduled:
                    box._scheduled = True
                    self._ready.append(box)
        with self.lock:
            self._sleeping = False

    def _pump(self, box: Outbox) -> None:
        """Write `box`'s queue until it is empty, blocks, or fails."""
        if box.fd in self._blocked:  # an abort scheduled it while it waited for POLLOUT
            del self._blocked[box.fd]
            self._poll.unregister(box.fd)
            with self.lock:
                box._blocked = False
        while True:
            with self.lock:
                batch = _take(box._queue)
                if not batch:  # all written: the dup closes until the next answers
                    box._scheduled = False
                    _close_fd(box)
                    return
            try:
                written, blocked = _write(box, batch)
            except OSError as exc:
                self._fail(box, exc)
                return
            with self.lock:
                box._pending -= written
                if batch and batch[0] is None:  # `finish`/`abort`: everything before it is out
                    self._close(box)
                    return
                box._queue.extendleft(reversed(batch))  # what is left goes back to the front
                box.wake_waiters()
                if blocked:
                    box._scheduled, box._blocked = False, True
            if blocked and box.fd is not None:
                self._blocked[box.fd] = box
                self._poll.register(box.fd, select.POLLOUT)
                return

    def _fail(self, box: Outbox, exc: OSError) -> None:
        log.debug("event=answer_write_failed error=%r", exc)
        with self.lock:
            box.failed = True
            box._queue.clear()
            box._pending = 0
            self._close(box)
        if box._on_failed is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                box._loop.call_soon_threadsafe(box._on_failed)

    def _close(self, box: Outbox) -> None:
        """Under the lock: the outbox ends; its descriptor closes and its waiters wake."""
        box.closed = True
        box._scheduled = False
        box._queue.clear()
        box._pending = 0
        _close_fd(box)
        box.wake_waiters()


def _close_fd(box: Outbox) -> None:
    if box.fd is not None:
        with contextlib.suppress(OSError):
            os.close(box.fd)
        box.fd = None


def _take(queue: deque[bytes | bytearray | memoryview | _FileSlice | None]) -> list:  # type: ignore[type-arg]
    """Under the lock: the next run to write — buffers (up to `_WRITEV_BUFFERS`), one region, or
    the end marker."""
    if not queue:
        return []
    head = queue[0]
    if head is None or isinstance(head, _FileSlice):
        return [queue.popleft()]
    batch: list[bytes | bytearray | memoryview] = []
    while queue and len(batch) < _WRITEV_BUFFERS:
        item = queue[0]
        if item is None or isinstance(item, _FileSlice):
            break
        batch.append(item)
        queue.popleft()
    return batch


def _write(box: Outbox, batch: list) -> tuple[int, bool]:  # type: ignore[type-arg]
    """Write what the socket takes of `batch`, leaving the rest in it: (bytes written, blocked).
    Raises OSError when the connection is broken."""
    head, fd = batch[0], box.fd
    if head is None or fd is None:
        return 0, False
    try:
        if isinstance(head, _FileSlice):
            return _write_region(fd, batch, head)
        written = os.writev(fd, batch)
    except OSError as exc:
        if exc.errno in _RETRY:
            return 0, True
        raise
    _consume(batch, written)
    return written, bool(batch)


def _write_region(fd: int, batch: list, region: _FileSlice) -> tuple[int, bool]:  # type: ignore[type-arg]
    if region.sendfile:
        try:
            written = os.sendfile(fd, region.fd, region.position, region.size)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise
            region.sendfile = False  # not a file sendfile takes: read it instead
            return 0, False
        if written == 0:  # the file ends before the region: the answer cannot be sent whole
            raise _cut_short(region)
        region.position += written
        region.size -= written
        if region.size == 0:
            batch.clear()
        return written, bool(batch)
    data = os.pread(region.fd, region.size, region.position)
    if len(data) < region.size:
        raise _cut_short(region)
    batch[0] = data
    return 0, False  # the bytes are written (and counted) as a buffer next


def _cut_short(region: _FileSlice) -> OSError:
    """A region whose file ends before it (truncated under it): its answer announced the size,
    so the next answer's bytes would stand in for the missing ones; the connection ends instead,
    as Kafka's does."""
    return OSError(errno.EIO, f"file ends before its region ({region.size} bytes left)")


def _consume(batch: list, written: int) -> None:  # type: ignore[type-arg]
    """Drop the buffers `written` covers from the front of `batch`; cut a partly written one."""
    while batch and written >= len(batch[0]):
        written -= len(batch[0])
        batch.pop(0)
    if written:
        batch[0] = memoryview(batch[0])[written:]


os.register_at_fork(after_in_child=AnswerWriter._forget_shared)
