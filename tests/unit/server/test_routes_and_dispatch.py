import asyncio
import io
import struct
from typing import Any

import pytest
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.serial import entity_reader, entity_writer

from brokers.handlers import api_versions
from brokers.server.context import RequestContext
from brokers.server.dispatcher import CloseConnection, Dispatcher, Peer
from brokers.server.routes import DuplicateRouteError, Route, RouteTable
from brokers.wire.errors import ErrorCode

pytestmark = pytest.mark.unit
PEER = Peer(host="127.0.0.1", connection_id="test")


async def _echo(ctx: RequestContext, request: Any) -> Any:
    return None


def _table() -> RouteTable:
    table = RouteTable()
    table.add(Route(0, 0, 11, _echo, refused_below=3, legacy=lambda c, f, o: b"legacy"))
    table.add(Route(1, 4, 12, _echo))
    table.add(api_versions.route(table))
    return table


def _frame(
    api_key: int, version: int, corr: int, body: bytes = b"", flexible: bool = False
) -> memoryview:
    header = struct.pack(">hhih", api_key, version, corr, 4) + b"test"
    if flexible:
        header += b"\x00"
    return memoryview(header + body)


def test_duplicate_routes_are_refused() -> None:
    table = RouteTable()
    table.add(Route(1, 4, 12, _echo))
    with pytest.raises(DuplicateRouteError):
        table.add(Route(1, 4, 12, _echo))


def test_api_versions_is_derived_from_the_route_table() -> None:
    table = _table()
    request = io.BytesIO()
    entity_writer(ApiVersionsRequest)(
        request, ApiVersionsRequest(client_software_name="t", client_software_version="1")
    )
    reply = asyncio.run(
        Dispatcher(table).dispatch(_frame(18, 3, 5, request.getvalue(), True), PEER)
    )
    assert reply is not None and reply.correlation_id == 5
    assert reply.flexible_header is False  # ApiVersions responses always use header v0 (KIP-511)
    response, _ = entity_reader(ApiVersionsResponse)(reply.body, 0)
    advertised = {(k.api_key, k.min_version, k.max_version) for k in response.api_keys}
    assert advertised == {(0, 0, 11), (1, 4, 12), (18, 0, 4)}


def test_unknown_api_versions_version_gets_error_35_in_a_v0_body() -> None:
    reply = asyncio.run(Dispatcher(_table()).dispatch(_frame(18, 99, 8), PEER))
    assert reply is not None and reply.correlation_id == 8
    response, _ = entity_reader(ApiVersionsResponseV0)(reply.body, 0)
    assert response.error_code == ErrorCode.unsupported_version
    assert {k.api_key for k in response.api_keys} == {0, 1, 18}


def test_unknown_api_key_and_unserved_version_close_the_connection() -> None:
    dispatcher = Dispatcher(_table())
    with pytest.raises(CloseConnection):
        asyncio.run(dispatcher.dispatch(_frame(77, 0, 1), PEER))
    with pytest.raises(CloseConnection):
        asyncio.run(dispatcher.dispatch(_frame(1, 3, 1), PEER))


def test_refused_versions_go_to_the_legacy_handler() -> None:
    reply = asyncio.run(Dispatcher(_table()).dispatch(_frame(0, 2, 3, b"\x00\x01"), PEER))
    assert reply is not None and reply.body == b"legacy" and not reply.flexible_header


def test_requests_are_counted_and_timed_per_api() -> None:
    from prometheus_client import CollectorRegistry

    from brokers.server.metrics import ServerMetrics

    registry = CollectorRegistry()
    dispatcher = Dispatcher(_table(), ServerMetrics(registry))
    request = io.BytesIO()
    entity_writer(ApiVersionsRequest)(
        request, ApiVersionsRequest(client_software_name="t", client_software_version="1")
    )
    for corr in range(3):
        asyncio.run(dispatcher.dispatch(_frame(18, 3, corr, request.getvalue(), True), PEER))
    labels = {"request": "ApiVersions"}
    assert registry.get_sample_value("kafka_network_requests_total", labels) == 3
    assert registry.get_sample_value("kafka_network_request_total_time_seconds_count", labels) == 3
