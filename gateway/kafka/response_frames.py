"""Reading a broker's response frame and setting a response's throttle.

Owns: where a response body starts (after the correlation id and, for flexible versions, the
header's tagged fields) and `with_throttle`, which writes the gateway's throttle time into a kio
response that has the field (the larger of the broker's and the gateway's). Pure; thread-safe.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from brokers.wire.primitives import read_uvarint

if TYPE_CHECKING:
    from gateway.kafka.exchange import Exchange

CORRELATION_BYTES = 4


def body_offset(exchange: Exchange, frame: memoryview) -> int:
    """The offset of the response body in `frame` (correlation id, then tagged fields if flexible)."""
    if not exchange.flexible_response:
        return CORRELATION_BYTES
    count, pos = read_uvarint(frame, CORRELATION_BYTES)
    for _ in range(count):
        _tag, pos = read_uvarint(frame, pos)
        size, pos = read_uvarint(frame, pos)
        pos += size
    return pos


def with_throttle(response: Any, throttle_ms: int) -> Any:
    """`response` with `throttle_time` = max(its own, `throttle_ms`), if it has that field."""
    current = getattr(response, "throttle_time", None)
    if current is None or not dataclasses.is_dataclass(response) or isinstance(response, type):
        return response
    wanted = max(current, timedelta(milliseconds=throttle_ms))
    if wanted == current:
        return response
    return dataclasses.replace(response, throttle_time=wanted)
