"""DescribeTransactions answers for a transactional id that never began a transaction carry
TransactionStartTimeMs -1 (Kafka's and Pier's coordinators both), which kio's timestamp reader
refuses. The client (and the gateway, which decodes through it) must read it as "no start time"
and, re-encoding what it read, send the same bytes on."""

from __future__ import annotations

import datetime

import pytest

from brokers.client.messages import decode_response
from brokers.handlers.build import make, response_module, throttle
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import encode_entity

pytestmark = pytest.mark.unit
API_KEY = 65
NO_START = datetime.datetime.fromtimestamp(-0.001, tz=datetime.UTC)  # kio writes this as -1
STARTED = datetime.datetime.fromtimestamp(1_700_000_000.123, tz=datetime.UTC)


def encoded(start: datetime.datetime) -> bytes:
    module = response_module(API_KEY, 0)
    topic = make(module, "TopicData", topic="orders", partitions=(0, 2))
    state = make(
        module,
        "TransactionState",
        error_code=ErrorCode.none,
        transactional_id="tx-a",
        transaction_state="Ongoing",
        transaction_timeout=datetime.timedelta(minutes=1),
        transaction_start_time=start,
        producer_id=4000,
        producer_epoch=3,
        topics=(topic,),
    )
    return encode_entity(
        make(
            module,
            "DescribeTransactionsResponse",
            throttle_time=throttle(),
            transaction_states=(state,),
        )
    )


@pytest.mark.parametrize(("start", "read"), [(NO_START, None), (STARTED, STARTED)])
def test_start_time_minus_one_reads_as_none_and_round_trips(
    start: datetime.datetime, read: datetime.datetime | None
) -> None:
    body = encoded(start)
    response = decode_response(API_KEY, 0, memoryview(body), 0)
    (state,) = response.transaction_states
    assert state.transaction_start_time == read
    assert (state.producer_id, state.topics[0].partitions) == (4000, (0, 2))
    assert encode_entity(response) == body
