"""The follower's truncation point from an OffsetForLeaderEpoch answer (KIP-101, KIP-279)."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokers.log.leader_epoch_cache import LeaderEpochCache
from brokers.replication.leader_epoch_truncation import (
    EpochEndOffset,
    Truncation,
    epoch_to_ask,
    truncation_for,
    without_epochs,
)

pytestmark = pytest.mark.unit


def cache(tmp_path: Path, entries: list[tuple[int, int]]) -> LeaderEpochCache:
    tmp_path.mkdir(parents=True, exist_ok=True)
    epochs = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    for epoch, start in entries:
        epochs.assign(epoch, start)
    return epochs


def test_both_know_the_epoch_truncate_to_the_smaller_end(tmp_path: Path) -> None:
    follower = cache(tmp_path, [(0, 0), (2, 10)])
    # The leader's epoch 2 ended at 15; ours goes on to our log end 20: a divergent suffix.
    got = truncation_for(EpochEndOffset(2, 15), follower, log_end_offset=20, high_watermark=5)
    assert got == Truncation(15, completed=True)
    # The leader has more of epoch 2 than we do: keep everything.
    got = truncation_for(EpochEndOffset(2, 30), follower, log_end_offset=20, high_watermark=5)
    assert got == Truncation(20, completed=True)


def test_an_epoch_we_skipped_truncates_to_our_previous_epoch_end_and_asks_again(
    tmp_path: Path,
) -> None:
    follower = cache(tmp_path, [(0, 0), (1, 10), (3, 25)])
    # We asked for epoch 3; the leader never had 3, its largest below is 2, ending at 18.
    got = truncation_for(EpochEndOffset(2, 18), follower, log_end_offset=30, high_watermark=5)
    # We never had 2: our epoch 1 ends where our 3 starts (25); epoch 1 may diverge too.
    assert got == Truncation(25, completed=False)


def test_no_epoch_of_ours_at_or_below_the_leader_answer(tmp_path: Path) -> None:
    follower = cache(tmp_path, [(4, 10)])
    got = truncation_for(EpochEndOffset(2, 7), follower, log_end_offset=12, high_watermark=0)
    # Below our first epoch the cache answers (2, 10) since KAFKA-7415: min with the leader's end.
    assert got == Truncation(7, completed=True)


def test_leader_knows_no_epoch_that_old_falls_back_to_the_high_watermark(tmp_path: Path) -> None:
    follower = cache(tmp_path, [(0, 0), (5, 10)])
    got = truncation_for(EpochEndOffset(-1, -1), follower, log_end_offset=20, high_watermark=8)
    assert got == Truncation(8, completed=True)
    got = truncation_for(EpochEndOffset(-1, -1), follower, log_end_offset=6, high_watermark=8)
    assert got == Truncation(6, completed=True)  # never past our own log end


def test_an_answer_without_an_epoch_truncates_to_the_leader_end(tmp_path: Path) -> None:
    follower = cache(tmp_path, [(0, 0)])
    got = truncation_for(EpochEndOffset(-1, 4), follower, log_end_offset=9, high_watermark=0)
    assert got == Truncation(4, completed=True)


def test_a_follower_without_epochs_does_not_ask_and_truncates_to_its_hw(tmp_path: Path) -> None:
    assert epoch_to_ask(cache(tmp_path, [])) is None
    assert epoch_to_ask(cache(tmp_path / "x", [(0, 0), (3, 4)])) == 3
    assert without_epochs(high_watermark=3, log_end_offset=9) == Truncation(3, completed=True)
    assert without_epochs(high_watermark=12, log_end_offset=9) == Truncation(9, completed=True)
