"""The gateway's API table (docs/gateway.md, "A request's way"): which APIs it serves, at which versions,
and how; what it advertises in ApiVersions is derived from it.

Three kinds of API are served:
- local: answered by the gateway itself (ApiVersions, SaslHandshake, SaslAuthenticate);
- raw: rewritten on raw bytes on the hot path (Produce, Fetch);
- filtered: decoded with kio and rewritten by one filter module each (`gateway.kafka.filters`).
Everything else (inter-broker, controller, delegation tokens, ACL and quota admin, KIP-932/1071
groups, …) is absent: never advertised, and a request for it is refused, never forwarded (fail
closed). An API the brokers do not serve is not advertised either: the advertised range is the
intersection of the gateway's range and the brokers' (learned from a broker's ApiVersions).

`finalized_features` is the feature levels the gateway passes on from the brokers' ApiVersions:
`transaction.version` 2 only while the table serves what a TV2 producer sends (EndTxn v5,
Produce v12, TxnOffsetCommit v5), else at most 1.

`KIP219_FROM` holds, per API, the first version whose clients back off by `throttle_time_ms`
themselves (KIP-219); for older versions the gateway also delays the throttled response.
Pure; immutable after import; thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from brokers.wire.entities import make
from gateway.kafka.filters import FILTERS

PRODUCE, FETCH, API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 0, 1, 18, 17, 36

LOCAL: dict[int, tuple[int, int]] = {
    API_VERSIONS: (0, 4),
    SASL_HANDSHAKE: (0, 1),
    SASL_AUTHENTICATE: (0, 2),
}
# Produce v0-2 are gone from Kafka 4 (and kio has no schema for them); Produce v12 is v11 on the
# wire (KIP-890 part 2: the leader adds the partition to the transaction); Produce v13 and Fetch
# v13+ name topics by id, which the raw paths check against the tenant's namespace (KIP-516).
RAW: dict[int, tuple[int, int]] = {PRODUCE: (3, 13), FETCH: (4, 18)}
PRE_AUTH = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
# KAFKA-18659, as Kafka 4 does: ApiVersions shows Produce from v0 though only v3+ is served (v0-2
# are still refused), because older librdkafka (2.0.2, in kcat 1.7.1) looks for Produce v0 before
# it compresses with gzip, snappy or lz4, and otherwise silently sends uncompressed batches.
ADVERTISED_MIN: dict[int, int] = {PRODUCE: 0}

KIP219_FROM: dict[int, int] = {
    0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2, 16: 2,
    18: 2, 19: 3, 20: 2, 21: 1, 22: 1, 23: 3, 24: 1, 25: 1, 26: 1, 28: 1, 32: 2, 33: 1, 37: 1,
    42: 1,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ApiRange:
    api_key: int
    min_version: int
    max_version: int

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


def advertised_min(api: ApiRange) -> int:
    """The min version ApiVersions shows for a served API (see ADVERTISED_MIN)."""
    return min(api.min_version, ADVERTISED_MIN.get(api.api_key, api.min_version))


def gateway_ranges() -> dict[int, tuple[int, int]]:
    """Every API the gateway can serve, with its own version range (before the brokers' cap)."""
    ranges = {**LOCAL, **RAW}
    for api_key, module in FILTERS.items():
        ranges[api_key] = (module.MIN_VERSION, module.MAX_VERSION)
    return ranges


def advertised(broker_ranges: Mapping[int, tuple[int, int]]) -> dict[int, ApiRange]:
    """The table the gateway serves and advertises: its ranges intersected with the brokers'."""
    table: dict[int, ApiRange] = {}
    for api_key, (low, high) in gateway_ranges().items():
        if api_key in LOCAL:
            table[api_key] = ApiRange(api_key, low, high)
            continue
        theirs = broker_ranges.get(api_key)
        if theirs is None:
            continue
        lo, hi = max(low, theirs[0]), min(high, theirs[1])
        if lo <= hi:
            table[api_key] = ApiRange(api_key, lo, hi)
    return table


TRANSACTION_VERSION = "transaction.version"
# What a transaction.version 2 client sends (KIP-890 part 2): EndTxn v5, Produce v12 (no
# AddPartitionsToTxn), TxnOffsetCommit v5 (no AddOffsetsToTxn).
_TV2_NEEDS = {26: 5, PRODUCE: 12, 28: 5}
PASSED_FEATURES = frozenset({TRANSACTION_VERSION})


def finalized_features(
    broker_levels: Mapping[str, int], table: Mapping[int, ApiRange]
) -> dict[str, int]:
    """The finalized feature levels a tenant sees: the brokers' known ones, capped by the table."""
    levels = {k: v for k, v in broker_levels.items() if k in PASSED_FEATURES and v > 0}
    tv = levels.get(TRANSACTION_VERSION)
    if tv is not None and tv >= 2:
        served = all(key in table and table[key].serves(v) for key, v in _TV2_NEEDS.items())
        if not served:
            levels[TRANSACTION_VERSION] = 1
    return levels


FEATURES_SINCE, ZERO_MIN_SINCE = 3, 4  # ApiVersions versions (KAFKA-17011 for the second)
FEATURES_EPOCH = 1  # levels never change while the gateway runs; clients need an epoch >= 0


def features(module: ModuleType, version: int, levels: Mapping[str, int]) -> dict[str, Any]:
    """ApiVersions v3+'s feature fields for `levels` (finalized); nothing before v3."""
    if version < FEATURES_SINCE:
        return {}
    return {
        "supported_features": tuple(
            make(module, "SupportedFeatureKey", name=name, min_version=0, max_version=2)
            for name in sorted(PASSED_FEATURES)
            if version >= ZERO_MIN_SINCE
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
            for name, level in sorted(levels.items())
        ),
    }


def client_backs_off(api_key: int, version: int) -> bool:
    """Whether a client of this version honours `throttle_time_ms` itself (KIP-219)."""
    return version >= KIP219_FROM.get(api_key, 0)
