"""DescribeCluster (key 60, v0–1, KIP-700): the gateway's brokers and the tenant's virtual
cluster id (EP).

Endpoint type (v1, KIP-919): only BROKERS (1) is served; anything else is answered here with
UNSUPPORTED_ENDPOINT_TYPE (controllers are the fleet's, never a tenant's). ACL as Kafka's
AuthHelper.computeDescribeClusterResponse: no check to describe; the cluster's authorized
operations, when asked for, are computed from the tenant's CLUSTER ACLs (0 without DESCRIBE).
Brokers the gateway has no endpoint for are left out; the controller id is kept only if it is
among the brokers shown (else -1, as Kafka answers). Runs on the event loop.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.cluster_view import OPERATIONS_OMITTED, brokers, cluster_operations
from gateway.kafka.filters.common import response
from gateway.kafka.filters.topics_common import safe_message

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 1
BROKERS = 1


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    endpoint_type = getattr(request, "endpoint_type", BROKERS)
    if endpoint_type != BROKERS:
        return Reply(
            response(
                ctx,
                "DescribeClusterResponse",
                error_code=ErrorCode.unsupported_endpoint_type,
                error_message=f"Unsupported endpoint type {endpoint_type}",
                endpoint_type=BROKERS,
                cluster_id="",
                controller_id=-1,
                brokers=(),
                cluster_authorized_operations=OPERATIONS_OMITTED,
            )
        )
    wanted = bool(request.include_cluster_authorized_operations)

    def on_response(answer: Any) -> Any:
        shown = brokers(ctx, answer.brokers, "broker_id")
        controller = answer.controller_id
        return dataclasses.replace(
            answer,
            error_message=safe_message(ctx, answer.error_message),
            cluster_id=ctx.fleet.cluster_id(ctx.namespace.tenant_id),
            brokers=shown,
            controller_id=controller if any(b.broker_id == controller for b in shown) else -1,
            cluster_authorized_operations=cluster_operations(ctx, wanted),
        )

    return Forward(request, on_response)
