"""`prepare_own_append` (the coordinators' shortcut) against `prepare_append`: for the batches the
coordinators build — one offset commit, a turn's several joined, a transactional one, a
transaction-state batch, the tiered metadata's batch without a timestamp — and one whose records
do not share a timestamp, under the default policy and under each limit a topic's configuration
sets, both give the same append or refuse with the same error."""

from __future__ import annotations

from typing import Any

import pytest

from brokers.records.builder import build_batch, build_rows_batch, simple_batch
from brokers.records.compression import GZIP
from brokers.records.errors import RecordError
from brokers.records.prepare import PreparedAppend, prepare_append, prepare_own_append
from brokers.records.record import Record
from brokers.records.validate import AppendPolicy

pytestmark = pytest.mark.unit
NOW = 1_700_000_000_000
HOUR = 3_600_000


def _commit(offset: int) -> bytes:
    key, value = b"\x00\x01\x00\x01g\x00\x01t" + bytes(4), offset.to_bytes(8, "big")
    return build_rows_batch(
        [(key, value, (), NOW)], producer_id=-1, producer_epoch=-1, base_sequence=-1
    )


BATCHES = {
    "commit": _commit(5),
    "turn": b"".join(_commit(o) for o in range(3)),
    "transactional": build_batch(
        [(b"k", b"v")], base_timestamp=NOW, producer_id=7, producer_epoch=1, is_transactional=True
    ),
    "state": build_batch([(b"txn-1", b"state"), (b"txn-2", None)], base_timestamp=NOW),
    "no-timestamp": build_batch([Record(offset_delta=0, timestamp_delta=0, key=b"k", value=b"v")]),
    "spread": simple_batch([b"a", b"b"], keys=[b"1", b"2"], timestamps=[NOW - 2 * HOUR, NOW]),
}
POLICIES: dict[str, dict[str, Any]] = {
    "default": {},
    "compacted": {"requires_keys": True},
    "too-large": {"max_message_bytes": 70},
    "too-many-records": {"max_records": 1},
    "recompressed": {"target_codec": GZIP},
    "stale-clock": {"now_ms": NOW + 2 * HOUR},
    "records-ahead": {"now_ms": NOW - 2 * HOUR},  # past timestamp.after.max.ms (an hour)
    "records-at-the-edge": {"now_ms": NOW - HOUR},
    "records-just-past": {"now_ms": NOW - HOUR - 1},
    "records-behind": {"now_ms": NOW + 2 * HOUR, "timestamp_before_max_ms": 2 * HOUR - 1},
    "tight-window": {"timestamp_before_max_ms": HOUR},
    "log-append-time": {"log_append_time": True},
}


def _outcome(prepare: Any, data: bytes, policy: AppendPolicy) -> Any:
    try:
        prepared: PreparedAppend = prepare(data, policy)
    except RecordError as exc:
        return type(exc), str(exc)
    return bytes(prepared.data), prepared.batches


@pytest.mark.parametrize("name", POLICIES)
@pytest.mark.parametrize("kind", BATCHES)
def test_the_shortcut_appends_or_refuses_as_the_full_pass(kind: str, name: str) -> None:
    fields = {"now_ms": NOW, "max_message_bytes": 1 << 20, "origin_client": False}
    policy = AppendPolicy(**(fields | POLICIES[name]))
    data = BATCHES[kind]
    assert _outcome(prepare_own_append, data, policy) == _outcome(prepare_append, data, policy)


@pytest.mark.parametrize("now", [NOW, NOW - HOUR], ids=["now", "records-at-the-edge"])
def test_a_coordinators_batch_takes_the_shortcut(now: int) -> None:
    """Seen by what it skips: the CRC (right by construction) is not checked again, so a batch
    spoiled after building passes here while `prepare_append` refuses it."""
    spoiled = bytearray(BATCHES["turn"])
    spoiled[-1] ^= 0xFF  # the last record's last byte, under the third batch's CRC
    policy = AppendPolicy(now, 1 << 20, origin_client=False)
    prepared = prepare_own_append(bytes(spoiled), policy)
    assert bytes(prepared.data) == bytes(spoiled) and len(prepared.batches) == 3
    with pytest.raises(RecordError):
        prepare_append(bytes(spoiled), policy)
