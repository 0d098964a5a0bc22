"""Every partition log of one log dir (Kafka's LogManager, one directory).

Owns: the log dir itself (validated, locked with `flock` on `.lock` so two brokers never share it),
the per-dir checkpoints (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`), the
clean-shutdown marker `.kafka_cleanshutdown`, the registry of open logs, topic deletion and the
periodic duties the broker schedules: retention, flush, checkpoint, delayed file deletion and
compaction (`run_cleaner` / `run_cleaner_async`, through the dir's LogCleaner, which owns
`cleaner-offset-checkpoint`).

Startup: a marker means the previous run closed every log cleanly, so logs open without the full
recovery scan; the marker is removed once all logs are open (a crash from then on is unclean
again). A corrupt checkpoint is logged and ignored (logs then recover from offset 0, which is
slow but safe). Directories named `*-delete` are leftovers of deleted partitions and are removed.
Deleting a partition renames its directory to `<topic>-<partition>.<uuid>-delete` at once (so a
new partition of the same name can be created) and removes it after `file.delete.delay.ms`
(Kafka's async delete); a fetch answer still holding one of its file regions then keeps that
file open until it is sent or dropped (file_records' `FileHandle`), never a bare number.

Storage failures (docs/storage-errors.md): a log that went offline (log.py) is skipped by the
periodic duties and only released at shutdown; then, or when any close or the final checkpoint
fails, the clean-shutdown marker is not written, so the next start recovers every log. Every
file call goes through the `FileOps` given here (tests inject faults through it).

Everything runs on the broker's event loop; not thread-safe. Only `run_cleaner_async` moves
work to a worker thread (see log_cleaner), never touching a Log from there, and `prepare`
makes files on one, where the files of deleted segments and the directories of deleted
partitions are removed too once their `file.delete.delay.ms` passed (unlinking a 1 GiB segment
held the loop 241 ms, a thousand partition directories half a second). `prepare`
makes the new, empty logs of a topic about to be created: first their directories and first
segments' empty files on that file thread (system calls only:
each is a journaled write that can wait milliseconds for the file system's commit, which
stalled every other request when the loop made them), then one `Log` per loop turn over those
files, built without a system call (`Log.adopt_new`: the thread hands over each `.log`
descriptor; a `Log.open` there held the GIL against the loop, 5 ms at a time); `create` then
takes them, `drop_prepared` removes those not taken. Its caller reserves the topic's name so
nothing else creates those logs meanwhile.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import heapq
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from brokers.common.clock import Clock
from brokers.log.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_offsets,
    write_offsets,
)
from brokers.log.cleaner.config import CleanerConfig
from brokers.log.cleaner.log_cleaner import LogCleaner
from brokers.log.config import LogConfig
from brokers.log.errors import CorruptCheckpointError, LogDirError, StorageError
from brokers.log.file_ops import OS_FILES, FileOps, fsync_paths
from brokers.log.log import Log, parse_topic_partition
from brokers.log.producer_state.manager import DEFAULT_MAX_PRODUCERS
from brokers.log.segment import LOG_SUFFIX, segment_path

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_SUFFIX = "-delete"
BACKGROUND_NICE = 10  # the file threads' nice value (the loop's thread keeps the process's)


class LogManager:
    def __init__(
        self, log_dir: Path, *, clock: Clock, default_config: LogConfig,
        config_for: Callable[[str], LogConfig] | None = None,
        producer_id_expiration_ms: int = 86400000, cleaner_config: CleanerConfig | None = None,
        files: FileOps = OS_FILES, max_producers: int = DEFAULT_MAX_PRODUCERS,
    ) -> None:  # fmt: skip
        self.log_dir = log_dir
        self._files = files
        self.default_config = default_config
        self._clock = clock
        self._config_for = config_for
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self._max_producers = max_producers  # per partition's producer state
        self._logs: dict[tuple[str, int], Log] = {}
        self._prepared: dict[tuple[str, int], Log] = {}  # made by `prepare`, not yet taken
        # Deleted partitions' renamed directories by removal time, a heap of (due ms, directory):
        # their logs are dropped at deletion (a region in flight keeps its own file open).
        self._doomed: list[tuple[int, Path]] = []
        self._lock_fd: int | None = None
        # One thread each, made on first use: "files" (new logs, deletions), "flush" (rolls).
        self._threads: dict[str, concurrent.futures.ThreadPoolExecutor] = {}
        self.cleaner = LogCleaner(log_dir, clock=clock, config=cleaner_config)

    # -- lifecycle --------------------------------------------------------------------------

    def startup(self) -> None:
        self._prepare_dir()
        self.cleaner.startup()
        marker = self.log_dir / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        recovery_points = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT)
        log_starts = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT)
        for directory in sorted(self.log_dir.iterdir()):
            if not directory.is_dir():
                continue
            if directory.name.endswith(DELETE_SUFFIX):
                shutil.rmtree(directory, ignore_errors=True)
                continue
            try:
                topic, partition = parse_topic_partition(directory)
            except LogDirError:
                log.warning("ignoring %s: not a partition directory", directory)
                continue
            key = (topic, partition)
            self._logs[key] = Log.open(
                directory, self._config(topic), clock=self._clock,
                recovery_point=recovery_points.get(key, 0), log_start_offset=log_starts.get(key, 0),
                had_clean_shutdown=clean, producer_id_expiration_ms=self._producer_id_expiration_ms,
                max_producers=self._max_producers,
                files=self._files,
            )  # fmt: skip
        marker.unlink(missing_ok=True)

    def _prepare_dir(self) -> None:
        if self.log_dir.exists() and not self.log_dir.is_dir():
            raise LogDirError(f"log dir {self.log_dir} is not a directory")
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LogDirError(f"log dir {self.log_dir} cannot be created: {exc}") from exc
        if not os.access(self.log_dir, os.R_OK | os.W_OK | os.X_OK):
            raise LogDirError(f"log dir {self.log_dir} is not readable and writable")
        try:
            fd = os.open(self.log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LogDirError(f"log dir {self.log_dir} is not writable: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise LogDirError(
                f"log dir {self.log_dir} is locked by another process ({LOCK_FILE})"
            ) from exc
        self._lock_fd = fd

    def _read_checkpoint(self, name: str) -> dict[tuple[str, int], int]:
        try:
            return read_offsets(self.log_dir / name)
        except CorruptCheckpointError as exc:
            log.warning("ignoring %s: %s", name, exc)
            return {}

    def _config(self, topic: str) -> LogConfig:
        return self.default_config if self._config_for is None else self._config_for(topic)

    def shutdown(self) -> None:
        """Close every log (fsync, snapshots), checkpoint, then mark the shutdown clean, unless
        a log is offline or anything failed: the next start then recovers."""
        self.cleaner.shutdown()
        for pool in self._threads.values():
            pool.shutdown(wait=True)
        self._threads.clear()
        clean = True
        for partition_log in self._logs.values():
            try:
                partition_log.close()
            except StorageError:
                clean = False  # logged when the log went offline
        try:
            self.checkpoint()
        except OSError as exc:
            log.error("event=checkpoint_failed log_dir=%s error=%r", self.log_dir, str(exc))
            clean = False
        _remove_directories([directory for _, directory in self._doomed])
        self._doomed.clear()
        if clean:
            try:
                (self.log_dir / CLEAN_SHUTDOWN_MARKER).touch()
                _fsync_directory(self.log_dir)
            except OSError as exc:  # no marker: the next start recovers, which is safe
                log.error("event=clean_marker_failed log_dir=%s error=%r", self.log_dir, str(exc))
        self._logs.clear()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor drops the flock
            self._lock_fd = None

    # -- registry ---------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def logs(self) -> Iterable[Log]:
        return list(self._logs.values())

    def online_logs(self) -> list[Log]:
        """The logs the periodic duties work on: offline ones are left alone until restart."""
        return [lg for lg in self._logs.values() if not lg.offline]

    def create(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The partition's log, created empty if it does not exist yet (Kafka's getOrCreateLog)."""
        key = (topic, partition)
        existing = self._logs.get(key)
        if existing is not None:
            return existing
        prepared = self._prepared.pop(key, None)
        if prepared is not None:
            self._logs[key] = prepared
            return prepared
        created = Log.open(
            self.log_dir / f"{topic}-{partition}", config or self._config(topic),
            clock=self._clock, had_clean_shutdown=True,
            producer_id_expiration_ms=self._producer_id_expiration_ms,
                max_producers=self._max_producers, files=self._files,
        )  # fmt: skip
        self._logs[key] = created
        return created

    async def prepare(self, topic: str, partitions: range, config: LogConfig) -> None:
        """Make the new logs of `topic`'s `partitions` for `create` to take, one per event-loop
        turn (requests in between). Nothing is prepared when one of their directories exists
        already (`create` then opens them as before); on an error none is left behind and the
        error is raised."""
        directories = [self.log_dir / f"{topic}-{index}" for index in partitions]
        if any(directory.exists() for directory in directories):
            return
        made: list[Log] = []
        loop = asyncio.get_running_loop()
        job = loop.run_in_executor(self._thread("files"), self._make_files, directories)
        try:
            descriptors = await asyncio.shield(job)
            for directory, fd in zip(directories, descriptors, strict=True):
                await asyncio.sleep(0)  # let waiting requests run before each log
                made.append(self._adopt(directory, config, fd))
        except BaseException:
            if job.done():
                self._discard(job, made, directories)
            else:  # cancelled while the thread makes files: remove them once it is done
                job.add_done_callback(lambda _: self._discard(job, made, directories))
            raise
        for new_log in made:
            self._prepared[(new_log.topic, new_log.partition)] = new_log

    def _make_files(self, directories: list[Path]) -> list[int]:
        """On the file-maker thread: each new log's directory and its first segment's empty
        `.log`, left open read-write for the log to take (its descriptors, in order); its
        indexes are made when it holds data (index_file). Nothing but system calls, so the GIL
        is free while each waits for the file system."""
        descriptors: list[int] = []
        try:
            for directory in directories:
                directory.mkdir()
                log_path = segment_path(directory, 0, LOG_SUFFIX)
                descriptors.append(self._files.open(log_path, os.O_RDWR | os.O_CREAT | os.O_EXCL))
        except BaseException:
            for fd in descriptors:
                os.close(fd)
            raise
        return descriptors

    def _adopt(self, directory: Path, config: LogConfig, fd: int) -> Log:
        try:
            return Log.adopt_new(
                directory, config, fd, clock=self._clock,
                producer_id_expiration_ms=self._producer_id_expiration_ms,
                max_producers=self._max_producers, files=self._files,
            )  # fmt: skip
        except BaseException:
            os.close(fd)
            raise

    def _discard(
        self, job: asyncio.Future[list[int]], made: list[Log], directories: list[Path]
    ) -> None:
        """Undo a `prepare` that failed or was cancelled: the logs made, the descriptors the
        thread opened that no log took, the directories."""
        for new_log in made:
            new_log.release()
        if not job.cancelled() and job.exception() is None:
            for fd in job.result()[len(made) :]:
                os.close(fd)
        for directory in directories:
            shutil.rmtree(directory, ignore_errors=True)

    def _thread(self, name: str) -> concurrent.futures.ThreadPoolExecutor:
        """The single worker thread `pier-log-<name>`, started on first use."""
        pool = self._threads.get(name)
        if pool is None:
            pool = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix=f"pier-log-{name}", initializer=background_priority
            )
            self._threads[name] = pool
        return pool

    def drop_prepared(self, topic: str) -> None:
        """Remove the prepared logs of `topic` that `create` did not take (its creation failed)."""
        for key in [key for key in self._prepared if key[0] == topic]:
            unused = self._prepared.pop(key)
            unused.release()
            if key not in self._logs:
                shutil.rmtree(unused.directory, ignore_errors=True)

    def delete(self, topic: str, partition: int, *, sync: bool = True) -> bool:
        """Retire the log, rename its directory `...-delete`, remove it after the delay.
        `sync=False` leaves the log dir's fsync to the caller (`sync_log_dir`, once for a
        topic's partitions). The log itself is dropped now: a topic churn kept ~40 objects a
        partition alive for `file.delete.delay.ms`, which the collector scanned again and again
        (docs/benchmarks.md, "Topic churn and the collector")."""
        doomed = self._logs.pop((topic, partition), None)
        if doomed is None:
            return False
        doomed.retire()
        self.cleaner.forget(topic, partition)
        target = self.log_dir / f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
        doomed.directory.rename(target)
        if sync:
            _fsync_directory(self.log_dir)
        due = self._clock.time_ms() + doomed.config.file_delete_delay_ms
        heapq.heappush(self._doomed, (due, target))
        return True

    def sync_log_dir(self) -> None:
        """fsync the log dir: renames made with `delete(sync=False)` are durable after this."""
        _fsync_directory(self.log_dir)

    # -- periodic duties --------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write every log's recovery point (the flushed offset) and log start offset."""
        write_offsets(
            self.log_dir / RECOVERY_POINT_CHECKPOINT,
            {(lg.topic, lg.partition): lg.recovery_point for lg in self._logs.values()},
            self._files,
        )
        write_offsets(
            self.log_dir / LOG_START_OFFSET_CHECKPOINT,
            {(lg.topic, lg.partition): lg.log_start_offset for lg in self._logs.values()},
            self._files,
        )

    def run_retention(self) -> int:
        """Retention over every log; returns the number of segments deleted."""
        deleted = 0
        for partition_log in self.online_logs():
            deleted += partition_log.delete_old_segments()
            partition_log.remove_expired_producers()
        return deleted

    def run_cleaner(self, now_ms: int | None = None) -> int:
        """Compaction on this thread: each eligible compacted log once, dirtiest first, up to its
        high watermark; returns the rounds completed. Blocks the caller for whole rounds."""
        return self.cleaner.run(self.online_logs(), now_ms)

    async def run_cleaner_async(self, now_ms: int | None = None) -> int:
        """`run_cleaner` with the heavy work on a worker thread and the swaps on the loop: what
        the broker schedules every log.cleaner.backoff.ms."""
        return await self.cleaner.run_async(self.online_logs(), now_ms)

    async def run_flush_async(self) -> None:
        """`run_flush` as the broker schedules it (every log.flush.scheduler.interval.ms): the
        segments rolled since the last flush are fsynced on the flush thread, the recovery
        point moved once they are (an fsync of a rolled 1 GiB segment's dirty pages held the
        loop ~0.45 s at every roll under load). A log whose flush.ms elapsed is flushed here
        as by `run_flush`."""
        now = self._clock.time_ms()
        loop = asyncio.get_running_loop()
        for partition_log in self.online_logs():
            if now - partition_log.last_flush_ms >= partition_log.config.flush_ms:
                try:
                    partition_log.flush()
                except StorageError:
                    continue  # that log went offline (logged); the others are still flushed
                continue
            plan = partition_log.rolled_files()
            if plan is None:
                continue
            sync_dir = partition_log.directory if plan.directory else None
            error: OSError | None = None
            try:
                await loop.run_in_executor(
                    self._thread("flush"), fsync_paths, self._files, plan.paths, sync_dir
                )
            except OSError as exc:
                error = exc
            try:
                partition_log.rolled_synced(plan, error)
            except StorageError:
                continue  # offline now (logged)

    def run_flush(self) -> None:
        """fsync logs whose flush.ms elapsed, and segments rolled since the last flush (Kafka
        flushes a segment when it is rolled, which moves the recovery point forward)."""
        now = self._clock.time_ms()
        for partition_log in self.online_logs():
            try:
                if now - partition_log.last_flush_ms >= partition_log.config.flush_ms:
                    partition_log.flush()
                elif partition_log.recovery_point < partition_log.active_segment.base_offset:
                    partition_log.flush(partition_log.active_segment.base_offset)
            except StorageError:
                continue  # that log went offline (logged); the others are still flushed

    def run_delayed_deletes(self) -> int:
        """Remove files of deleted segments and partitions whose delay passed; returns a count."""
        now = self._clock.time_ms()
        removed, files = 0, []
        for partition_log in self._logs.values():
            count, paths = partition_log.expired_segment_files(now)
            removed += count
            files.extend(paths)
        if files:  # unlinking a 1 GiB segment held the loop 241 ms on this disk
            self._thread("files").submit(_unlink_files, self._files, files)
        gone: list[Path] = []
        while self._doomed and self._doomed[0][0] <= now:
            gone.append(heapq.heappop(self._doomed)[1])
        if gone:  # a thousand partition directories took the loop half a second here
            self._thread("files").submit(_remove_directories, gone)
        return removed + len(gone)


def background_priority() -> None:
    """Run the calling thread at `BACKGROUND_NICE`: on a busy machine the scheduler then gives
    the event loop's thread the core first, and file work (a creation's `open`s cost 0.4-0.9 ms
    of kernel time each on this machine's disk, ~1 core through a topic churn) takes what is
    left. Linux applies a thread's own nice value (`setpriority` on its thread id)."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)


def _unlink_files(files: FileOps, paths: list[Path]) -> None:
    """On the file thread: the files of deleted segments whose delay passed (closed already)."""
    for path in paths:
        try:
            files.unlink(path)
        except OSError as exc:  # the segment is out of the log; only its space is not back
            log.error("event=segment_unlink_failed path=%s error=%r", path, str(exc))


def _remove_directories(directories: list[Path]) -> None:
    """On the file thread: the directories of deleted partitions whose delay passed."""
    for directory in directories:
        shutil.rmtree(directory, ignore_errors=True)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
