"""InitProducerId (key 22, v0–5): a fresh producer id (epoch 0) for idempotent producers.

Transactional ids need the transaction coordinator, which is not built yet: such requests get
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, the answer FindCoordinator gives for them (see
find_coordinator for why that code). It is fatal in librdkafka (whose InitProducerId retries
INVALID_REQUEST forever) and an error the Java producer surfaces, never a code a client loops on.
An empty transactional id stays INVALID_REQUEST, as Kafka's coordinator answers it. KIP-360 epoch
bumps of idempotent producers get a new id, as Kafka does when there is no transactional id.
Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.services import ProducerIdSource
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 22


def route(producer_ids: ProducerIdSource) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        if request.transactional_id is not None:
            return make(
                module,
                "InitProducerIdResponse",
                throttle_time=throttle(),
                error_code=_transactional_error(request.transactional_id),
                producer_id=-1,
                producer_epoch=-1,
            )
        return make(
            module,
            "InitProducerIdResponse",
            throttle_time=throttle(),
            error_code=ErrorCode.none,
            producer_id=producer_ids.next_producer_id(),
            producer_epoch=0,
        )

    return Route(API_KEY, 0, 5, handle, name="InitProducerId")


def _transactional_error(transactional_id: str) -> ErrorCode:
    if not transactional_id:
        return ErrorCode.invalid_request
    return ErrorCode.transactional_id_authorization_failed  # no transaction coordinator yet
