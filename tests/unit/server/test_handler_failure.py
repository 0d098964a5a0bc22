"""A handler that raises: the client gets the API's response with UNKNOWN_SERVER_ERROR in every
entry, the failure is logged once, and the connection keeps serving (Kafka's handleError)."""

from __future__ import annotations

import asyncio
import datetime
import io
import logging
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from brokers.client.config import ClientConfig
from brokers.client.connection import BrokerConnection
from brokers.handlers import api_versions
from brokers.server.context import RequestContext
from brokers.server.dispatcher import CloseConnection, Dispatcher, Peer
from brokers.server.listener import Listener
from brokers.server.routes import Route, RouteTable
from brokers.wire.entities import make, request_module
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import is_flexible_request, response_schema
from brokers.wire.produce_request import parse_produce_request

pytestmark = pytest.mark.unit
PEER = Peer(host="127.0.0.1", connection_id="test")
PRODUCE, HEARTBEAT, DELETE_GROUPS, DESCRIBE_CONFIGS = 0, 12, 42, 32
UNKNOWN = ErrorCode.unknown_server_error


async def _broken(ctx: RequestContext, request: Any) -> Any:
    raise RuntimeError("a bug in the handler")


def _read_produce(version: int, body: memoryview) -> Any:
    return parse_produce_request(body, version)


def _table(raw_produce: bool = False) -> RouteTable:
    """`raw_produce`: Produce read as the broker's route reads it (record sets left as views)."""
    table = RouteTable()
    for api_key, low, high in (
        (PRODUCE, 3, 9),
        (HEARTBEAT, 0, 4),
        (DELETE_GROUPS, 0, 2),
        (DESCRIBE_CONFIGS, 1, 4),
    ):
        decode = _read_produce if raw_produce and api_key == PRODUCE else None
        table.add(Route(api_key, low, high, _broken, name=f"broken-{api_key}", decode=decode))
    table.add(api_versions.route(table))
    return table


def _frame(request: Any, correlation_id: int) -> memoryview:
    api_key, version = int(request.__api_key__), int(request.__version__)
    header = api_key.to_bytes(2, "big") + version.to_bytes(2, "big")
    header += correlation_id.to_bytes(4, "big", signed=True) + (4).to_bytes(2, "big") + b"test"
    if is_flexible_request(api_key, version):
        header += b"\x00"
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    return memoryview(header + body.getvalue())


def _answer(request: Any, correlation_id: int, raw_produce: bool = False) -> Any:
    dispatcher = Dispatcher(_table(raw_produce))
    reply = asyncio.run(dispatcher.dispatch(_frame(request, correlation_id), PEER))
    assert reply is not None and reply.correlation_id == correlation_id
    assert isinstance(reply.body, bytes)
    schema = response_schema(int(request.__api_key__), int(request.__version__))
    response, _ = entity_reader(schema)(reply.body, 0)
    return response


def _produce(acks: int) -> Any:
    module = request_module(PRODUCE, 9)
    partitions = tuple(make(module, "PartitionProduceData", index=i, records=b"") for i in (0, 3))
    topic = make(module, "TopicProduceData", name="orders", partition_data=partitions)
    return make(
        module, "ProduceRequest", transactional_id=None, acks=acks,
        timeout=datetime.timedelta(seconds=1), topic_data=(topic,),
    )  # fmt: skip


@pytest.mark.parametrize("raw_produce", [False, True], ids=["kio", "raw"])
def test_every_partition_of_a_failed_produce_carries_the_error(
    caplog: pytest.LogCaptureFixture, raw_produce: bool
) -> None:
    with caplog.at_level(logging.ERROR, logger="pier.server"):
        response = _answer(_produce(acks=1), 41, raw_produce)
    [topic] = response.responses
    assert topic.name == "orders"
    answers = [(p.index, p.error_code, p.base_offset) for p in topic.partition_responses]
    assert answers == [(0, UNKNOWN, -1), (3, UNKNOWN, -1)]
    [record] = [r for r in caplog.records if "handler_failed" in r.getMessage()]
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert record.getMessage().startswith(
        "event=handler_failed api_key=0 api_version=9 correlation_id=41 error="
    )


@pytest.mark.parametrize("raw_produce", [False, True], ids=["kio", "raw"])
def test_a_failed_acks_0_produce_closes_the_connection_as_kafka_does(raw_produce: bool) -> None:
    dispatcher = Dispatcher(_table(raw_produce))
    with pytest.raises(CloseConnection):
        asyncio.run(dispatcher.dispatch(_frame(_produce(acks=0), 1), PEER))


def test_top_level_error_and_per_entry_errors_by_api() -> None:
    heartbeat = make(
        request_module(HEARTBEAT, 4), "HeartbeatRequest",
        group_id="g", generation_id=1, member_id="m", group_instance_id=None,
    )  # fmt: skip
    assert _answer(heartbeat, 2).error_code == UNKNOWN
    deleted = _answer(make(request_module(DELETE_GROUPS, 2), "DeleteGroupsRequest",
                           groups_names=("a", "b")), 3)  # fmt: skip
    assert [(r.group_id, r.error_code) for r in deleted.results] == [("a", UNKNOWN), ("b", UNKNOWN)]
    module = request_module(DESCRIBE_CONFIGS, 4)
    resource = make(
        module,
        "DescribeConfigsResource",
        resource_type=2,
        resource_name="t",
        configuration_keys=None,
    )
    described = _answer(
        make(module, "DescribeConfigsRequest", resources=(resource,), include_synonyms=False,
             include_documentation=False), 4,
    )  # fmt: skip
    [result] = described.results
    assert (result.resource_name, result.error_code, result.configs) == ("t", UNKNOWN, ())


def test_the_connection_keeps_serving_after_a_failed_handler() -> None:
    """Over a real socket: the failed request is answered, and so is the next one."""

    async def scenario() -> None:
        listener = Listener(Dispatcher(_table()), "127.0.0.1", 0)
        await listener.start()
        try:
            connection = await BrokerConnection.connect("127.0.0.1", listener.port, ClientConfig())
            try:
                request = make(
                    request_module(DELETE_GROUPS, connection.version(DELETE_GROUPS)),
                    "DeleteGroupsRequest",
                    groups_names=("g",),
                )
                first = await connection.send(request, timeout_s=10)
                assert [r.error_code for r in first.results] == [UNKNOWN]
                second = await connection.send(request, timeout_s=10)
                assert [r.error_code for r in second.results] == [UNKNOWN]
                assert not connection.closed
            finally:
                await connection.aclose()
        finally:
            await listener.stop()

    asyncio.run(scenario())
