"""The cap on a partition's producer table (`pier.producer.state.max.producers`): a client may
write batches of any producer id, and each new one was an entry kept for a day, so a tenant
sending a new id with every request grew the broker without bound. Past the cap the least
recently written producer without an open transaction is forgotten, as if expired (its next batch is taken at any
sequence); one with an open transaction stays. The verification states are capped alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokers.app.runtime import log_manager_for
from brokers.common.clock import ManualClock
from brokers.common.config import BrokerConfig, BrokerConfigError
from brokers.log.log_manager import LogManager
from brokers.log.producer_state.manager import DEFAULT_MAX_PRODUCERS, ProducerStateManager
from brokers.records.batch import BatchHeader
from tests.unit.log.test_producer_state import T0, Partition, header

pytestmark = pytest.mark.unit


def table(tmp_path: Path, cap: int) -> Partition:
    return Partition(ProducerStateManager(tmp_path, clock=ManualClock(T0), max_producers=cap))


def test_a_new_producer_past_the_cap_forgets_the_least_recently_written_one(
    tmp_path: Path,
) -> None:
    log = table(tmp_path, 3)
    for pid in (1, 2, 3):
        log.append(header(pid=pid))
    log.append(header(pid=1, seq=1))  # written again: now the most recent
    log.append(header(pid=4))
    assert log.state.producer_ids() == [1, 3, 4]
    assert log.state.check(header(pid=2, seq=7)) is None, "forgotten: taken at any sequence"
    duplicate = log.state.check(header(pid=1, seq=1))
    assert duplicate is not None, "the busy producer's retry is still known as a duplicate"


def test_a_busy_producer_outlasts_a_flood_of_one_batch_producers(tmp_path: Path) -> None:
    """A client taking a new producer id per process (a function per event) beside one
    long-lived producer: the long-lived one keeps its sequence through the flood."""
    log = table(tmp_path, 50)
    sequence = 0
    log.append(header(pid=7, seq=sequence))
    for pid in range(100, 10_100):
        log.append(header(pid=pid))
        if pid % 40 == 0:  # the long-lived producer writes once per 40 others
            assert log.state.last_entry(7) is not None, f"forgotten by {pid}"
            sequence += 1
            assert isinstance(log.append(header(pid=7, seq=sequence)), BatchHeader)
    assert 7 in log.state.producer_ids()
    assert log.state.check(header(pid=7, seq=sequence)) is not None, "its retry: a duplicate"
    assert len(log.state.producer_ids()) == 50


def test_the_order_of_last_writes_survives_a_snapshot(tmp_path: Path) -> None:
    log = table(tmp_path, 3)
    for pid in (1, 2, 3):
        log.append(header(pid=pid))
    log.append(header(pid=1, seq=1))
    log.state.take_snapshot(log.next_offset)
    again = table(tmp_path, 3)
    again.state.load(0, log.next_offset)
    again.next_offset = log.next_offset
    again.append(header(pid=4))
    assert again.state.producer_ids() == [1, 3, 4]


def test_a_producer_with_an_open_transaction_is_never_forgotten(tmp_path: Path) -> None:
    log = table(tmp_path, 2)
    log.append(header(pid=1, transactional=True))
    log.append(header(pid=2))
    log.append(header(pid=3))
    assert log.state.producer_ids() == [1, 3]
    log.append(header(pid=4, transactional=True))
    log.append(header(pid=5, transactional=True))  # nothing idle left to forget: over the cap
    assert log.state.producer_ids() == [1, 4, 5]
    assert set(log.state.ongoing_transactions()) == {1, 4, 5}


def test_a_flood_of_new_ids_stays_within_the_cap(tmp_path: Path) -> None:
    log = table(tmp_path, 50)
    for pid in range(10_000):
        log.append(header(pid=pid, offset=pid))
    assert len(log.state.producer_ids()) == 50
    assert log.state.producer_ids() == list(range(9_950, 10_000))


def test_verification_states_are_capped_alike(tmp_path: Path) -> None:
    log = table(tmp_path, 2)
    for pid in (1, 2, 3):
        log.state.start_verification(pid, 0, 0, supports_epoch_bump=True)
    assert log.state.verification(1) is None
    assert log.state.verification(2) is not None and log.state.verification(3) is not None


def test_the_broker_reads_the_setting(tmp_path: Path) -> None:
    def manager(properties: dict[str, str]) -> LogManager:
        config = BrokerConfig(data_dir=tmp_path / "data", port=0, properties=properties)
        return log_manager_for(config, ManualClock(T0))

    log = manager({}).create("t", 0)
    for pid in range(DEFAULT_MAX_PRODUCERS + 5):
        log.producer_state.update(header(pid=pid, offset=pid))
    assert len(log.producer_state.producer_ids()) == DEFAULT_MAX_PRODUCERS
    small = manager({"pier.producer.state.max.producers": "2"}).create("u", 0)
    for pid in range(5):
        small.producer_state.update(header(pid=pid, offset=pid))
    assert small.producer_state.producer_ids() == [3, 4]
    with pytest.raises(BrokerConfigError):
        manager({"pier.producer.state.max.producers": "0"})
