"""Small pieces every API filter shares: building a response of the request's version, and the
identity rewrite. Pure; thread-safe.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from brokers.wire.entities import make, response_module
from gateway.kafka.filter import FilterContext

NO_THROTTLE = timedelta(0)


def response(ctx: FilterContext, name: str, /, **fields: Any) -> Any:
    """A response entity `name` of the request's API and version; fields that version lacks are
    dropped (as `brokers.wire.entities.make` does); `throttle_time` defaults to zero (the session
    sets the real one)."""
    fields.setdefault("throttle_time", NO_THROTTLE)
    return make(response_module(ctx.api_key, ctx.api_version), name, **fields)


def entity(ctx: FilterContext, name: str, /, **fields: Any) -> Any:
    """A nested response entity (e.g. one topic's result) of the request's version."""
    return make(response_module(ctx.api_key, ctx.api_version), name, **fields)


def unchanged(response: Any) -> Any:
    return response
