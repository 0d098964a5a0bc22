"""`pier gateway --workers N`: one listener set served by N worker processes.

Owns the parent process of a multi-worker gateway: it starts N copies of the same `pier gateway`
command, worker k told its slot in `PIER_GATEWAY_WORKER` (`k/N/<socket dir>`), waits until each
reports ready (one line on its stdout), prints the gateway's ready line, restarts a worker that
dies (bounded backoff, reset once a worker has stayed up), and on SIGTERM/SIGINT stops them all
(SIGTERM, each drains as a single gateway does; SIGKILL after `STOP_TIMEOUT_S`) and exits 0.
A worker that cannot start the first time stops the whole gateway with its exit code (a bad
setting or an unreachable store is not retried); later restarts are retried. Each worker is a
whole gateway (`gateway.app.Gateway`) with its own event loop, opening the same ports with
`SO_REUSEPORT` (the kernel spreads new connections over the workers), its own gateway id
`<id>.w<k>` (so the tenant store's holdings, the ZooKeeper quota shares, heartbeats and usage
records are per worker) and its metrics on the metrics port + k. Workers die with the parent
(`PR_SET_PDEATHSIG`). The socket directory (mode 0700) holds each worker's internal HTTP socket
(`gateway.http.worker_routing`) and the workers' shared per-address table
(`gateway.auth.address_table`: connection counts and login backoff held across the workers), and
is removed at exit. Runs on one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gateway.auth.address_table import AddressTable
from gateway.config import WorkerSlot

log = logging.getLogger("pier.gateway.supervisor")
WORKER_ENV = "PIER_GATEWAY_WORKER"
READY_LINE = b"pier-gateway-worker-ready\n"
STOP_TIMEOUT_S = 60.0
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 30.0
STABLE_S = 60.0  # a worker up this long has its backoff reset
PR_SET_PDEATHSIG = 1


class WorkerStartError(Exception):
    """A worker exited before it was ready; `code` is its exit code."""

    def __init__(self, index: int, code: int) -> None:
        super().__init__(f"gateway worker {index} exited with code {code} before it was ready")
        self.code = code


def slot_from_env(environ: Mapping[str, str]) -> WorkerSlot | None:
    """This process's worker slot, None when it is not a worker (or the value is malformed)."""
    raw = environ.get(WORKER_ENV)
    if not raw:
        return None
    index, count, directory = raw.split("/", 2)
    slot = WorkerSlot(int(index), int(count), Path("/" + directory.lstrip("/")))
    if not 0 <= slot.index < slot.count:
        raise ValueError(f"{WORKER_ENV}={raw!r}: index out of range")
    return slot


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class _Worker:
    index: int
    process: asyncio.subprocess.Process | None = None
    started_at: float = 0.0
    backoff_s: float = FIRST_BACKOFF_S
    restarts: int = 0
    drain: asyncio.Task[None] | None = field(default=None, repr=False)


class Supervisor:
    def __init__(self, program: Sequence[str], argv: Sequence[str], count: int) -> None:
        self._command = [*program, *argv]
        self.count = count
        self._workers = [_Worker(k) for k in range(count)]
        self._dir: Path | None = None
        self._stopping = asyncio.Event()

    async def run(self, stop: asyncio.Event, on_ready: Callable[[], None] | None = None) -> int:
        """Serve until `stop` is set; 0, or a worker's exit code when one cannot start."""
        self._dir = Path(tempfile.mkdtemp(prefix="pier-gateway-"))  # mode 0700
        try:
            AddressTable.create(self._dir, self.count)
            started = await asyncio.gather(
                *(self._start(w) for w in self._workers), return_exceptions=True
            )
            for outcome in started:
                if isinstance(outcome, WorkerStartError):
                    log.error("event=worker_start_failed code=%d", outcome.code)
                    return outcome.code or 1
                if isinstance(outcome, BaseException):
                    raise outcome
            if on_ready is not None:
                on_ready()
            monitors = [asyncio.create_task(self._watch(w)) for w in self._workers]
            await stop.wait()
            self._stopping.set()
            for task in monitors:
                task.cancel()
            await asyncio.gather(*monitors, return_exceptions=True)
            return 0
        finally:
            self._stopping.set()
            await asyncio.gather(*(self._stop(w) for w in self._workers))
            shutil.rmtree(self._dir, ignore_errors=True)

    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if w.process is not None]

    async def _start(self, worker: _Worker) -> None:
        assert self._dir is not None
        env = {**os.environ, WORKER_ENV: f"{worker.index}/{self.count}/{self._dir}"}
        process = await asyncio.create_subprocess_exec(
            *self._command,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            preexec_fn=_die_with_parent,
        )
        worker.process = process
        assert process.stdout is not None
        while True:
            line = await process.stdout.readline()
            if line == READY_LINE:
                break
            if not line:  # it exited before it was ready
                raise WorkerStartError(worker.index, await process.wait())
            sys.stdout.buffer.write(line)
        worker.started_at = time.monotonic()
        worker.drain = asyncio.create_task(self._drain(process.stdout))
        log.info("event=worker_ready worker=%d pid=%d", worker.index, process.pid)

    @staticmethod
    async def _drain(stdout: asyncio.StreamReader) -> None:
        """Pass on whatever else a worker prints (nothing, normally), so its pipe never fills."""
        while line := await stdout.readline():
            sys.stdout.buffer.write(line)
            sys.stdout.flush()

    async def _watch(self, worker: _Worker) -> None:
        """Restart `worker` whenever it dies, after a backoff that doubles up to the maximum."""
        while not self._stopping.is_set():
            assert worker.process is not None
            code = await worker.process.wait()
            if self._stopping.is_set():
                return
            if time.monotonic() - worker.started_at >= STABLE_S:
                worker.backoff_s = FIRST_BACKOFF_S
            log.warning(
                "event=worker_exited worker=%d code=%d restart_in_s=%.1f",
                worker.index,
                code,
                worker.backoff_s,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), worker.backoff_s)
                return
            worker.backoff_s = min(MAX_BACKOFF_S, worker.backoff_s * 2)
            worker.restarts += 1
            with contextlib.suppress(WorkerStartError):
                await self._start(worker)

    async def _stop(self, worker: _Worker) -> None:
        process = worker.process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                log.warning("event=worker_kill worker=%d pid=%d", worker.index, process.pid)
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if worker.drain is not None:
            await asyncio.gather(worker.drain, return_exceptions=True)
