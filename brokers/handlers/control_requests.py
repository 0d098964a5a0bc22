"""Routing for the controller→broker APIs (keys 4–7), which kio does not know.

Owns: `control_route`, a `Route` whose one version is served through the dispatcher's raw-bytes
(`legacy`) path: the request body is decoded with `brokers.controller.requests`, the handler's
kio-style response is encoded with it, and the flexible response header's empty tagged-field
section is added (the dispatcher writes the correlation id only). Handlers here are synchronous:
each applies the controller's order at once, in request order. Pure wiring; thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from brokers.controller import control_api as rq
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.headers import parse_request_header
from brokers.wire.primitives import MalformedRequestError

ControlHandler = Callable[[Any], Any]
NAMES = {
    rq.LEADER_AND_ISR: "LeaderAndIsr",
    rq.STOP_REPLICA: "StopReplica",
    rq.UPDATE_METADATA: "UpdateMetadata",
    rq.CONTROLLED_SHUTDOWN: "ControlledShutdown",
}


def control_route(api_key: int, handle: ControlHandler) -> Route:
    version = rq.VERSIONS[api_key]
    schema = rq.REQUESTS[api_key]

    def legacy(_ctx: RequestContext, frame: memoryview, _offset: int) -> bytes:
        _header, offset = parse_request_header(frame, flexible=True)  # header v2: tagged fields
        try:
            request = rq.decode(schema, frame, offset)
        except rq.MalformedControlRequestError as exc:
            raise MalformedRequestError(str(exc)) from None
        return b"\x00" + rq.encode(handle(request))

    async def unreachable(_ctx: RequestContext, _request: Any) -> Any:
        raise AssertionError("control APIs are served by their raw-bytes handler")

    return Route(
        api_key,
        version,
        version,
        unreachable,
        refused_below=version + 1,
        legacy=legacy,
        name=NAMES[api_key],
    )
