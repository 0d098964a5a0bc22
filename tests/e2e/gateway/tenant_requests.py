"""Random but well-formed requests of any API and version, as a tenant's client could send them.

Owns: `tenant_requests(api_key, version, names)`, a hypothesis strategy for a kio request entity of
that API and version in which every field holds a plausible value: names (topics, groups,
transactional ids, coordinator keys, config resources) drawn from `NamePool` (the tenant's own
names, the other tenant's names and fleet names, internal topics), small partition numbers and
offsets, short timeouts (so no request parks in the broker for long), a valid record batch or
none, consumer-protocol subscription and assignment bytes naming pool topics, and every array
0–3 long (or null where the schema allows). Unlike `tests.e2e.request_fuzz`, which mutates bytes
to break framing, these requests parse: they exercise each API's rewriting, not its decoder.
Pure; thread-safe.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
    is_optional,
)

from brokers.records.builder import build_batch

Strategy = st.SearchStrategy[Any]
CONFIG_NAMES = ("retention.ms", "cleanup.policy", "segment.bytes", "min.insync.replicas")
CONFIG_VALUES = ("1000", "delete", "compact", "1048576", "")


@dataclass(frozen=True)
class NamePool:
    """Names requests are built from, and the uuids their topic-id fields may carry."""

    names: tuple[str, ...]
    topic_ids: tuple[uuid.UUID, ...] = ()
    record_value: bytes = b"value"


def ms(low: int, high: int) -> Strategy:
    return st.integers(low, high).map(lambda n: datetime.timedelta(milliseconds=n))


def _int_rules() -> dict[str, Strategy]:
    partition = st.integers(0, 2)
    return {
        "acks": st.sampled_from([1, -1]),
        "replica_id": st.sampled_from([-1, -1, -1, -1, -2, 0]),
        "num_partitions": st.integers(-1, 2),
        "replication_factor": st.sampled_from([-1, 1]),
        "count": st.integers(1, 4),
        "endpoint_type": st.sampled_from([1, 1, 2]),
        "key_type": st.sampled_from([0, 0, 1, 2]),
        "resource_type": st.sampled_from([2, 2, 32, 4, 8, 16]),
        "config_operation": st.integers(0, 3),
        "isolation_level": st.integers(0, 1),
        "producer_id": st.just(-1),
        "producer_epoch": st.just(-1),
        "min_bytes": st.integers(0, 1),
        "max_bytes": st.just(1 << 20),
        "partition_max_bytes": st.just(1 << 20),
        "session_id": st.just(0),
        "session_epoch": st.sampled_from([-1, 0]),
        "timestamp": st.sampled_from([-2, -1, 0]),
        "offset": st.integers(-1, 3),
        "fetch_offset": st.integers(0, 3),
        "committed_offset": st.integers(-1, 5),
        "log_start_offset": st.just(-1),
        "index": partition,
        "partition": partition,
        "partition_index": partition,
        "partition_indexes": partition,
        "partitions": partition,
        "broker_ids": st.integers(0, 1),
    }


_INTS = _int_rules()
_TIMES: dict[str, Strategy] = {
    "max_wait": ms(0, 100),
    "session_timeout": ms(100, 1_000),
    "rebalance_timeout": ms(0, 300),
    "transaction_timeout": ms(100, 1_000),
    "retention_time": st.just(datetime.timedelta(milliseconds=-1)),
}
_FIXED_STRINGS: dict[str, Sequence[str | None]] = {
    "protocol_type": ("consumer", "consumer", "", "connect"),
    "protocol_name": ("range", "roundrobin", ""),
    "states_filter": ("Stable", "Empty", "Dead"),
    "types_filter": ("classic", "consumer"),
    "cluster_id": (None, None, None, "fleet"),
    "rack_id": ("",),
    "reason": ("r", None),
    "configuration_keys": CONFIG_NAMES,
    "value": CONFIG_VALUES,
}


def _consumer_bytes(names: Sequence[str], *, subscription: bool) -> bytes:
    """ConsumerProtocolSubscription v1 (topics, user data, owned partitions) or Assignment v1."""

    def string(text: str) -> bytes:
        raw = text.encode()
        return struct.pack(">h", len(raw)) + raw

    partitions = struct.pack(">i", 1) + struct.pack(">i", 0)
    topic_partitions = struct.pack(">i", len(names)) + b"".join(
        string(n) + partitions for n in names
    )
    if subscription:
        topics = struct.pack(">i", len(names)) + b"".join(string(n) for n in names)
        return struct.pack(">h", 1) + topics + struct.pack(">i", -1) + topic_partitions
    return struct.pack(">h", 1) + topic_partitions + struct.pack(">i", -1)


@st.composite
def _bytes_field(draw: st.DrawFn, field_name: str, pool: NamePool) -> bytes:
    kind = draw(st.sampled_from(["protocol", "protocol", "empty", "junk"]))
    if kind == "empty":
        return b""
    if kind == "junk":
        return draw(st.binary(max_size=16))
    names = draw(st.lists(st.sampled_from(pool.names), max_size=3))
    return _consumer_bytes(names, subscription=field_name == "metadata")


def _records(pool: NamePool) -> Strategy:
    batch = build_batch([(b"k", pool.record_value)])
    return st.sampled_from([batch, batch, None])


def _string(field_name: str, owner: str, pool: NamePool) -> Strategy:
    if field_name in _FIXED_STRINGS:
        return st.sampled_from(_FIXED_STRINGS[field_name])
    if field_name == "name" and "Config" in owner:
        return st.sampled_from(CONFIG_NAMES)
    if field_name == "member_id" and owner == "JoinGroupRequest":
        # Never a new member (`""`): Pier's coordinator can hang a rebalance of members whose
        # protocols share none (Kafka answers INCONSISTENT_GROUP_PROTOCOL); see the report.
        return st.sampled_from(["member-1", *pool.names[:2]])
    if field_name == "member_id":
        return st.sampled_from(["", "", "member-1", *pool.names[:2]])
    if field_name == "committed_metadata":
        return st.sampled_from(["", "meta", None])
    return st.sampled_from(pool.names)


def _primitive(field: dataclasses.Field[Any], owner: str, pool: NamePool) -> Strategy:
    kind = get_schema_field_type(field)
    name = field.name
    if kind == "string":
        return _string(name, owner, pool)
    if kind in ("int8", "int16", "int32", "int64", "uint16"):
        return _INTS.get(name, st.integers(-1, 2))
    if kind in ("timedelta_i32", "timedelta_i64"):
        return _TIMES.get(name, ms(0, 500))
    if kind == "bool":
        return st.booleans()
    if kind == "bytes":
        return _bytes_field(name, pool)
    if kind == "records":
        return _records(pool)
    if kind == "uuid":
        return st.sampled_from([uuid.UUID(int=0), *pool.topic_ids, uuid.uuid4()])
    if kind == "float64":
        return st.just(0.0)
    raise AssertionError(f"no strategy for {owner}.{name} ({kind})")


def _entity(cls: Any, pool: NamePool, depth: int = 0) -> Strategy:
    fields: dict[str, Strategy] = {}
    for field in dataclasses.fields(cls):
        if field.name.startswith("__"):
            continue
        kind = classify_field(field)
        value: Strategy
        if isinstance(kind, EntityField):
            value = st.deferred(_deferred(kind.type_, pool, depth + 1))
        elif isinstance(kind, EntityTupleField):
            element = st.deferred(_deferred(kind.type_, pool, depth + 1))
            value = st.lists(element, max_size=3).map(tuple)
        elif isinstance(kind, PrimitiveTupleField):
            value = st.lists(_primitive(field, cls.__name__, pool), max_size=3).map(tuple)
        else:
            value = _primitive(field, cls.__name__, pool)
        if is_optional(field) and not isinstance(kind, EntityField):
            value = st.one_of(value, st.none())
        fields[field.name] = value
    return st.fixed_dictionaries(fields).map(lambda values: cls(**values))


def _deferred(cls: Any, pool: NamePool, depth: int) -> Callable[[], Strategy]:
    return lambda: _entity(cls, pool, depth)


def tenant_requests(api_key: int, version: int, pool: NamePool) -> Strategy:
    """A kio request entity of `api_key` v`version` with fields drawn as described above."""
    return _entity(load_request_schema(api_key, version), pool)
