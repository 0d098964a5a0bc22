"""InitProducerId (key 22, v0–5): a producer id and epoch for an idempotent or transactional producer.

Without a transactional id: a fresh producer id at epoch 0 (KIP-360 bumps of idempotent
producers get a new id too, as Kafka does without a transactional id). With one, the
transaction coordinator answers (`TransactionCoordinator.init_producer_id`: NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS / CONCURRENT_TRANSACTIONS while an open transaction is aborted /
INVALID_TRANSACTION_TIMEOUT / PRODUCER_FENCED, INVALID_PRODUCER_EPOCH before v4). A producer id
without an epoch or the reverse is INVALID_REQUEST for a transactional id (Kafka's KafkaApis).
v6 (KIP-939, two-phase commit) is not served: Kafka 4.1.1 leaves it disabled as an unstable
version too (the differential test compares the ranges). Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.group_conversions import millis
from brokers.handlers.services import ProducerIdSource, TransactionService
from brokers.handlers.txn_codes import for_version
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 22
FENCED_SINCE = 4
NO_PRODUCER_ID = -1


def route(producer_ids: ProducerIdSource, transactions: TransactionService) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        if request.transactional_id is None:
            error, producer_id, epoch = ErrorCode.none, producer_ids.next_producer_id(), 0
        else:
            error, producer_id, epoch = await transactions.coordinator.init_producer_id(
                request.transactional_id,
                millis(request.transaction_timeout),
                getattr(request, "producer_id", NO_PRODUCER_ID),
                getattr(request, "producer_epoch", -1),
            )
        return make(
            module,
            "InitProducerIdResponse",
            throttle_time=throttle(),
            error_code=for_version(error, ctx.api_version, FENCED_SINCE),
            producer_id=producer_id,
            producer_epoch=epoch,
        )

    return Route(API_KEY, 0, 5, handle, name="InitProducerId")
