"""Until transactions exist, FindCoordinator (key type 1) and InitProducerId with a transactional
id answer TRANSACTIONAL_ID_AUTHORIZATION_FAILED, a code clients treat as fatal, in every version;
idempotent producers and group lookups are unaffected."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brokers.app.runtime import Broker
from brokers.handlers import find_coordinator, init_producer_id
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.admin_harness import call, entity, routed, standalone_broker

pytestmark = pytest.mark.unit
FIND, INIT = 10, 22


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with standalone_broker(tmp_path) as b:
        yield b


@pytest.mark.parametrize("version", [1, 2, 3])  # v0 has no key type: groups only
def test_find_transaction_coordinator_is_fatal_with_a_message(broker: Broker, version: int) -> None:
    request = entity(FIND, version, "FindCoordinatorRequest", key="tx", key_type=1)
    answer = call(routed(broker, find_coordinator.API_KEY), version, request)
    assert answer.error_code == ErrorCode.transactional_id_authorization_failed
    assert (answer.node_id, answer.host, answer.port) == (-1, "", -1)
    assert answer.error_message is not None
    assert "Transactions are not available" in answer.error_message


@pytest.mark.parametrize("version", [4, 5, 6])
def test_batched_lookup_answers_each_transactional_id(broker: Broker, version: int) -> None:
    request = entity(
        FIND, version, "FindCoordinatorRequest", key_type=1, coordinator_keys=("a", "b")
    )
    answer = call(routed(broker, find_coordinator.API_KEY), version, request)
    assert [(c.key, c.error_code) for c in answer.coordinators] == [
        ("a", ErrorCode.transactional_id_authorization_failed),
        ("b", ErrorCode.transactional_id_authorization_failed),
    ]
    assert all("Transactions" in (c.error_message or "") for c in answer.coordinators)


@pytest.mark.parametrize("version", range(6))
def test_init_producer_id(broker: Broker, version: int) -> None:
    def init(transactional_id: str | None) -> tuple[ErrorCode, int]:
        request = entity(
            INIT,
            version,
            "InitProducerIdRequest",
            transactional_id=transactional_id,
            transaction_timeout=60_000,
            producer_id=-1,
            producer_epoch=-1,
        )
        answer = call(routed(broker, init_producer_id.API_KEY), version, request)
        return answer.error_code, answer.producer_id

    assert init("tx") == (ErrorCode.transactional_id_authorization_failed, -1)
    assert init("") == (ErrorCode.invalid_request, -1)  # as Kafka's coordinator answers it
    error, producer_id = init(None)  # idempotent producers still get an id
    assert error == ErrorCode.none and producer_id >= 0
