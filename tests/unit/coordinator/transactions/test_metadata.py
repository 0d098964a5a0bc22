"""Kafka's transaction state machine: which transitions exist, the two-step prepare/complete
with its pending state, and what a completed transition changes."""

from __future__ import annotations

import pytest

from brokers.coordinator.transactions.metadata import (
    VALID_PREVIOUS,
    IllegalTransitionError,
    TransactionMetadata,
    TxnState,
)
from brokers.coordinator.transactions.records import decode_value, encode_value

pytestmark = pytest.mark.unit
S = TxnState
NOW = 1_700_000_000_000


def fresh(**kwargs: object) -> TransactionMetadata:
    fields: dict[str, object] = {"producer_id": 7, "timeout_ms": 60_000, "update_ms": NOW}
    fields.update(kwargs)
    return TransactionMetadata("tx", **fields)  # type: ignore[arg-type]


def test_states_and_names_are_kafkas() -> None:
    assert [(s.value, s.label) for s in TxnState] == [
        (0, "Empty"),
        (1, "Ongoing"),
        (2, "PrepareCommit"),
        (3, "PrepareAbort"),
        (4, "CompleteCommit"),
        (5, "CompleteAbort"),
        (6, "Dead"),
        (7, "PrepareEpochFence"),
    ]
    assert TxnState.from_label("Ongoing") is S.ONGOING and TxnState.from_label("x") is None


def test_valid_previous_states_are_kafkas() -> None:
    assert {
        S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_COMMIT: {S.ONGOING},
        # Kafka 4 (KIP-890 part 2): a TV2 client may abort with no transaction open
        S.PREPARE_ABORT: {
            S.ONGOING,
            S.PREPARE_EPOCH_FENCE,
            S.EMPTY,
            S.COMPLETE_COMMIT,
            S.COMPLETE_ABORT,
        },
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
        S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    } == VALID_PREVIOUS


def test_a_whole_transaction_step_by_step() -> None:
    meta = fresh()
    transit = meta.prepare_increment_producer_epoch(60_000, None, NOW)
    assert not isinstance(transit, int)
    assert meta.pending_state is S.EMPTY
    meta.complete_transition(transit)
    assert (meta.state, meta.producer_epoch) == (S.EMPTY, 0)
    assert meta.pending_state is None
    meta.complete_transition(meta.prepare_add_partitions([("t", 0)], NOW + 1))
    assert (meta.state, meta.start_ms, meta.partitions) == (S.ONGOING, NOW + 1, {("t", 0)})
    meta.complete_transition(meta.prepare_add_partitions([("t", 1)], NOW + 2))
    assert meta.start_ms == NOW + 1 and meta.partitions == {("t", 0), ("t", 1)}
    meta.complete_transition(meta.prepare_abort_or_commit(True, NOW + 3))
    assert meta.state is S.PREPARE_COMMIT
    complete = meta.prepare_complete(NOW + 4)
    assert complete.partitions == frozenset()
    meta.complete_transition(complete)
    assert (meta.state, meta.partitions, meta.update_ms) == (S.COMPLETE_COMMIT, set(), NOW + 4)


def test_one_transition_at_a_time() -> None:
    meta = fresh(producer_epoch=0)
    meta.prepare_add_partitions([("t", 0)], NOW)
    with pytest.raises(IllegalTransitionError):
        meta.prepare_add_partitions([("t", 1)], NOW)


@pytest.mark.parametrize(
    ("state", "prepare"),
    [
        (S.EMPTY, lambda m: m.prepare_abort_or_commit(True, NOW)),
        (S.EMPTY, lambda m: m.prepare_fence_producer_epoch()),
        (S.ONGOING, lambda m: m.prepare_dead()),
        (S.PREPARE_COMMIT, lambda m: m.prepare_add_partitions([("t", 0)], NOW)),
        (S.COMPLETE_ABORT, lambda m: m.prepare_complete(NOW)),
    ],
)
def test_transitions_kafka_does_not_have_are_refused(state: TxnState, prepare: object) -> None:
    meta = fresh(producer_epoch=0, state=state)
    with pytest.raises(IllegalTransitionError):
        prepare(meta)  # type: ignore[operator]
    assert meta.pending_state is None


def test_completing_a_transit_that_does_not_match_is_refused() -> None:
    meta = fresh(producer_epoch=0)
    transit = meta.prepare_add_partitions([("t", 0)], NOW)
    meta.producer_epoch = 3  # changed underneath: the write no longer describes this state
    with pytest.raises(IllegalTransitionError):
        meta.complete_transition(transit)


def test_fencing_bumps_the_epoch_once_even_after_a_failed_fence() -> None:
    meta = fresh(producer_epoch=4, state=S.ONGOING, partitions=[("t", 0)], start_ms=NOW)
    assert meta.prepare_fence_producer_epoch().producer_epoch == 5
    meta.pending_state = None
    meta.has_failed_epoch_fence = True
    assert meta.prepare_fence_producer_epoch().producer_epoch == 4


def test_metadata_survives_the_log_format() -> None:
    meta = fresh(producer_epoch=2, state=S.ONGOING, partitions=[("t", 1), ("u", 0)], start_ms=NOW)
    transit = meta.prepare_abort_or_commit(False, NOW + 9)
    loaded = TransactionMetadata.from_log("tx", decode_value(encode_value(transit.log_value())))  # type: ignore[arg-type]
    assert (loaded.state, loaded.producer_id, loaded.producer_epoch) == (S.PREPARE_ABORT, 7, 2)
    assert loaded.partitions == {("t", 1), ("u", 0)} and loaded.start_ms == NOW
    assert loaded.update_ms == NOW + 9 and loaded.pending_state is None
