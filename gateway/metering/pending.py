"""The usage records a writer has not written yet, one queue per `__usage` partition.

Owns: `Entry` (an encoded record and its arrival number) and `PartitionQueue`. A queue's oldest
records form the batch in flight; that batch is kept exactly as it was sent until it is written,
so a resend after an unknown outcome is byte-for-byte the same records and the idempotent producer
can reuse its sequence. Dropping (beyond the writer's bound) takes the oldest records but never
touches a batch while it is being sent. Pure; runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Entry:
    arrival: int  # increases across all queues: the oldest record has the lowest
    key: bytes
    value: bytes


class PartitionQueue:
    def __init__(self) -> None:
        self.in_flight: tuple[Entry, ...] = ()  # sent, outcome not yet known to be a success
        self.waiting: deque[Entry] = deque()
        self.sending = False

    def __len__(self) -> int:
        return len(self.in_flight) + len(self.waiting)

    def next_batch(self, limit: int) -> bool:
        """Make `in_flight` the batch to send next (the failed one again, else the oldest
        waiting records) and mark it as being sent; False when nothing is pending."""
        if not self.in_flight:
            taken = min(limit, len(self.waiting))
            self.in_flight = tuple(self.waiting.popleft() for _ in range(taken))
        self.sending = bool(self.in_flight)
        return self.sending

    def settled(self, batch: tuple[Entry, ...], *, written: bool) -> None:
        """The send of `batch` is over; a written batch leaves the queue."""
        if written and self.in_flight is batch:
            self.in_flight = ()
        self.sending = False

    def droppable(self) -> bool:
        return bool(self.waiting) or (bool(self.in_flight) and not self.sending)

    def oldest_arrival(self) -> int:
        if self.in_flight and not self.sending:
            return self.in_flight[0].arrival
        return self.waiting[0].arrival

    def drop_oldest(self) -> None:
        if self.in_flight and not self.sending:
            self.in_flight = self.in_flight[1:]
        else:
            self.waiting.popleft()
