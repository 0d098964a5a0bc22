"""DescribeCluster (key 60, v0–1, KIP-700): cluster id, controller and the live brokers.

Owns: answering from the metadata cache as Kafka's AuthHelper.computeDescribeClusterResponse
does. v1 adds `endpoint_type` (KIP-919): brokers answer BROKERS (1); CONTROLLERS (2) is
MISMATCHED_ENDPOINT_TYPE and anything else UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST on v0).
v2 (KIP-1073) only adds fenced brokers, a state Pier's brokers do not have, so it is not served.
With no authorizer, a client asking for the cluster's authorized operations gets every operation
Kafka defines for the cluster resource. Runs on the event loop.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.services import MetadataView
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 60
BROKERS, CONTROLLERS = 1, 2
_ENDPOINT_NAMES = {BROKERS: "BROKER", CONTROLLERS: "CONTROLLER"}
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# Create, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite
ALL_CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def route(metadata: MetadataView) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        endpoint_type = getattr(request, "endpoint_type", BROKERS)
        if endpoint_type != BROKERS:
            return _refused(module, ctx.api_version, endpoint_type)
        brokers = tuple(
            make(
                module,
                "DescribeClusterBroker",
                broker_id=b.node_id,
                host=b.host,
                port=b.port,
                rack=b.rack,
            )
            for b in sorted(metadata.brokers.values(), key=lambda b: b.node_id)
        )
        # Kafka answers -1 rather than name a controller the client cannot find among the brokers.
        controller = metadata.controller_id if metadata.controller_id in metadata.brokers else -1
        wants_operations = request.include_cluster_authorized_operations
        return make(
            module,
            "DescribeClusterResponse",
            throttle_time=throttle(),
            error_code=ErrorCode.none,
            error_message=None,
            endpoint_type=BROKERS,
            cluster_id=metadata.cluster_id,
            controller_id=controller,
            brokers=brokers,
            cluster_authorized_operations=ALL_CLUSTER_OPERATIONS
            if wants_operations
            else AUTHORIZED_OPERATIONS_OMITTED,
        )

    return Route(API_KEY, 0, 1, handle, name="DescribeCluster")


def _refused(module: ModuleType, version: int, endpoint_type: int) -> Any:
    if endpoint_type in _ENDPOINT_NAMES:
        code = ErrorCode.mismatched_endpoint_type
        message = (
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
            f"type {_ENDPOINT_NAMES[endpoint_type]}"
        )
    else:
        code = ErrorCode.unsupported_endpoint_type
        message = f"Unsupported endpoint type {endpoint_type}"
    return make(
        module,
        "DescribeClusterResponse",
        throttle_time=throttle(),
        error_code=ErrorCode.invalid_request if version == 0 else code,
        error_message=message,
        endpoint_type=BROKERS,
        cluster_id="",
        controller_id=-1,
        brokers=(),
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
