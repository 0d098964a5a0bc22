"""An in-process broker for integration tests: a real `Broker` with its listener on an ephemeral
port, served by its own event loop on a background thread so blocking clients (confluent-kafka,
kafka-python) can run on the test's thread. Also `raw_call`, one kio request over a plain socket,
for request fields no client exposes (e.g. DescribeConfigs `include_documentation`)."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kio.serial import entity_reader

from brokers.app.runtime import Broker
from brokers.app.standalone import build_standalone
from brokers.common.config import BrokerConfig
from brokers.wire.headers import scoped_header
from brokers.wire.messages import (
    encode_entity,
    is_flexible_request,
    response_header_is_flexible,
    response_schema,
)
from infra.probes import recv_exactly

START_TIMEOUT_S = 30.0


@contextmanager
def running_broker(tmp_path: Path, properties: Mapping[str, str] | None = None) -> Iterator[str]:
    """Start a broker on 127.0.0.1:<free port>; yields its bootstrap address."""
    with broker_thread(tmp_path, properties) as broker:
        yield f"127.0.0.1:{broker.port}"


@contextmanager
def broker_thread(tmp_path: Path, properties: Mapping[str, str] | None = None) -> Iterator[Broker]:
    config = BrokerConfig(data_dir=tmp_path / "data", port=0, properties=dict(properties or {}))
    broker = build_standalone(config)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="pier-broker", daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(broker.start(), loop).result(START_TIMEOUT_S)
        try:
            yield broker
        finally:
            asyncio.run_coroutine_threadsafe(broker.stop(), loop).result(START_TIMEOUT_S)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(START_TIMEOUT_S)
        loop.close()


def raw_call(
    bootstrap: str, request: Any, correlation_id: int = 1, *, name_scope: str | None = None
) -> Any:
    """Send one kio request object and return the decoded response (`name_scope`: the header's
    name scope, as the gateway sends it on listings)."""
    api_key, version = int(request.__api_key__), int(request.__version__)
    host, port = bootstrap.rsplit(":", 1)
    client_id = b"pier-test"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    if is_flexible_request(api_key, version):
        header += b"\x00"  # no tagged fields
        if name_scope is not None:
            header = scoped_header(header, name_scope)
    payload = header + encode_entity(request)
    with socket.create_connection((host, int(port)), timeout=START_TIMEOUT_S) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", recv_exactly(sock, 4))
        frame = recv_exactly(sock, size)
    (answered,) = struct.unpack_from(">i", frame, 0)
    assert answered == correlation_id
    offset = 4 + (1 if response_header_is_flexible(api_key, version) else 0)
    response, _ = entity_reader(response_schema(api_key, version))(frame, offset)
    return response
