"""Drive admin handlers directly: a real standalone Broker (no listener), kio requests of any
version in, and responses that must survive an encode/decode round trip with that version."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kio.index import load_payload_module
from kio.serial import entity_reader
from kio.static.constants import EntityType

from brokers.app.runtime import Broker
from brokers.app.standalone import build_standalone
from brokers.common.config import BrokerConfig
from brokers.records.builder import simple_batch
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.headers import RequestHeader
from brokers.wire.messages import encode_entity, response_schema


@contextmanager
def standalone_broker(
    tmp_path: Path, properties: Mapping[str, str] | None = None
) -> Iterator[Broker]:
    broker = build_standalone(
        BrokerConfig(data_dir=tmp_path / "data", port=0, properties=properties or {})
    )
    broker.log_manager.startup()
    broker.replicas.startup()
    broker.topics.load()
    try:
        yield broker
    finally:
        broker.log_manager.shutdown()


def routed(broker: Broker, api_key: int) -> Route:
    """The broker's route for `api_key`, wired by its composition root as the listener serves it."""
    route = broker.routes.get(api_key)
    assert route is not None, f"api key {api_key} is not routed"
    return route


def entity(api_key: int, version: int, class_name: str, /, **fields: Any) -> Any:
    """A request-side kio object of `version`, dropping fields that version lacks."""
    cls = getattr(load_payload_module(api_key, version, EntityType.request), class_name)
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in names})


def call(route: Route, version: int, request: Any) -> Any:
    """Run the handler; the response must be of `version` and encode/decode losslessly. A route
    that reads its requests itself (Produce) gets the kio request's bytes, read its way; one that
    writes its answer itself is read back by kio, to its last byte."""
    assert route.serves(version)
    if route.decode is not None:
        request = route.decode(version, memoryview(encode_entity(request)))
    header = RequestHeader(route.api_key, version, 7, "admin-test")
    ctx = RequestContext(header, "127.0.0.1", "conn-1")

    async def handle() -> Any:
        return await route.handler(ctx, request)

    response = asyncio.run(handle())
    if isinstance(response, bytes):  # written without kio (Produce): kio reads it all back,
        raw = response  # and would have written the very same bytes
        response, read = entity_reader(response_schema(route.api_key, version))(raw, 0)
        assert read == len(raw) and encode_entity(response) == raw
    assert type(response).__version__ == version
    decoded, _ = entity_reader(type(response))(encode_entity(response), 0)
    assert decoded == response
    return response


def produce(broker: Broker, topic: str, partition: int, count: int) -> None:
    """Append `count` single-record batches as leader."""
    now = int(time.time() * 1000)
    replica = broker.replicas.get(topic, partition)
    for i in range(count):
        replica.append_as_leader(simple_batch([b"v%d" % i], timestamps=[now]))
