"""Isolation, property-tested: for every group and transaction filter, random requests naming
tenant A's resources and random upstream answers naming tenant A's, tenant B's (`bolt_…`) and
internal topics (embedded consumer-protocol bytes included) never give the client anything that
shows `bolt_`, `__consumer_offsets` or A's own `acme_` prefix, in the encoded bytes.

Entities are drawn from kio's own classes by walking their fields. The upstream world is the one
the brokers can produce: names (and error messages) may be anyone's, other strings are the
tenant's own (member ids, states), and the embedded bytes of a group are consumer-protocol bytes
when the group's protocol type is `consumer`, opaque tenant bytes otherwise (those pass as sent).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import types
import typing
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.static.constants import EntityType

from brokers.wire.entities import request_module, response_module
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import encode_entity
from gateway.kafka.filter import Forward
from gateway.kafka.filters import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    delete_groups,
    describe_groups,
    describe_producers,
    describe_transactions,
    end_txn,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_transactions,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
    txn_offset_commit,
)
from gateway.kafka.filters.consumer_protocol import (
    Assignment,
    Subscription,
    build_assignment,
    build_subscription,
)
from tests.unit.gateway.filters.harness import FakeAccess, context, versions

pytestmark = pytest.mark.unit

MODULES: list[Any] = [
    join_group, sync_group, leave_group, offset_commit, offset_fetch, describe_groups, list_groups,
    delete_groups, offset_delete, init_producer_id, add_partitions_to_txn, add_offsets_to_txn,
    end_txn, txn_offset_commit, describe_transactions, list_transactions, describe_producers,
]  # fmt: skip
FORBIDDEN = (b"bolt_", b"__consumer_offsets", b"acme_")
NAME_FIELDS = frozenset({"name", "topic", "group_id", "transactional_id"})
SUBSCRIPTION_FIELDS = frozenset({"metadata", "member_metadata"})
ASSIGNMENT_FIELDS = frozenset({"assignment", "member_assignment"})

local_names = st.text(alphabet="ab1.-", min_size=0, max_size=2)
fleet_names = st.one_of(
    local_names.map(lambda n: "acme_" + n),
    local_names.map(lambda n: "bolt_" + n),
    st.sampled_from(["__consumer_offsets", "__transaction_state", "bolt_acme_x"]),
)
safe_words = st.text(alphabet="Stablerng-0.", max_size=6)
safe_bytes = st.lists(st.integers(0, 255).filter(lambda b: b != ord("_")), max_size=8).map(bytes)
messages = st.one_of(st.none(), st.tuples(fleet_names, safe_words).map(" is ".join))


def _topic_partitions(names: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    partitions = st.lists(st.integers(0, 9), max_size=2).map(tuple)
    return st.lists(st.tuples(names, partitions), max_size=3).map(tuple)


def _subscriptions(names: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    return st.builds(
        lambda version, topics, owned, rack, tail: build_subscription(
            Subscription(version, tuple(topics), b"u", owned if version else (), 1, rack,
                         tail if version > 3 else b"")
        ),
        st.integers(0, 5), st.lists(names, max_size=3), _topic_partitions(names),
        st.none() | safe_words, safe_bytes,
    )  # fmt: skip


def _assignments(names: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    return st.builds(
        lambda version, assigned, tail: build_assignment(
            Assignment(version, assigned, None, tail if version > 3 else b"")
        ),
        st.integers(0, 5), _topic_partitions(names), safe_bytes,
    )  # fmt: skip


def _strings(field: str, upstream: bool, kind: str) -> st.SearchStrategy[Any]:
    if field == "protocol_type":
        return st.just(kind)
    if not upstream:
        return local_names
    if field in NAME_FIELDS:
        return fleet_names
    return messages if field == "error_message" else safe_words


def _bytes(field: str, upstream: bool, kind: str) -> st.SearchStrategy[bytes]:
    names = fleet_names if upstream else local_names
    if upstream and kind != "consumer":
        return safe_bytes
    if field in SUBSCRIPTION_FIELDS:
        return _subscriptions(names) | st.just(b"\x00\x00\x00")
    if field in ASSIGNMENT_FIELDS:
        return _assignments(names) | st.just(b"")
    return safe_bytes


def _values(hint: Any, field: str, upstream: bool, kind: str) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return st.none() | _values(inner, field, upstream, kind)
    if origin is tuple:
        return st.lists(_values(typing.get_args(hint)[0], field, upstream, kind), max_size=3).map(
            tuple
        )
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _entities(hint, upstream, kind)
    if hint is bool:
        return st.booleans()
    if issubclass(hint, enum.Enum):
        return st.sampled_from([ErrorCode.none, ErrorCode.unknown_server_error])
    if issubclass(hint, str):
        return _strings(field, upstream, kind)
    if issubclass(hint, bytes):
        return _bytes(field, upstream, kind)
    if issubclass(hint, datetime):
        return st.just(datetime(2026, 1, 1, tzinfo=UTC))
    if issubclass(hint, timedelta):
        return st.integers(0, 1000).map(lambda ms: timedelta(milliseconds=ms))
    if issubclass(hint, int):
        return st.integers(0, 100)
    raise TypeError(f"no strategy for {hint!r}")


@cache
def _entities(cls: type, upstream: bool, kind: str) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls)
    fields = {
        f.name: _values(hints[f.name], f.name, upstream, kind) for f in dataclasses.fields(cls)
    }
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


def _top(module: Any, kind: EntityType) -> type:
    (cls,) = [
        c for c in vars(module).values()
        if isinstance(c, type) and dataclasses.is_dataclass(c) and c.__dict__.get("__type__") == kind
    ]  # fmt: skip
    return cls


CASES = [(m, v) for m in MODULES for v in versions(m)]
ACL = st.tuples(
    st.sampled_from(["READ", "WRITE", "DESCRIBE", "DELETE", "IDEMPOTENT_WRITE"]),
    st.sampled_from(["TOPIC", "GROUP", "TRANSACTIONAL_ID", "CLUSTER"]),
    local_names,
)


@pytest.mark.parametrize(
    ("module", "version"), CASES, ids=[f"{m.__name__.rsplit('.', 1)[1]}-v{v}" for m, v in CASES]
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_nothing_foreign_reaches_the_client(module: Any, version: int, data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(["consumer", "connect"]))
    req_cls = _top(request_module(module.API_KEY, version), EntityType.request)
    resp_cls = _top(response_module(module.API_KEY, version), EntityType.response)
    req = data.draw(_entities(req_cls, False, kind), label="request")
    denied = data.draw(st.sets(ACL, max_size=4), label="denied")
    ctx = context(module, version, access=FakeAccess(denied=denied))
    outcome = asyncio.run(module.handle(ctx, req))
    client: Any
    if isinstance(outcome, Forward):
        upstream = data.draw(_entities(resp_cls, True, kind), label="upstream")
        client = outcome.on_response(upstream)
    else:
        client = outcome.response
    encoded = encode_entity(client)
    assert client.__class__ is resp_cls
    for forbidden in FORBIDDEN:
        assert forbidden not in encoded, (forbidden, client)
