"""The broker's file-descriptor budget: how many more partitions its open-file limit allows.

Owns: `DescriptorBudget` — the process's soft RLIMIT_NOFILE (read at each check, so a limit
raised live with `prlimit` counts at once), the descriptors open now (`/proc/self/fd`), a reserve,
and what one partition costs: 1 descriptor (its active segment's `.log`, read and written through
one read-write descriptor, as Kafka holds one per segment file), measured on this code base,
however many segments it has: an inactive segment holds none and opens its `.log` on demand for a
read (brokers/log/file_records.py), so rolls never grow a partition past what it was promised (one
more descriptor per roll once made 22 of 45 partitions created as allowed fail to roll while
clients held the reserve), and the `.index`, `.timeindex` and `.txnindex` files are open only while
they are written (brokers/log/index_file.py: an append stages its index entries and writes them
8 KiB at a time, at a flush or at a roll). It was 4 (separate read and write descriptors, both
indexes held open), which capped a broker under a hard limit of 20,000 at 4,499 partitions where
Kafka, whose indexes are mmapped and closed, took 5,000. Topic registries
ask it before creating anything, so a CreateTopics or CreatePartitions that the limit cannot hold
is refused whole with a message naming the limit, instead of failing halfway with EMFILE (issue
13). Kafka has no such check (an EMFILE there takes the log dir offline); the refusal is
POLICY_VIOLATION, the code Kafka's controller gives a request too large to carry out.
`DescriptorLimitError` carries the message.

How the limit is split. Descriptors that are not regular files or directories — sockets (client
connections, the listeners, ZooKeeper's and replica fetchers' connections, the metrics endpoint),
pipes, epoll and eventfd instances (the event loop's, and the short-lived ones a client library
such as kazoo makes for each wait), devices — draw on the reserve (a
tenth of the limit, at least 64), which is never promised to partitions (what sockets leave of
it is the moment's headroom of checkpoint writes, on-demand reads of old segments and their
regions in flight; a roll lets go of the old segment's descriptors before the new one opens its
own); files (segments,
indexes, checkpoints, the log file) draw on the rest. Counting only files there is also what
keeps the answer still: an epoll a ZooKeeper client opened for a moment once moved it by one.
Partitions that exist but do not hold their 1 yet were promised it, so those count as taken too
(`Promised`, `promised_to`): each log whose active segment does not hold its descriptor now
(`Log.descriptors_held`: one whose active segment changed back, a follower's truncation, opens it
again at its next read or write) and each deferred log. New and reloaded logs hold theirs from
the start. So a partition fits when `files + promised + max(reserve, others) + 1 <= limit`: while
sockets stay within the reserve, connecting or disconnecting clients never changes how many partitions fit (it used
to: the next admin client's own connections moved the answer by one, issue 13's flaky fd-limit
tests). Unless `max.connections` is set, the listener (`brokers/server/accept.py`) accepts until
the kernel says EMFILE and then backs off; a `max.connections` at or under the reserve (less the
broker's few own sockets) keeps client connections inside it, so they never take the partitions'
share. Without one, connections past the reserve take descriptors
the partitions' share would have had; the budget counts those sockets as taken (the `max`), and
never promises a partition a descriptor a socket holds. What it promises is not held for it: a
connection accepted between the check and the opening can still take it. A topic whose logs are
opened at once then fails with EMFILE and is rolled back whole; a log deferred to later event-loop
slices (wider topics) that fails leaves its partition offline (`brokers/replication/local_topics.py`,
docs/broker-config.md).

At start the broker (and each gateway process) raises its soft limit to the hard one
(`raise_soft_limit`), as the JVM raises Kafka's; the budget then reads the raised limit.

Cost: telling files from the rest takes an `fstat` per open descriptor (~3 µs each; `readlink` of
`/proc/self/fd/N` costs 2.6 times that), and listing `/proc/self/fd` alone takes time in proportion
to the descriptors open (tens of thousands with many partitions). So a check with `at_least`
tries two upper bounds on `files + promised + max(reserve, others)` first, cheapest first: the
size of the process's descriptor table (`FDSize`, one short read), then the listed count, each plus
the reserve and `Promised.at_most` (1 per partition, a count the registry knows at once: it
assumes no partition holds any, so these bounds prove a request fits only while the descriptors
open and 1 per partition stay well under the limit); only a request neither proves fits is
decided on the exact counts (the listing by kind and one look at every log). Reads only; thread-safe.
"""

from __future__ import annotations

import os
import resource
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

DESCRIPTORS_PER_PARTITION = 1
MIN_RESERVE = 64  # sockets: connections, listeners, ZooKeeper, the metrics endpoint


class DescriptorLimitError(Exception):
    """Creating these partitions would exceed the broker's open-file limit."""


def open_descriptors() -> int:
    """Descriptors this process has open now (Linux `/proc/self/fd`, else `/dev/fd`)."""
    for directory in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(directory)) - 1  # less the one listdir itself holds
        except OSError:
            continue
    return 0


@dataclass(frozen=True, slots=True)
class OpenDescriptors:
    """The descriptors open at one moment, by kind."""

    files: int  # regular files and directories: what partitions, checkpoints and logs hold
    others: int  # sockets, pipes, epoll, eventfd, devices: what the reserve holds


def open_by_kind() -> OpenDescriptors:
    """This process's open descriptors, files apart from the rest (one `fstat` each; module
    doc)."""
    for directory in ("/proc/self/fd", "/dev/fd"):
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        files = others = 0
        for name in names:
            try:
                mode = os.fstat(int(name)).st_mode
            except (OSError, ValueError):
                continue  # closed since the listing (the listing's own descriptor among them)
            if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
                files += 1
            else:  # a client library's short-lived epoll or pipe must not move the answer
                others += 1
        return OpenDescriptors(files, others)
    return OpenDescriptors(0, 0)


def descriptor_table_size() -> int | None:
    """An upper bound on the descriptors open, cheap: every open descriptor is below the size of
    the process's descriptor table (Linux `FDSize` in /proc/self/status); None elsewhere."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"FDSize:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def soft_limit() -> int | None:
    """This process's soft RLIMIT_NOFILE now (None: unlimited); `prlimit` may change it live."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def raise_soft_limit(
    getrlimit: Callable[[int], tuple[int, int]] = resource.getrlimit,
    setrlimit: Callable[[int, tuple[int, int]], None] = resource.setrlimit,
    nr_open: Callable[[], int | None] = lambda: _read_int("/proc/sys/fs/nr_open"),
) -> tuple[int, int] | None:
    """Raise the soft RLIMIT_NOFILE to the hard one at start, as the JVM does for Kafka
    (HotSpot's `MaxFDLimit`, on by default): a soft limit of 1024 under a hard one of 524288
    (common defaults) would cap a broker at about 230 partitions where Kafka gets the hard limit.
    An unlimited hard limit is taken as the kernel's `fs.nr_open`. Returns (was, now) when it
    raised the limit, None when there was nothing to raise or the kernel refused (the broker then
    runs on the soft limit it has)."""
    soft, hard = getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else nr_open()
    if target is None or resource.RLIM_INFINITY in (target, soft) or soft >= target:
        return None
    try:
        setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError):
        return None
    return soft, target


def _read_int(path: str) -> int | None:
    try:
        with open(path, "rb") as file:
            return int(file.read().strip())
    except (OSError, ValueError):
        return None


def reserve_for(limit: int) -> int:
    """Descriptors never promised to partitions, the sockets' share: a tenth of the limit, at
    least 64."""
    return max(MIN_RESERVE, limit // 10)


@dataclass(frozen=True, slots=True)
class Promised:
    """Descriptors promised to partitions that exist but have not opened them yet (module doc):
    an upper bound known at once, and the exact count, which may cost a look at every log."""

    at_most: int
    count: Callable[[], int]


NOTHING_PROMISED = Promised(0, lambda: 0)


class HoldsDescriptors(Protocol):
    """A partition's log: how many of its `DESCRIPTORS_PER_PARTITION` it holds open now."""

    @property
    def descriptors_held(self) -> int: ...


def promised_to(
    partitions: int,
    logs: Callable[[], Iterable[HoldsDescriptors]],
    *,
    deferred: int = 0,
    per_partition: int = DESCRIPTORS_PER_PARTITION,
) -> Promised:
    """What `partitions` existing partitions may still open: each open log the part of its
    `per_partition` it does not hold now, each of the `deferred` (counted in `partitions`, not
    opened yet: no log in `logs`) all of them. The bound known at once is all of them."""

    def count() -> int:
        missing = sum(max(0, per_partition - log.descriptors_held) for log in logs())
        return deferred * per_partition + missing

    return Promised(max(partitions, deferred) * per_partition, count)


@dataclass(frozen=True, slots=True)
class DescriptorBudget:
    read_limit: Callable[[], int | None] = soft_limit
    count_open: Callable[[], int] = open_descriptors
    per_partition: int = DESCRIPTORS_PER_PARTITION
    # An upper bound on `count_open`; by default the descriptor table's size when `count_open`
    # is the real count, none for a substituted one.
    count_at_most: Callable[[], int | None] | None = None
    # The exact count by kind; by default `open_by_kind` when `count_open` is the real count,
    # else `count_open`'s count taken as all files (no sockets).
    count_kinds: Callable[[], OpenDescriptors] | None = None

    def partitions_available(
        self, *, at_least: int | None = None, promised: Promised = NOTHING_PROMISED
    ) -> int | None:
        """How many more partitions fit under the limit now; None: no limit. With `at_least`,
        a count that proves that many fit may come from upper bounds on the descriptors open and
        promised (module doc) and be lower than the exact one."""
        limit = self.read_limit()
        if limit is None:
            return None
        reserve = reserve_for(limit)
        if at_least is not None:
            for bound in self._upper_bounds():
                sure = (limit - bound - promised.at_most - reserve) // self.per_partition
                if sure >= at_least:
                    return sure
        now = self._count_kinds()
        free = limit - now.files - promised.count() - max(reserve, now.others)
        return max(0, free // self.per_partition)

    def _upper_bounds(self) -> Iterator[int]:
        """Upper bounds on all descriptors open (so on `files`), cheapest first."""
        at_most = self.count_at_most
        if at_most is None and self.count_open is open_descriptors:
            at_most = descriptor_table_size
        if at_most is not None and (bound := at_most()) is not None:
            yield bound
        yield self.count_open()

    def _count_kinds(self) -> OpenDescriptors:
        if self.count_kinds is not None:
            return self.count_kinds()
        if self.count_open is open_descriptors:
            return open_by_kind()
        return OpenDescriptors(self.count_open(), 0)

    def check(
        self,
        partitions: int,
        what: str,
        *,
        available: int | None = None,
        promised: Promised = NOTHING_PROMISED,
    ) -> None:
        """Raise DescriptorLimitError unless `partitions` more fit (`available`: an estimate
        made elsewhere, e.g. for another broker). `what` names the request in the message."""
        limit = self.read_limit()
        if limit is None:
            return
        if available is None:
            available = self.partitions_available(at_least=partitions, promised=promised) or 0
        if partitions <= available:
            return
        raise DescriptorLimitError(
            f"the broker's open-file limit ({limit}) allows {available} more partitions; "
            f"{what} needs {partitions} (each holds {self.per_partition} "
            f"descriptor{'s' if self.per_partition != 1 else ''}; "
            f"{reserve_for(limit)} are kept for connections and other sockets). Nothing was "
            "created: raise the limit (ulimit -n, systemd LimitNOFILE) or delete topics."
        )
