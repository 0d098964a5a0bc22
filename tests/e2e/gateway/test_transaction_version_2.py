"""A transaction version 2 producer through the gateway (issue 27 item 2), with the raw requests
of tests/integration/transactions/test_transaction_version_2.py on a tenant's SASL connection: the
gateway passes on `transaction.version` 2, Produce v12 adds the tenant's partitions on the raw path,
TxnOffsetCommit v5 adds the tenant's group's offsets partition through its filter (no
AddOffsetsToTxn), EndTxn v5 answers the bumped epochs, the zombie is fenced, and a read_committed
consumer of the tenant reads the committed record only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.e2e.gateway.sasl_wire import login
from tests.e2e.transactions.readers import READ_COMMITTED, read_topic
from tests.gateway_stack import GatewayStack
from tests.integration.transactions.test_transaction_version_2 import TOPIC, tv2_flow

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
TENANT = "acme"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with GatewayStack(Path(tmp_path_factory.mktemp("tv2-raw-gateway"))) as s:
        admin = AdminClient(s.client_config(TENANT))
        for future in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
            future.result(30)
        yield s


def test_a_tv2_producer_through_the_gateway(stack: GatewayStack) -> None:
    with login(stack, TENANT) as wire:
        tv2_flow(wire)
    seen = read_topic(
        stack.bootstrap, TOPIC, 2, READ_COMMITTED, settings=stack.client_config(TENANT)
    )
    assert [r.value for r in seen] == [b"committed-0"]
