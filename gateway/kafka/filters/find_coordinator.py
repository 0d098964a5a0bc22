"""FindCoordinator (key 10, v0–6): the coordinator of one of the tenant's groups or
transactional ids, at a gateway endpoint.

Keys are renamed by key type (v0–3 `key`, v4+ `coordinator_keys`): 0 group (DESCRIBE on the GROUP,
else GROUP_AUTHORIZATION_FAILED), 1 transaction (DESCRIBE on the TRANSACTIONAL_ID, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as Kafka's KafkaApis.handleFindCoordinatorRequest. Share
(2) and unknown key types are INVALID_REQUEST, never forwarded. The coordinator's host and port
become the gateway's endpoint for it; one the gateway has no endpoint for is
COORDINATOR_NOT_AVAILABLE (retriable). Runs on the event loop.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import entity, response
from gateway.kafka.filters.topics_common import Batch, safe_message, stripped

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6
FIRST_BATCHED_VERSION = 4
_RESOURCES = {
    0: ("GROUP", ErrorCode.group_authorization_failed),
    1: ("TRANSACTIONAL_ID", ErrorCode.transactional_id_authorization_failed),
}
_NOWHERE = {"node_id": -1, "host": "", "port": -1}


def _refusal(ctx: FilterContext, key_type: int, key: str) -> tuple[ErrorCode, str] | None:
    if key_type not in _RESOURCES:
        return ErrorCode.invalid_request, f"Unsupported coordinator key type {key_type}"
    resource_type, code = _RESOURCES[key_type]
    if not ctx.allowed("DESCRIBE", resource_type, key):
        return code, f"Not authorized to describe {resource_type} {key}"
    return None


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    key_type = getattr(request, "key_type", 0)
    if ctx.api_version < FIRST_BATCHED_VERSION:
        refused = _refusal(ctx, key_type, request.key)
        if refused is not None:
            code, message = refused
            return Reply(
                response(
                    ctx,
                    "FindCoordinatorResponse",
                    error_code=code,
                    error_message=message,
                    **_NOWHERE,
                )
            )
        renamed = dataclasses.replace(request, key=ctx.namespace.fleet(request.key))
        return Forward(renamed, lambda answer: _located(ctx, answer))
    batch, sent = Batch(), []
    for key in request.coordinator_keys:
        refused = _refusal(ctx, key_type, key)
        if refused is None:
            batch.forward(key)
            sent.append(ctx.namespace.fleet(key))
        else:
            code, message = refused
            batch.refuse(
                key,
                entity(
                    ctx, "Coordinator", key=key, error_code=code, error_message=message, **_NOWHERE
                ),
            )
    if not batch.forwarded:
        return Reply(response(ctx, "FindCoordinatorResponse", coordinators=batch.merge(())))

    def on_response(answer: Any) -> Any:
        located = ((key, _located(ctx, c)) for key, c in stripped(ctx, answer.coordinators, "key"))
        return dataclasses.replace(answer, coordinators=batch.merge(located))

    return Forward(dataclasses.replace(request, coordinator_keys=tuple(sent)), on_response)


def _located(ctx: FilterContext, found: Any) -> Any:
    """A response or a v4+ `Coordinator` with the gateway's endpoint for its node."""
    message = safe_message(ctx, getattr(found, "error_message", None))
    changes: dict[str, Any] = {}
    if any(f.name == "error_message" for f in dataclasses.fields(found)):
        changes["error_message"] = message
    endpoint = ctx.fleet.endpoint(found.node_id) if found.error_code == ErrorCode.none else None
    if endpoint is not None:
        changes["host"], changes["port"] = endpoint
    elif found.error_code == ErrorCode.none:
        changes.update(_NOWHERE, error_code=ErrorCode.coordinator_not_available)
    else:
        changes.update(_NOWHERE)
    return dataclasses.replace(found, **changes)
