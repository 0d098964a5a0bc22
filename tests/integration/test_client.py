"""The project's client against a real in-process broker (every version it negotiates), and
against stub servers that misbehave on purpose (silence, hang-ups, oversized frames, a refused
ApiVersions version).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pytest

from brokers.client import Admin, ClientConfig, Cluster, TopicPartition
from brokers.client.connection import BrokerConnection
from brokers.client.consumer import fetch
from brokers.client.errors import (
    BrokerConnectionError,
    BrokerResponseError,
    ConnectionClosedError,
    RequestTimeoutError,
    ResponseTooLargeError,
    UnknownTopicError,
)
from brokers.client.offsets import EARLIEST, LATEST, MAX_TIMESTAMP
from brokers.client.producer import produce
from brokers.client.topics import TOPIC_RESOURCE, NewTopic
from brokers.client.versions import CLIENT_VERSIONS, ApiKey
from brokers.handlers.build import make, response_module, throttle
from brokers.records.batch import iter_headers
from brokers.records.builder import read_batch, simple_batch
from brokers.wire.errors import ErrorCode
from brokers.wire.headers import parse_fixed
from tests.integration.inproc import running_broker
from tests.polling import wait_until_async

pytestmark = pytest.mark.integration
T = TypeVar("T")
WAIT_S = 20.0


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_broker(tmp_path_factory.mktemp("client"), {"num.partitions": "2"}) as address:
        yield address


def with_admin(bootstrap: str, action: Callable[[Admin], Awaitable[T]], **config: Any) -> T:
    async def main() -> T:
        async with Admin.for_bootstrap(bootstrap, ClientConfig(**config)) as admin:
            return await action(admin)

    return asyncio.run(main())


def pinned(api: ApiKey, version: int) -> dict[int, tuple[int, int]]:
    table = dict(CLIENT_VERSIONS)
    table[int(api)] = (version, version)
    return table


def versions_of(api: ApiKey) -> list[int]:
    low, high = CLIENT_VERSIONS[api]
    return list(range(low, high + 1))


# -- against the real broker --------------------------------------------------------------------
def test_negotiates_the_highest_common_versions(bootstrap: str) -> None:
    async def versions(admin: Admin) -> dict[int, int]:
        return (await admin.cluster.any_connection()).versions

    chosen = with_admin(bootstrap, versions)
    assert chosen[ApiKey.PRODUCE] == 11
    assert chosen[ApiKey.FETCH] == 12
    assert chosen[ApiKey.METADATA] == 12
    assert chosen[ApiKey.LIST_OFFSETS] == 9


def test_many_pipelined_requests_on_one_connection(bootstrap: str) -> None:
    async def burst(admin: Admin) -> set[str]:
        connection = await admin.cluster.any_connection()
        from brokers.client.metadata import metadata_request

        request = metadata_request(connection.version(ApiKey.METADATA), None)
        responses = await asyncio.gather(*(connection.send(request) for _ in range(64)))
        return {r.cluster_id for r in responses}

    cluster_ids = with_admin(bootstrap, burst)
    assert len(cluster_ids) == 1 and None not in cluster_ids


@pytest.mark.parametrize("version", versions_of(ApiKey.PRODUCE))
def test_produce_then_fetch_at_every_produce_version(bootstrap: str, version: int) -> None:
    topic = f"produce-v{version}"

    async def scenario(admin: Admin) -> tuple[int, list[bytes | None]]:
        assert (await admin.create_topics([NewTopic(topic, 1)]))[topic] is None
        tp = TopicPartition(topic, 0)
        await produce(admin.cluster, tp, simple_batch([b"a", b"b"]))
        result = await produce(admin.cluster, tp, simple_batch([b"c"]))
        assert result is not None
        fetched = await fetch(admin.cluster, {tp: 0})
        return result.base_offset, _values(fetched[tp].records)

    base, values = with_admin(bootstrap, scenario, api_versions=pinned(ApiKey.PRODUCE, version))
    assert (base, values) == (2, [b"a", b"b", b"c"])


@pytest.mark.parametrize("version", versions_of(ApiKey.FETCH))
def test_fetch_at_every_version(bootstrap: str, version: int) -> None:
    topic = f"fetch-v{version}"

    async def scenario(admin: Admin) -> tuple[int, list[bytes | None]]:
        await admin.create_topics([NewTopic(topic, 1)])
        tp = TopicPartition(topic, 0)
        for value in (b"x", b"y", b"z"):
            await produce(admin.cluster, tp, simple_batch([value]))
        fetched = (await fetch(admin.cluster, {tp: 1}))[tp]
        return fetched.high_watermark, _values(fetched.records)

    hw, values = with_admin(bootstrap, scenario, api_versions=pinned(ApiKey.FETCH, version))
    assert (hw, values) == (3, [b"y", b"z"])


@pytest.mark.parametrize("version", versions_of(ApiKey.LIST_OFFSETS))
def test_list_offsets_at_every_version(bootstrap: str, version: int) -> None:
    topic = f"offsets-v{version}"
    tp = TopicPartition(topic, 0)

    async def scenario(admin: Admin) -> dict[int, int]:
        await admin.create_topics([NewTopic(topic, 1)])
        for ts in (1_000, 2_000, 3_000):
            await produce(admin.cluster, tp, simple_batch([b"v"], timestamps=[ts]))
        specs = {EARLIEST: EARLIEST, LATEST: LATEST, 1_500: 1_500, 9_999: 9_999}
        if version >= 7:
            specs[MAX_TIMESTAMP] = MAX_TIMESTAMP
        return {
            key: (await admin.list_offsets({tp: spec}))[tp].offset for key, spec in specs.items()
        }

    found = with_admin(bootstrap, scenario, api_versions=pinned(ApiKey.LIST_OFFSETS, version))
    assert found[EARLIEST] == 0 and found[LATEST] == 3
    assert found[1_500] == 1 and found[9_999] == -1
    assert found.get(MAX_TIMESTAMP, 2) == 2


@pytest.mark.parametrize("version", versions_of(ApiKey.METADATA))
def test_metadata_at_every_version(bootstrap: str, version: int) -> None:
    async def scenario(admin: Admin) -> tuple[int, list[int]]:
        await admin.create_topics([NewTopic(f"meta-v{version}", 3)])
        metadata = await admin.describe_cluster()
        return len(metadata.brokers), metadata.partitions(f"meta-v{version}")

    brokers, partitions = with_admin(
        bootstrap, scenario, api_versions=pinned(ApiKey.METADATA, version)
    )
    assert (brokers, partitions) == (1, [0, 1, 2])


@pytest.mark.parametrize(
    ("create", "delete"),
    [
        (c, d)
        for c, d in zip(
            versions_of(ApiKey.CREATE_TOPICS), versions_of(ApiKey.DELETE_TOPICS), strict=True
        )
    ],
)
def test_create_and_delete_topics_at_every_version(
    bootstrap: str, create: int, delete: int
) -> None:
    topic = f"admin-c{create}-d{delete}"
    table = {**pinned(ApiKey.CREATE_TOPICS, create), int(ApiKey.DELETE_TOPICS): (delete, delete)}

    async def scenario(admin: Admin) -> list[object]:
        created = await admin.create_topics([NewTopic(topic, 2, configs={"retention.ms": "60000"})])
        again = await admin.create_topics([NewTopic(topic, 2)])
        configs = await admin.describe_configs(TOPIC_RESOURCE, topic, ["retention.ms"])
        deleted = await admin.delete_topics([topic, "never-existed"])
        return [
            created[topic],
            _code(again[topic]),
            configs["retention.ms"].value,
            deleted[topic],
            _code(deleted["never-existed"]),
        ]

    outcome = with_admin(bootstrap, scenario, api_versions=table)
    assert outcome == [
        None,
        ErrorCode.topic_already_exists,
        "60000",
        None,
        ErrorCode.unknown_topic_or_partition,
    ]


@pytest.mark.parametrize("version", versions_of(ApiKey.DESCRIBE_CONFIGS))
def test_describe_configs_at_every_version(bootstrap: str, version: int) -> None:
    async def scenario(admin: Admin) -> tuple[str | None, str | None]:
        await admin.create_topics(
            [NewTopic(f"cfg-v{version}", 1, configs={"cleanup.policy": "compact"})]
        )
        topic = await admin.describe_configs(TOPIC_RESOURCE, f"cfg-v{version}")
        broker = await admin.describe_configs(4, "0", ["num.partitions"])
        return topic["cleanup.policy"].value, broker["num.partitions"].value

    found = with_admin(bootstrap, scenario, api_versions=pinned(ApiKey.DESCRIBE_CONFIGS, version))
    assert found == ("compact", "2")


def test_acks_zero_produce_lands_without_a_response(bootstrap: str) -> None:
    tp = TopicPartition("acks-zero", 0)

    async def scenario(admin: Admin) -> list[bytes | None]:
        await admin.create_topics([NewTopic(tp.topic, 1)])
        assert await produce(admin.cluster, tp, simple_batch([b"fire"]), acks=0) is None

        async def landed() -> bytes:  # nothing tells us when it landed: poll
            return bytes((await fetch(admin.cluster, {tp: 0}))[tp].records)

        return _values(await wait_until_async(landed, what="the acks=0 record", timeout=WAIT_S))

    assert with_admin(bootstrap, scenario) == [b"fire"]


def test_unknown_topic_and_out_of_range_are_reported(bootstrap: str) -> None:
    async def scenario(admin: Admin) -> ErrorCode:
        with pytest.raises(UnknownTopicError):
            await produce(admin.cluster, TopicPartition("no-such-topic", 0), simple_batch([b"x"]))
        await admin.create_topics([NewTopic("small", 1)])
        with pytest.raises(BrokerResponseError) as raised:
            await fetch(admin.cluster, {TopicPartition("small", 0): 50})
        return raised.value.code

    assert with_admin(bootstrap, scenario) == ErrorCode.offset_out_of_range


def test_bootstrap_skips_an_unreachable_address(bootstrap: str) -> None:
    dead = _closed_port()

    async def scenario() -> int:
        async with Cluster(f"127.0.0.1:{dead},{bootstrap}") as cluster:
            return len((await cluster.metadata()).brokers)

    assert asyncio.run(scenario()) == 1
    with pytest.raises(BrokerConnectionError, match="no broker reachable"):
        asyncio.run(Cluster(f"127.0.0.1:{dead}").any_connection())


# -- groups (need the coordinator) --------------------------------------------------------------
def test_commit_fetch_describe_list_delete_group(bootstrap: str) -> None:
    tp = TopicPartition("grouped", 0)

    async def scenario(admin: Admin) -> None:
        await admin.create_topics([NewTopic(tp.topic, 1)])
        await produce(admin.cluster, tp, simple_batch([b"1", b"2", b"3"]))
        await admin.commit_offsets("reporting", {tp: 2})
        assert (await admin.fetch_offsets("reporting"))[tp].offset == 2
        listed = {g.group_id: g for g in await admin.list_groups()}
        assert listed["reporting"].state == "Empty"
        described = (await admin.describe_groups(["reporting"]))["reporting"]
        assert (described.state, described.members) == ("Empty", ())
        assert (await admin.delete_groups(["reporting"]))["reporting"] is None
        assert await admin.fetch_offsets("reporting") == {}
        missing = (await admin.delete_groups(["reporting"]))["reporting"]
        assert _code(missing) == ErrorCode.group_id_not_found

    with_admin(bootstrap, scenario)


# -- against misbehaving stub servers -----------------------------------------------------------
Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int, int, int], Awaitable[bool]]


@asynccontextmanager
async def stub_broker(behaviour: Behaviour) -> AsyncIterator[int]:
    """A server that answers ApiVersions properly and hands every other request to `behaviour`
    (api_key, version, correlation id), which returns False to stop serving the connection."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                api_key, version, correlation_id = parse_fixed(
                    memoryview(await reader.readexactly(size))
                )
                if api_key == ApiKey.API_VERSIONS:
                    write_frame(writer, correlation_id, api_versions_body(version))
                elif not await behaviour(reader, writer, api_key, version, correlation_id):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


def write_frame(writer: asyncio.StreamWriter, correlation_id: int, body: bytes) -> None:
    writer.write(struct.pack(">ii", len(body) + 4, correlation_id) + body)


def api_versions_body(version: int) -> bytes:
    from brokers.wire.messages import encode_entity

    module = response_module(ApiKey.API_VERSIONS, version)
    keys = tuple(
        make(module, "ApiVersion", api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in CLIENT_VERSIONS.items()
    )
    return encode_entity(
        make(
            module,
            "ApiVersionsResponse",
            error_code=ErrorCode.none,
            api_keys=keys,
            throttle_time=throttle(),
        )
    )


async def _connect(port: int, **config: Any) -> BrokerConnection:
    return await BrokerConnection.connect("127.0.0.1", port, ClientConfig(**config))


def _metadata_request(connection: BrokerConnection) -> Any:
    from brokers.client.metadata import metadata_request

    return metadata_request(connection.version(ApiKey.METADATA), None)


def test_timeout_fails_every_request_in_flight_and_closes() -> None:
    async def silent(*_: Any) -> bool:
        return True  # read, never answer

    async def scenario() -> list[BaseException]:
        async with stub_broker(silent) as port:
            connection = await _connect(port, request_timeout_s=0.3)
            request = _metadata_request(connection)
            first = asyncio.ensure_future(connection.send(request))
            second = asyncio.ensure_future(connection.send(request, timeout_s=60))
            errors = await asyncio.gather(first, second, return_exceptions=True)
            assert connection.closed
            with pytest.raises(RequestTimeoutError):
                await connection.send(request)
            await connection.aclose()
            return [e for e in errors if isinstance(e, BaseException)]

    errors = asyncio.run(scenario())
    assert len(errors) == 2 and all(isinstance(e, RequestTimeoutError) for e in errors)


def test_broker_hanging_up_fails_the_request() -> None:
    async def hang_up(*_: Any) -> bool:
        return False

    async def scenario() -> None:
        async with stub_broker(hang_up) as port:
            connection = await _connect(port)
            with pytest.raises(ConnectionClosedError, match="unanswered"):
                await connection.send(_metadata_request(connection))

    asyncio.run(scenario())


def test_oversized_response_closes_the_connection() -> None:
    async def huge(reader: Any, writer: asyncio.StreamWriter, *_: Any) -> bool:
        writer.write(struct.pack(">i", 2**31 - 1) + b"\x00" * 64)
        return True

    async def scenario() -> None:
        async with stub_broker(huge) as port:
            connection = await _connect(port, max_response_bytes=1024 * 1024)
            with pytest.raises(ResponseTooLargeError):
                await connection.send(_metadata_request(connection))
            assert connection.closed

    asyncio.run(scenario())


def test_wrong_correlation_id_closes_the_connection() -> None:
    async def confused(
        reader: Any, writer: asyncio.StreamWriter, api_key: int, version: int, cid: int
    ) -> bool:
        write_frame(writer, cid + 100, b"")
        return True

    async def scenario() -> None:
        async with stub_broker(confused) as port:
            connection = await _connect(port)
            with pytest.raises(BrokerConnectionError, match="out of order"):
                await connection.send(_metadata_request(connection))

    asyncio.run(scenario())


def test_refused_api_versions_version_is_retried_within_the_brokers_range() -> None:
    """KIP-511: the broker answers an ApiVersions version it lacks with a v0 body naming its range."""
    seen: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(2):
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            _key, version, cid = parse_fixed(memoryview(await reader.readexactly(size)))
            seen.append(version)
            if version > 2:
                refusal = struct.pack(">hihhh", ErrorCode.unsupported_version, 1, 18, 0, 2)
                write_frame(writer, cid, refusal)
            else:
                write_frame(writer, cid, api_versions_body(version))
        await writer.drain()
        writer.close()

    async def scenario() -> dict[int, int]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        try:
            connection = await _connect(server.sockets[0].getsockname()[1])
            await connection.aclose()
            return connection.versions
        finally:
            server.close()

    versions = asyncio.run(scenario())
    assert seen == [CLIENT_VERSIONS[ApiKey.API_VERSIONS][1], 2]
    assert versions[ApiKey.FETCH] == CLIENT_VERSIONS[ApiKey.FETCH][1]


# -- helpers ------------------------------------------------------------------------------------
def _values(records: bytes) -> list[bytes | None]:
    return [r.value for pos, _h in iter_headers(records) for r in read_batch(records, pos)[1]]


def _code(error: object) -> ErrorCode:
    assert isinstance(error, BrokerResponseError), error
    return error.code


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
