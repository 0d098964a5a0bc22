"""DescribeTransactions (key 65, v0, KIP-664): the state of transactional ids coordinated here.

Per id: state name, timeout, start time (-1 for none), producer id and epoch, and the partitions
of the open transaction — or NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS /
TRANSACTIONAL_ID_NOT_FOUND / INVALID_REQUEST (`TransactionCoordinator.describe`). The admin
client sends each id to its coordinator. Runs on the event loop.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from types import ModuleType
from typing import Any

from brokers.coordinator.transactions.views import DescribedTransaction
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.services import TransactionService
from brokers.server.context import RequestContext
from brokers.server.routes import Route

API_KEY = 65


def route(transactions: TransactionService) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        states = tuple(
            _state(module, transactions.coordinator.describe(transactional_id))
            for transactional_id in request.transactional_ids
        )
        return make(
            module,
            "DescribeTransactionsResponse",
            throttle_time=throttle(),
            transaction_states=states,
        )

    return Route(API_KEY, 0, 0, handle, name="DescribeTransactions")


def _state(module: ModuleType, described: DescribedTransaction) -> Any:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in described.partitions:
        by_topic[topic].append(partition)
    return make(
        module,
        "TransactionState",
        error_code=described.error,
        transactional_id=described.transactional_id,
        transaction_state=described.state,
        transaction_timeout=datetime.timedelta(milliseconds=described.timeout_ms),
        # Not nullable: an Empty id has -1 ms, as Kafka answers (kio cannot read it back).
        transaction_start_time=datetime.datetime.fromtimestamp(
            described.start_ms / 1000, tz=datetime.UTC
        ),
        producer_id=described.producer_id,
        producer_epoch=described.producer_epoch,
        topics=tuple(
            make(module, "TopicData", topic=topic, partitions=tuple(ids))
            for topic, ids in sorted(by_topic.items())
        ),
    )
