"""A tenant's listing goes upstream with the tenant's prefix as its header's name scope
(`brokers.wire.headers.NAME_SCOPE_TAG`): the real `kio_path.handle` and the real ListGroups and
ListTransactions filters; a non-flexible version (ListGroups v0-2, no header tags) goes as the
client sent it. The broker's side is `tests/integration/test_scoped_listings.py`."""

from __future__ import annotations

import asyncio
import struct
import time
from types import SimpleNamespace
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from brokers.wire.entities import make, request_module
from brokers.wire.headers import NAME_SCOPE_TAG, parse_request_header
from brokers.wire.messages import encode_entity, is_flexible_request, write_uvarint
from gateway.kafka import kio_path
from gateway.kafka.exchange import Exchange
from gateway.kafka.filter import Forward
from gateway.kafka.filters import FILTERS
from gateway.kafka.metrics import GatewayMetrics
from gateway.kafka.namespace import TenantNamespace
from gateway.kafka.services import QuotaSubject, SessionServices
from gateway.kafka.session import Session
from tests.unit.gateway.kafka.test_session_throttle import FakeChannel

pytestmark = pytest.mark.unit
LIST_GROUPS, LIST_TRANSACTIONS = 16, 66


class Policy:
    def mutation_budget(self, *args: Any) -> None:
        return None

    def mutation_throttle(self, *args: Any) -> int:
        return 0

    def meter(self, *args: Any, **counters: Any) -> None:
        return None

    def charge_request_time(self, *args: Any) -> int:
        return 0

    def allowed(self, *args: Any) -> bool:
        return True


class RecordingSession(Session):
    tenant = cast(
        Any,
        SimpleNamespace(namespace=TenantNamespace("acme"), tenant=SimpleNamespace(limits=None)),
    )
    headers: list[bytes]

    def forward(self, exchange: Exchange, body: Any, size: int, on_response: Any) -> None:
        self.headers.append(bytes(exchange.header))  # the broker never answers


def _client_header(api_key: int, version: int, tags: bytes = b"\x00") -> bytes:
    client_id = b"app"
    header = struct.pack(">hhih", api_key, version, 7, len(client_id)) + client_id
    return header + tags if is_flexible_request(api_key, version) else header


SPOOFED = b"\x01" + write_uvarint(NAME_SCOPE_TAG) + write_uvarint(5) + b"bolt_"


def _body(api_key: int, version: int) -> memoryview:
    module = request_module(api_key, version)
    if api_key == LIST_GROUPS:
        fields = {"states_filter": ()} if version >= 4 else {}
        fields |= {"types_filter": ()} if version >= 5 else {}
        return memoryview(encode_entity(make(module, "ListGroupsRequest", **fields)))
    request = make(
        module, "ListTransactionsRequest", state_filters=(), producer_id_filters=(),
        duration_filter=-1,
    )  # fmt: skip
    return memoryview(encode_entity(request))


async def _forwarded_header(api_key: int, version: int, tags: bytes = b"\x00") -> bytes:
    services = cast(
        SessionServices,
        type("Services", (), {"authenticator": None, "fleet": None, "partitions": None,
                              "names": None, "members": None})(),
    )  # fmt: skip
    session = RecordingSession(
        services,
        FakeChannel(),
        peer_host="h",
        node_id=0,
        metrics=GatewayMetrics(CollectorRegistry()),
    )
    session.headers = []
    session.policy = cast(Any, Policy())
    header = _client_header(api_key, version, tags)
    exchange = Exchange(
        api_key,
        version,
        7,
        memoryview(header),
        False,
        QuotaSubject("acme", "sa", ""),
        time.perf_counter(),
    )
    await kio_path.handle(session, exchange, _body(api_key, version), 0)
    [forwarded] = session.headers
    return forwarded


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(LIST_GROUPS, 3), (LIST_GROUPS, 4), (LIST_GROUPS, 5), (LIST_TRANSACTIONS, 0),
     (LIST_TRANSACTIONS, 1)],
)  # fmt: skip
@pytest.mark.parametrize("tags", [b"\x00", SPOOFED], ids=["plain", "spoofed"])
def test_a_flexible_listing_goes_upstream_scoped_to_the_tenant(
    api_key: int, version: int, tags: bytes
) -> None:
    forwarded = asyncio.run(_forwarded_header(api_key, version, tags))
    header, _ = parse_request_header(memoryview(forwarded), flexible=True)
    assert (header.api_key, header.api_version, header.correlation_id) == (api_key, version, 7)
    assert header.client_id == "app"
    assert header.name_scope == "acme_"


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_non_flexible_listing_goes_as_sent(version: int) -> None:
    forwarded = asyncio.run(_forwarded_header(LIST_GROUPS, version))
    assert forwarded == _client_header(LIST_GROUPS, version)


def test_a_client_s_own_header_tags_never_reach_a_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    """A request with no scope of its own goes upstream with no tags at all, whatever the
    client put in its header (a scope naming another tenant included)."""
    monkeypatch.setitem(FILTERS, LIST_TRANSACTIONS, Unscoped)
    forwarded = asyncio.run(_forwarded_header(LIST_TRANSACTIONS, 1, SPOOFED))
    header, offset = parse_request_header(memoryview(forwarded), flexible=True)
    assert header.name_scope is None and forwarded.endswith(b"app\x00")
    assert offset == len(forwarded)


class Unscoped:
    """A filter that forwards as it is (as every API without a listing does)."""

    API_KEY, MIN_VERSION, MAX_VERSION = LIST_TRANSACTIONS, 0, 2

    @staticmethod
    async def handle(ctx: Any, request: Any) -> Forward:
        return Forward(request, lambda answer: answer)
