"""InitProducerId (key 22, v0–5): a fresh producer id (epoch 0) for idempotent producers.

Transactional ids need the transaction coordinator, which is not built yet: such requests get
INVALID_REQUEST (a fatal, explained error in every client) rather than a retriable code a client
would loop on. KIP-360 epoch bumps of idempotent producers get a new id, as Kafka does when there
is no transactional id. Runs on the event loop.
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
                error_code=ErrorCode.invalid_request,
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
