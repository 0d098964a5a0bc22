"""Small conversions the group handlers share: kio durations to milliseconds, a member's host.

Pure; thread-safe.
"""

from __future__ import annotations

import datetime

from brokers.server.context import RequestContext


def millis(value: datetime.timedelta) -> int:
    return int(value / datetime.timedelta(milliseconds=1))


def client_host(ctx: RequestContext) -> str:
    """Kafka reports a member's host as its InetAddress string, e.g. "/127.0.0.1"."""
    return f"/{ctx.client_host}"
