"""The broker's file-descriptor budget: how many more partitions its open-file limit allows.

Owns: `DescriptorBudget` — the process's soft RLIMIT_NOFILE (read at each check, so a limit
raised live with `prlimit` counts at once), the descriptors open now (`/proc/self/fd`), a reserve
kept free for connections, segment rolls and checkpoint writes, and what one partition costs: 4
descriptors (its `.log` opened for reading and, from the first append, for writing, plus `.index`
and `.timeindex`), measured on this code base. Topic registries ask it
before creating anything, so a CreateTopics or CreatePartitions that the limit cannot hold is
refused whole with a message naming the limit, instead of failing halfway with EMFILE (issue 13).
Kafka has no such check (an EMFILE there takes the log dir offline); the refusal is
POLICY_VIOLATION, the code Kafka's controller gives a request too large to carry out.
`DescriptorLimitError` carries the message. Listing `/proc/self/fd` costs time in proportion to
the descriptors open (tens of thousands with many partitions), so a check first tries the size of
the process's descriptor table (`FDSize`, one short read), an upper bound on the count: only a
request that does not fit under that bound lists them. Reads only; thread-safe.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from dataclasses import dataclass

DESCRIPTORS_PER_PARTITION = 4
MIN_RESERVE = 64  # connections, rolls, checkpoints, ZooKeeper, the metrics endpoint


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


def reserve_for(limit: int) -> int:
    """Descriptors never promised to partitions: a tenth of the limit, at least 64."""
    return max(MIN_RESERVE, limit // 10)


@dataclass(frozen=True, slots=True)
class DescriptorBudget:
    read_limit: Callable[[], int | None] = soft_limit
    count_open: Callable[[], int] = open_descriptors
    per_partition: int = DESCRIPTORS_PER_PARTITION
    # An upper bound on `count_open`; by default the descriptor table's size when `count_open`
    # is the real count, none for a substituted one.
    count_at_most: Callable[[], int | None] | None = None

    def partitions_available(self, *, at_least: int | None = None) -> int | None:
        """How many more partitions fit under the limit now; None: no limit. With `at_least`,
        a count that proves that many fit may come from the cheap upper bound on the open
        descriptors (module doc) and be lower than the exact one."""
        limit = self.read_limit()
        if limit is None:
            return None
        reserve = reserve_for(limit)
        at_most = self.count_at_most
        if at_most is None and self.count_open is open_descriptors:
            at_most = descriptor_table_size
        if at_least is not None and at_most is not None and (bound := at_most()) is not None:
            sure = (limit - bound - reserve) // self.per_partition
            if sure >= at_least:
                return sure
        free = limit - self.count_open() - reserve
        return max(0, free // self.per_partition)

    def check(self, partitions: int, what: str, *, available: int | None = None) -> None:
        """Raise DescriptorLimitError unless `partitions` more fit (`available`: an estimate
        made elsewhere, e.g. for another broker). `what` names the request in the message."""
        limit = self.read_limit()
        if limit is None:
            return
        if available is None:
            available = self.partitions_available(at_least=partitions) or 0
        if partitions <= available:
            return
        raise DescriptorLimitError(
            f"the broker's open-file limit ({limit}) allows {available} more partitions; "
            f"{what} needs {partitions} (each holds {self.per_partition} descriptors, "
            f"{reserve_for(limit)} are kept for connections). Nothing was created: raise the "
            "limit (ulimit -n, systemd LimitNOFILE) or delete topics."
        )
