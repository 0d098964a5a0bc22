"""The copier's checks catch what they are there for (pure: synthetic outputs, no broker).

A passing copy test means something only if its checks fail on a broken copy: a duplicate, a
lost record, a key out of order or split over partitions, a torn or aborted transaction visible,
a concurrent reader that saw an aborted record or a different order.
"""

from __future__ import annotations

import pytest

from tests.e2e.transactions.copy_checks import (
    Seeded,
    check_atomic,
    check_concurrent,
    check_exact_copy,
)
from tests.e2e.transactions.readers import OutputRecord

pytestmark = pytest.mark.unit

SEEDED = Seeded("in", 2, {b"k0": 3, b"k1": 2})


def out(partition: int, offset: int, key: str, seq: int, txn: str) -> OutputRecord:
    return OutputRecord(partition, offset, key.encode(), f"{key}:{seq}".encode(), txn)


# t/0/1 committed (k0:0, k0:1, k1:0), t/0/2 aborted on purpose (k0:2, k1:1), t/0/3 committed
# (k0:2, k1:1); the abort markers and commit markers take offsets too.
LOG = [
    out(0, 0, "k0", 0, "t/0/1"),
    out(0, 1, "k0", 1, "t/0/1"),
    out(1, 0, "k1", 0, "t/0/1"),
    out(0, 3, "k0", 2, "t/0/2"),
    out(1, 2, "k1", 1, "t/0/2"),
    out(0, 5, "k0", 2, "t/0/3"),
    out(1, 4, "k1", 1, "t/0/3"),
]
COMMITTED = [r for r in LOG if r.txn != "t/0/2"]
REPORTED = {
    "produced": {"t/0/1": 3, "t/0/2": 2, "t/0/3": 2},
    "committed": {"t/0/1": 3, "t/0/3": 2},
    "aborted": {"t/0/2": 2},
}


def ordered(records: list[OutputRecord]) -> list[OutputRecord]:
    return sorted(records, key=lambda r: (r.partition, r.offset))


def test_a_good_copy_passes_every_check() -> None:
    check_exact_copy(SEEDED, ordered(COMMITTED))
    figures = check_atomic(ordered(COMMITTED), ordered(LOG), REPORTED, {"t/0/2"})
    assert (figures.committed, figures.aborted_on_purpose, figures.aborted_records) == (2, 1, 2)
    check_concurrent(COMMITTED, COMMITTED, LOG)


BROKEN_COPIES = {
    "duplicate": ([*COMMITTED, out(0, 7, "k0", 2, "t/0/4")], "duplicates"),
    "lost record": (COMMITTED[:-1], "records in the committed output"),
    "split key": ([*COMMITTED[:-1], out(2, 0, "k1", 1, "t/0/3")], "output partitions"),
}


@pytest.mark.parametrize("case", list(BROKEN_COPIES))
def test_the_exact_copy_check_fails_on(case: str) -> None:
    committed, message = BROKEN_COPIES[case]
    with pytest.raises(AssertionError, match=message):
        check_exact_copy(SEEDED, ordered(committed))


def test_the_exact_copy_check_fails_on_a_key_out_of_order() -> None:
    swapped = [
        out(0, 0, "k0", 1, "t/0/1"),
        out(0, 1, "k0", 0, "t/0/1"),
        *COMMITTED[2:],
    ]
    with pytest.raises(AssertionError, match="output sequence"):
        check_exact_copy(SEEDED, ordered(swapped))


def test_the_atomicity_check_fails_on_a_torn_transaction() -> None:
    torn = [r for r in COMMITTED if r.offset != 4]  # t/0/3 lost one of its two records
    with pytest.raises(AssertionError, match=r"torn|records visible"):
        check_atomic(ordered(torn), ordered(LOG), REPORTED, {"t/0/2"})


def test_the_atomicity_check_fails_on_a_visible_aborted_transaction() -> None:
    with pytest.raises(AssertionError, match="aborted t/0/2"):
        check_atomic(ordered(LOG), ordered(LOG), REPORTED, {"t/0/2"})


def test_the_atomicity_check_fails_when_the_aborted_data_is_not_in_the_log() -> None:
    without = [r for r in LOG if r.txn != "t/0/2"]
    with pytest.raises(AssertionError, match="in the log"):
        check_atomic(ordered(COMMITTED), ordered(without), REPORTED, {"t/0/2"})


def test_the_concurrent_check_fails_on_an_aborted_record_seen() -> None:
    with pytest.raises(AssertionError, match="aborted records"):
        check_concurrent([*COMMITTED, LOG[3]], COMMITTED, LOG)


def test_the_concurrent_check_fails_on_a_different_order_or_a_missing_record() -> None:
    with pytest.raises(AssertionError, match="partition 0"):
        check_concurrent([COMMITTED[1], COMMITTED[0], *COMMITTED[2:]], COMMITTED, LOG)
    with pytest.raises(AssertionError, match="partition 1"):
        check_concurrent(COMMITTED[:-1], COMMITTED, LOG)
