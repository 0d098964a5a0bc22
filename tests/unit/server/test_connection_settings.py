"""`connections.max.idle.ms` and `queued.max.request.bytes`: Kafka's names, defaults and checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokers.common.config import BrokerConfig, BrokerConfigError

pytestmark = pytest.mark.unit
MiB = 1024 * 1024


def config(**properties: str) -> BrokerConfig:
    return BrokerConfig(data_dir=Path("/nonexistent"), properties=properties)


def test_defaults_are_kafkas_idle_limit_and_a_512_mib_request_bound() -> None:
    assert config().connections_max_idle_ms == 600_000
    assert config().queued_max_request_bytes == 512 * MiB


def test_negative_values_mean_never_and_unbounded_as_in_kafka() -> None:
    settings = {"connections.max.idle.ms": "-1", "queued.max.request.bytes": "-1"}
    parsed = config(**settings)
    parsed.validate()
    assert (parsed.connections_max_idle_ms, parsed.queued_max_request_bytes) == (-1, -1)


def test_a_bound_below_socket_request_max_bytes_is_refused_at_start() -> None:
    with pytest.raises(BrokerConfigError, match=r"at least socket\.request\.max\.bytes"):
        config(**{"queued.max.request.bytes": str(10 * MiB)}).validate()
    with pytest.raises(BrokerConfigError, match="is not an integer"):
        config(**{"connections.max.idle.ms": "ten minutes"}).validate()


def test_the_default_bound_grows_with_a_larger_socket_request_max_bytes() -> None:
    parsed = config(**{"socket.request.max.bytes": str(1024 * MiB)})
    assert parsed.queued_max_request_bytes == 1024 * MiB
