"""A fault-injecting file layer for log tests (a `FileOps` that fails on command).

`FaultyFiles` does the real system calls and records each one as `Call(op, name)` (the file's
name, or the directory's for a directory fsync). A test arms
- `fail(op, nth=, error=, name_suffix=, sticky=, torn=)`: the nth matching call (`op` or ANY) raises
  OSError(error) (ENOSPC by default); `sticky` keeps failing every later matching call, as a disk
  that stays full does, until `heal()`; `torn` lets a write put half its bytes on disk first;
- `crash_at(n, torn=)`: the nth call from now (any operation) is where the process dies: it raises
  `SimulatedCrash` (a BaseException, so no `except Exception` in the log catches it) and every
  later call is a no-op that reaches no disk, so whatever undo the log attempts never happens and
  the files stay as a `kill -9` at that instant would leave them.
Counting is by the calls' order, so a scenario replayed from scratch hits the same call.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from typing_extensions import Buffer

from brokers.log.file_ops import FileOps

ANY = "*"  # `fail(ANY, nth=k)`: the kth call from now, whatever it is


class Call(NamedTuple):
    op: str
    name: str


class SimulatedCrash(BaseException):
    """The process died at this file call."""


@dataclass
class _Fault:
    op: str
    nth: int
    error: int
    name_suffix: str
    sticky: bool
    torn: bool
    seen: int = 0

    def hits(self, call: Call) -> bool:
        if self.op not in (ANY, call.op) or not call.name.endswith(self.name_suffix):
            return False
        self.seen += 1
        return self.seen == self.nth or (self.sticky and self.seen > self.nth)


class FaultyFiles(FileOps):
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.failed: list[Call] = []  # the calls that raised an injected error
        self._names: dict[int, str] = {}
        self._faults: list[_Fault] = []
        self._crash_at: int | None = None  # index in `calls`
        self._crash_torn = False
        self.crashed = False

    # -- arming -------------------------------------------------------------------------------

    def fail(
        self, op: str, *, nth: int = 1, error: int = errno.ENOSPC, name_suffix: str = "",
        sticky: bool = False, torn: bool = False,
    ) -> None:  # fmt: skip
        self._faults.append(_Fault(op, nth, error, name_suffix, sticky, torn))

    def crash_at(self, nth: int, *, torn: bool = False) -> None:
        """The nth call from now (1-based) is where the process dies."""
        self._crash_at = len(self.calls) + nth - 1
        self._crash_torn = torn

    def heal(self) -> None:
        """Space is back / the device works again: no more injected errors."""
        self._faults.clear()

    # -- the decision made before each call ---------------------------------------------------

    def _check(self, call: Call) -> tuple[BaseException | None, bool]:
        """(what to raise after the call's partial effect, whether to tear the write first)."""
        if self.crashed:
            raise SimulatedCrash(f"call {call} after the crash")
        index = len(self.calls)
        self.calls.append(call)
        if index == self._crash_at:
            self.crashed = True
            return SimulatedCrash(f"crashed at call {index}: {call}"), self._crash_torn
        for fault in self._faults:
            if fault.hits(call):
                self.failed.append(call)
                return OSError(fault.error, os.strerror(fault.error), call.name), fault.torn
        return None, False

    def _name(self, fd: int) -> str:
        return self._names.get(fd, f"fd{fd}")

    def _dead(self) -> bool:
        return self.crashed

    # -- the operations -----------------------------------------------------------------------

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        error, _ = self._check(Call("open", path.name))
        if error is not None:
            raise error
        fd = os.open(path, flags, mode)
        self._names[fd] = path.name
        return fd

    def write(self, fd: int, data: Buffer) -> int:
        if self._dead():
            return memoryview(data).nbytes
        error, torn = self._check(Call("write", self._name(fd)))
        if error is not None:
            if torn:
                view = memoryview(data).cast("B")
                os.write(fd, view[: max(1, view.nbytes // 2)])
            raise error
        return os.write(fd, data)

    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> int:
        if self._dead():
            return sum(memoryview(b).nbytes for b in buffers)
        error, torn = self._check(Call("pwritev", self._name(fd)))
        if error is not None:
            if torn:
                joined = b"".join(bytes(b) for b in buffers)
                os.pwrite(fd, joined[: max(1, len(joined) // 2)], position)
            raise error
        return os.pwritev(fd, buffers, position)

    def pread(self, fd: int, size: int, position: int) -> bytes:
        if not self._dead():
            error, _ = self._check(Call("pread", self._name(fd)))
            if error is not None:
                raise error
        return os.pread(fd, size, position)

    def preadv(self, fd: int, buffers: Sequence[bytearray | memoryview], position: int) -> int:
        if not self._dead():
            error, _ = self._check(Call("preadv", self._name(fd)))
            if error is not None:
                raise error
        return os.preadv(fd, buffers, position)

    def truncate(self, fd: int, size: int) -> None:
        if self._dead():
            return
        error, _ = self._check(Call("truncate", self._name(fd)))
        if error is not None:
            raise error
        os.ftruncate(fd, size)

    def fsync(self, fd: int) -> None:
        if self._dead():
            return
        error, _ = self._check(Call("fsync", self._name(fd)))
        if error is not None:
            raise error
        os.fsync(fd)

    def rename(self, source: Path, target: Path) -> None:
        if self._dead():
            return
        error, _ = self._check(Call("rename", target.name))
        if error is not None:
            raise error
        os.replace(source, target)

    def unlink(self, path: Path) -> None:
        if self._dead():
            return
        error, _ = self._check(Call("unlink", path.name))
        if error is not None:
            raise error
        super().unlink(path)
