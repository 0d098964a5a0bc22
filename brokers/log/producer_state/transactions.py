"""The transactions of a partition that are not yet stable (Kafka's ongoingTxns/unreplicatedTxns).

Owns: the open transactions (producer id -> first offset) and the completed ones whose marker is
not yet known to be replicated (marker offset >= the high watermark), from which the last stable
offset (KIP-98) is computed in O(number of such transactions), never by scanning the log.
- a transaction opens with its producer's first transactional batch and completes with its
  COMMIT/ABORT marker; it then waits in `unreplicated` (marker order) until the high watermark
  passes the marker;
- the first unstable offset is the smallest first offset of both groups; the last stable
  offset is min(that, high watermark);
- the LSO recorded with an aborted transaction in the `.txnindex` is the first offset of the
  oldest other open transaction, or the marker's offset + 1 (Kafka's lastStableOffset(txn)).
The manager keeps this in step with its entries (`current_txn_first_offset`); snapshots keep the
open transactions, replay recomputes the completed ones. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


class UnstableTxns:
    def __init__(self) -> None:
        self._ongoing: dict[int, int] = {}  # producer id -> first offset
        # Marker order; made by the first completed transaction (an empty deque is ~0.6 KiB, and
        # most of a broker's partitions never see a transaction: issue 25's 10,000 partitions).
        self._unreplicated: deque[CompletedTxn] | None = None

    @property
    def ongoing(self) -> Mapping[int, int]:
        return MappingProxyType(self._ongoing)

    @property
    def unreplicated(self) -> tuple[CompletedTxn, ...]:
        return tuple(self._unreplicated or ())

    def begin(self, producer_id: int, first_offset: int) -> None:
        self._ongoing.setdefault(producer_id, first_offset)

    def complete(self, txn: CompletedTxn) -> None:
        self._ongoing.pop(txn.producer_id, None)
        if self._unreplicated is None:
            self._unreplicated = deque()
        self._unreplicated.append(txn)

    def clear(self) -> None:
        self._ongoing.clear()
        self._unreplicated = None

    def on_high_watermark(self, high_watermark: int) -> None:
        """Completed transactions whose marker is below the high watermark are stable."""
        unreplicated = self._unreplicated
        while unreplicated and unreplicated[0].last_offset < high_watermark:
            unreplicated.popleft()

    def first_unstable_offset(self) -> int | None:
        first = min(self._ongoing.values(), default=None)
        for txn in self._unreplicated or ():
            if first is None or txn.first_offset < first:
                first = txn.first_offset
        return first

    def last_stable_offset_for(self, txn: CompletedTxn) -> int:
        """The LSO written with `txn` in the transaction index."""
        others = (first for pid, first in self._ongoing.items() if pid != txn.producer_id)
        return min(others, default=txn.last_offset + 1)
