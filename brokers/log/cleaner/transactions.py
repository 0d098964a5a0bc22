"""What compaction knows of transactions as it walks a log (Kafka's CleanedTransactionMetadata).

Owns, for one walk over the batches of a log in offset order (building the offset map, or the
cleaning of a round, carried from group to group):
- the aborted transactions of the walked range, read from the `.txnindex` (`Log.collect_aborted`,
  on the event loop when the round is planned) and taken in as the walk reaches their first offset;
- `on_batch(header)`: a data batch of an aborted transaction may be discarded (True); a
  transactional batch of any other producer marks that producer's transaction as having data;
- `on_control_batch(batch, header)`: whether a marker may be discarded (once its delete horizon has
  passed: the caller's rule): an ABORT marker when no batch of its transaction was walked, a COMMIT
  marker when no batch of its producer was walked since the producer's previous marker, an empty
  control batch (a marker already emptied) always, a control record that is no marker (KRaft's
  types) never. An ABORT marker that stays because batches of its transaction were walked is
  listed in `take_retained()` for the `.txnindex` of the cleaned segment holding it.
"Walked", not "kept": every round cleans the log from its first segment, so a marker outlives its
transaction's data by one round at least, and consumers reading committed data always find the
index entry of aborted data still in the log. An aborted transaction may be listed by several
segments' look-ups (its data and its marker in different segments): it is taken in once.

Not thread-safe; one instance per walk (the worker thread of a round owns it).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from typing_extensions import Buffer

from brokers.log.txn_index import AbortedTxn
from brokers.records.batch import BatchHeader
from brokers.records.builder import read_batch
from brokers.records.control import ABORT, COMMIT, control_type_of


@dataclass(slots=True)
class _OngoingAbort:
    txn: AbortedTxn
    walked: bool = False  # a data batch of this transaction was walked


class CleanedTransactions:
    def __init__(self, aborted: Iterable[AbortedTxn] = ()) -> None:
        self._ahead: list[tuple[int, int, AbortedTxn]] = []  # heap by first offset
        self._known: set[tuple[int, int]] = set()  # (producer id, first offset) taken in
        self._aborting: dict[int, _OngoingAbort] = {}  # producer id -> its aborted txn walked into
        self._committing: set[int] = set()  # producers with data walked since their last marker
        self._retained: list[AbortedTxn] = []
        self.add_aborted(aborted)

    def add_aborted(self, aborted: Iterable[AbortedTxn]) -> None:
        """Aborted transactions of the range about to be walked (duplicates are ignored)."""
        for txn in aborted:
            key = (txn.producer_id, txn.first_offset)
            if key not in self._known:
                self._known.add(key)
                heapq.heappush(self._ahead, (txn.first_offset, txn.producer_id, txn))

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch was walked: True when it belongs to an aborted transaction."""
        self._reach(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._aborting.get(header.producer_id)
        if ongoing is None:
            self._committing.add(header.producer_id)
            return False
        ongoing.walked = True
        return True

    def on_control_batch(self, batch: Buffer, header: BatchHeader) -> bool:
        """A control batch (whole, CRC checked here) was walked: True when it may be discarded."""
        self._reach(header.last_offset)
        if header.records_count == 0:
            return True  # a marker emptied by an earlier round: nothing left to keep
        _, records = read_batch(batch)
        control_type = control_type_of(records[0])
        producer_id = header.producer_id
        if control_type == ABORT:
            ongoing = self._aborting.pop(producer_id, None)
            if ongoing is not None and ongoing.walked:
                self._retained.append(ongoing.txn)
                return False
            return True
        if control_type == COMMIT:
            if producer_id in self._committing:
                self._committing.discard(producer_id)
                return False
            return True
        return False

    def take_retained(self) -> list[AbortedTxn]:
        """Aborted transactions whose ABORT marker was kept since the last call, in log order."""
        retained, self._retained = self._retained, []
        return retained

    def _reach(self, offset: int) -> None:
        """Take in the aborted transactions starting at or before `offset`."""
        ahead = self._ahead
        while ahead and ahead[0][0] <= offset:
            _, producer_id, txn = heapq.heappop(ahead)
            self._aborting.setdefault(producer_id, _OngoingAbort(txn))
