"""Frames of many parts written to a plain socket without ever copying them in user space.

Owns: `GatherWriter`, the write side of the gateway's socket to a broker (`gateway.kafka.upstream`).
A request is a list of parts (a new header, then views of the client's own buffer: a Produce's
record batches); they go to the socket with gathering `os.writev` calls. What the socket does not
take at once waits as those very views (the rest of a partly sent one as a view of it), in order,
and goes out with further `writev` calls when the socket is writable again (`loop.add_writer`).
asyncio's transport would instead copy the rest into its own buffer, and every later request
behind it in whole: with 1 KiB records through a broker that was not reading fast enough that
copy was ~0.28 s of wall time in the event loop for 0.9 GB (cProfile), more than `recv_into`'s.
The views keep their buffers alive until sent; those are the requests' own frames, counted in
the tenant's byte budget until their answers arrive, except an acks=0 Produce's, which has no
answer: the session therefore takes no request while `waiting_bytes` is over its bound, and
`on_drained` (called when nothing waits any more) lets it go on. Plain TCP only (TLS must encrypt: `write_parts`). The writer works on a
duplicate of the socket's descriptor (as `splice_relay` does: the event loop will not watch a
descriptor a transport owns, and the duplicate keeps the socket open while the writer uses it);
the transport must not be written to while a writer is in use (its buffer stays empty, so it never
watches the socket itself). A write error other than would-block fails the writer: `on_error` is
called once and nothing more is written. `close` drops what waits, stops watching and closes the
duplicate. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Callable, Sequence

from gateway.kafka.frames import Buffer, unsent

IOV_MAX = 1024  # buffers per writev (Linux's IOV_MAX)


class GatherWriter:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        fd: int,
        on_error: Callable[[OSError], None],
        on_drained: Callable[[], None] | None = None,
    ) -> None:
        self._loop = loop
        self._on_drained = on_drained
        self._fd = os.dup(fd)
        self._on_error = on_error
        self._waiting: deque[Buffer] = deque()  # parts not sent yet, in order
        self._waiting_bytes = 0
        self._watching = False  # add_writer is set
        self._done = False  # closed or failed: nothing more is written

    @property
    def waiting_bytes(self) -> int:
        """Bytes accepted and not yet taken by the socket."""
        return self._waiting_bytes

    def write(self, parts: Sequence[Buffer]) -> None:
        """Send `parts` after everything written before; what the socket does not take now
        waits (as views, never copied) for the socket to be writable."""
        if self._done:
            return
        if self._waiting:
            self._queue(parts)
            return
        rest = self._send(parts)
        if rest:
            self._queue(rest)
            self._watch()

    def close(self) -> None:
        """Stop: drop what waits, stop watching the socket and close the duplicate."""
        if self._fd < 0:
            return
        self._done = True
        self._waiting.clear()
        self._waiting_bytes = 0
        self._unwatch()
        os.close(self._fd)
        self._fd = -1

    # -- internals -----------------------------------------------------------------------------
    def _send(self, parts: Sequence[Buffer]) -> list[Buffer]:
        """Write what the socket takes now; the parts (or the rest of one) it did not take.
        On an error the writer has failed and nothing is left to send."""
        sent = 0
        try:
            for start in range(0, len(parts), IOV_MAX):
                batch = parts[start : start + IOV_MAX]
                wanted = sum(len(p) for p in batch)
                written = os.writev(self._fd, batch)
                sent += written
                if written < wanted:
                    break
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            self._fail(exc)
            return []
        return unsent(parts, sent)

    def _queue(self, parts: Sequence[Buffer]) -> None:
        for part in parts:
            if len(part):
                self._waiting.append(part)
                self._waiting_bytes += len(part)

    def _flush(self) -> None:
        """The socket is writable: send what waits, oldest first, `IOV_MAX` parts at a time."""
        waiting = self._waiting
        while waiting and not self._done:
            batch = [waiting[i] for i in range(min(len(waiting), IOV_MAX))]
            for _ in batch:
                waiting.popleft()
            self._waiting_bytes -= sum(len(p) for p in batch)
            rest = self._send(batch)
            if rest:
                self._waiting_bytes += sum(len(p) for p in rest)
                waiting.extendleft(reversed(rest))
                return  # would block: woken again when writable
        if not waiting:
            self._unwatch()
            if self._on_drained is not None and not self._done:
                self._on_drained()

    def _watch(self) -> None:
        if not self._watching and not self._done:
            self._loop.add_writer(self._fd, self._flush)
            self._watching = True

    def _unwatch(self) -> None:
        if self._watching:
            self._loop.remove_writer(self._fd)
            self._watching = False

    def _fail(self, exc: OSError) -> None:
        if self._done:
            return
        self.close()
        self._on_error(exc)
