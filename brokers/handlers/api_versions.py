"""ApiVersions (key 18): the versions we serve, derived from the route table, and the features.

Unknown (newer) request versions never reach here: the dispatcher answers them with error 35 in
a v0 body (KIP-511). v3+ also carry the broker's feature levels (tagged fields): the one Pier
finalizes is `transaction.version` (KIP-890 part 2; Kafka 4's clients use EndTxn v5, Produce
v12's implicit AddPartitionsToTxn and TxnOffsetCommit v5 only when it is finalized at 2), at the
level `TransactionConfig.transaction_version` allows. Supported ranges are shown from v4 only
for features whose minimum is 0 (KAFKA-17011: older clients reject a 0 minimum), as Kafka does.
Runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from brokers.handlers.build import make, response_module, throttle
from brokers.server.context import RequestContext
from brokers.server.routes import Route, RouteTable
from brokers.wire.errors import ErrorCode

API_KEY = 18
FEATURES_SINCE = 3
ZERO_MIN_SINCE = 4  # KAFKA-17011
TRANSACTION_VERSION = "transaction.version"
MAX_TRANSACTION_VERSION = 2
# Feature levels never change while a broker runs, so one epoch is enough; clients keep the
# highest epoch they saw, and any epoch >= 0 makes them read the levels.
FEATURES_EPOCH = 1


def route(table: RouteTable, finalized: Mapping[str, int] | None = None) -> Route:
    """`finalized`: feature name → finalized level (absent or 0: not finalized)."""
    levels = {name: level for name, level in (finalized or {}).items() if level > 0}

    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        keys = tuple(
            make(module, "ApiVersion", api_key=k, min_version=lo, max_version=hi)
            for k, lo, hi in table.version_ranges()
        )
        fields: dict[str, Any] = {}
        if ctx.api_version >= FEATURES_SINCE:
            fields = _features(module, ctx.api_version, levels)
        return make(
            module,
            "ApiVersionsResponse",
            error_code=ErrorCode.none,
            api_keys=keys,
            throttle_time=throttle(),
            **fields,
        )

    return Route(API_KEY, 0, 4, handle, name="ApiVersions")


def _features(module: Any, version: int, levels: Mapping[str, int]) -> dict[str, Any]:
    supported = {TRANSACTION_VERSION: (0, MAX_TRANSACTION_VERSION)}
    return {
        "supported_features": tuple(
            make(module, "SupportedFeatureKey", name=name, min_version=lo, max_version=hi)
            for name, (lo, hi) in supported.items()
            if lo > 0 or version >= ZERO_MIN_SINCE
        ),
        "finalized_features_epoch": FEATURES_EPOCH,
        "finalized_features": tuple(
            make(
                module,
                "FinalizedFeatureKey",
                name=name,
                max_version_level=level,
                min_version_level=level,
            )
            for name, level in levels.items()
        ),
    }
