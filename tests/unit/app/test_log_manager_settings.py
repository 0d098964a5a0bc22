"""The broker settings `log_manager_for` reads into the log manager."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokers.app.runtime import log_manager_for
from brokers.common.clock import ManualClock
from brokers.common.config import BrokerConfig, BrokerConfigError
from brokers.records.batch import BatchHeader, iter_headers
from brokers.records.builder import build_batch

pytestmark = pytest.mark.unit
NOW = 1_700_000_000_000


def _idempotent_batch() -> bytes:
    return build_batch(
        [(None, b"v")], producer_id=7, producer_epoch=0, base_sequence=0, base_timestamp=NOW
    )


def test_producer_id_expiration_ms_forgets_idle_producers(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    config = BrokerConfig(tmp_path, properties={"producer.id.expiration.ms": "1000"})
    manager = log_manager_for(config, clock)
    manager.startup()
    log = manager.create("t", 0)
    log.append_as_leader(*_prepared(_idempotent_batch()), leader_epoch=0)
    assert log.producer_state.last_entry(7) is not None
    clock.advance(999)
    manager.run_retention()
    assert log.producer_state.last_entry(7) is not None
    clock.advance(1)
    manager.run_retention()
    assert log.producer_state.last_entry(7) is None
    manager.shutdown()


def test_a_bad_producer_id_expiration_is_refused(tmp_path: Path) -> None:
    config = BrokerConfig(tmp_path, properties={"producer.id.expiration.ms": "0"})
    with pytest.raises(BrokerConfigError, match=r"producer\.id\.expiration\.ms"):
        log_manager_for(config, ManualClock(NOW))


def _prepared(data: bytes) -> tuple[bytes, list[tuple[int, BatchHeader]]]:
    return data, list(iter_headers(data))
