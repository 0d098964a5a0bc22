"""Deadlines of groups, so the periodic tick only looks at groups with something due.

Owns: `DeadlineQueue`, a min-heap of (deadline, group id). Scheduling never removes older
entries: a popped group is re-checked in full against its current deadlines, so stale entries
only cost one look (lazy invalidation, as Kafka's timing wheel does with cancelled tasks).
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import heapq
import itertools
import math


class DeadlineQueue:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str]] = []
        self._sequence = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(self, deadline: float, group_id: str) -> None:
        if math.isfinite(deadline):
            heapq.heappush(self._heap, (deadline, next(self._sequence), group_id))

    def pop_due(self, now: float) -> list[str]:
        """Group ids with a deadline at or before `now`, each once, earliest first."""
        due: dict[str, None] = {}
        while self._heap and self._heap[0][0] <= now:
            due[heapq.heappop(self._heap)[2]] = None
        return list(due)

    def next_deadline(self) -> float:
        return self._heap[0][0] if self._heap else math.inf
