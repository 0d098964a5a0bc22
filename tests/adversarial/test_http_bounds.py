"""Attacks on the HTTP API's decoding: bodies and polls that cost the gateway more than they bring.

Attack #13 of issue 21: a chunked produce body of invalid UTF-8 grew the gateway with the body
(+213 MiB for 120 MiB), also for an account without WRITE. Attack #14: an HTTP poll of one batch
of 1 M empty records (`max_bytes=1`) took 18.6 s and +588 MiB, and stalled another tenant's
`GET /v3/clusters` 14.6 s: empty records never fill `max_bytes`. Defended (docs/security.md,
"HTTP decoding"): bodies are read within bounds (400/413 with the API's error JSON, WRITE checked
before the body is read), a poll is bounded by a record count as well as bytes, every batch's
decompression is bounded, and decoding runs off the event loop. Checked against a real gateway,
broker and tenant store, with raw sockets for the hand-made bodies and confluent-kafka for the
batch; the gateway's memory is read from /proc/<pid>/status.
"""

from __future__ import annotations

import base64
import gzip
import json
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from confluent_kafka import Producer

from tests.e2e.gateway.http_stack import TenantHttp, http_gateway_stack, http_url, wait_http
from tests.gateway_stack import OPERATOR, Credentials, GatewayStack
from tests.polling import wait_until

MIB = 1024 * 1024
GROWTH_BOUND = 48 * MIB  # generous: the bodies below are 120 MiB, the batch 200k records
ANSWER_DEADLINE_S = 2.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with http_gateway_stack(tmp_path_factory.mktemp("http-bounds")) as started:
        wait_http(started)
        yield started


def rss(stack: GatewayStack) -> int:
    assert stack.gateway is not None
    status = Path(f"/proc/{stack.gateway.pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def _authorization(creds: Credentials) -> str:
    return "Basic " + base64.b64encode(f"{creds.key_id}:{creds.secret}".encode()).decode()


class RawRequest:
    """An HTTP/1.1 request written by hand on a socket: headers, then the body as the test
    pleases; the answer read as soon as it comes (the body needs not be finished)."""

    def __init__(self, stack: GatewayStack, head: str) -> None:
        host, port = http_url(stack).removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.sock.sendall(head.encode() + b"\r\n")
        self.received = b""

    def send(self, data: bytes) -> bool:
        """False once the gateway no longer takes bytes (it answered and closed)."""
        try:
            self.sock.sendall(data)
        except OSError:
            return False
        return True

    def chunk(self, data: bytes) -> bool:
        return self.send(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def answered(self) -> bool:
        """Whether a whole answer (status line, headers, body) has arrived, without waiting."""
        self.sock.setblocking(False)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break
                self.received += data
        except (BlockingIOError, ConnectionResetError):
            pass
        finally:
            self.sock.setblocking(True)
        return self._complete()

    def _complete(self) -> bool:
        head, sep, body = self.received.partition(b"\r\n\r\n")
        if not sep:
            return False
        length = next(
            (
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            None,
        )
        return length is not None and len(body) >= length

    @property
    def status(self) -> int:
        return int(self.received.split(b" ", 2)[1])

    def json(self) -> Any:
        return json.loads(self.received.partition(b"\r\n\r\n")[2])

    def close(self) -> None:
        self.sock.close()


def _produce_head(stack: GatewayStack, creds: Credentials, topic: str, *extra: str) -> str:
    cluster = TenantHttp(stack, creds).cluster
    lines = [
        f"POST {cluster}/topics/{topic}/records HTTP/1.1",
        "Host: pier",
        f"Authorization: {_authorization(creds)}",
        "Content-Type: application/json",
        *extra,
    ]
    return "\r\n".join(lines) + "\r\n"


def _attack(stack: GatewayStack, request: RawRequest, body: Iterator[bytes]) -> int:
    """Send `body` until the gateway answers; the largest growth of its memory meanwhile."""
    baseline = peak = rss(stack)
    for piece in body:
        if not request.send(piece) or request.answered():
            break
        peak = max(peak, rss(stack))
    wait_until(request.answered, what="the gateway's answer to the body", timeout=30)
    return max(peak, rss(stack)) - baseline


def _chunked(total: int, piece: bytes) -> Iterator[bytes]:
    frame = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    for _ in range(total // len(piece)):
        yield frame
    yield b"0\r\n\r\n"


def test_attack_13_chunked_invalid_utf8_body_is_refused_without_growing_the_gateway(
    stack: GatewayStack,
) -> None:
    acme = TenantHttp(stack, stack.credentials["acme"])
    topic = f"bounds-{uuid.uuid4().hex[:8]}"
    acme.create_topic(topic)
    head = _produce_head(stack, stack.credentials["acme"], topic, "Transfer-Encoding: chunked")
    request = RawRequest(stack, head)
    try:
        growth = _attack(stack, request, _chunked(120 * MIB, b"\xff\xfe" * (MIB // 2)))
        assert request.status == 400, request.received[:300]
        assert request.json()["error_code"] == 400
    finally:
        request.close()
    assert growth < GROWTH_BOUND, f"the gateway grew {growth / MIB:.0f} MiB"


def test_attack_13_invalid_utf8_inside_a_value_stops_at_the_value_bound(
    stack: GatewayStack,
) -> None:
    acme = TenantHttp(stack, stack.credentials["acme"])
    topic = f"bounds-{uuid.uuid4().hex[:8]}"
    acme.create_topic(topic)
    head = _produce_head(stack, stack.credentials["acme"], topic, "Transfer-Encoding: chunked")
    request = RawRequest(stack, head)
    try:
        assert request.chunk(b'{"value": {"type": "STRING", "data": "')
        growth = _attack(stack, request, _chunked(120 * MIB, b"\xff" * MIB))
        assert request.status == 413, request.received[:300]
        assert request.json()["error_code"] == 413
    finally:
        request.close()
    assert growth < GROWTH_BOUND, f"the gateway grew {growth / MIB:.0f} MiB"


def test_attack_13_declared_and_compressed_bodies_stop_at_the_limit(stack: GatewayStack) -> None:
    acme = stack.credentials["acme"]
    topic = f"bounds-{uuid.uuid4().hex[:8]}"
    TenantHttp(stack, acme).create_topic(topic)
    declared = RawRequest(stack, _produce_head(stack, acme, topic, f"Content-Length: {120 * MIB}"))
    try:
        wait_until(declared.answered, what="an answer before the body", timeout=10)
        assert declared.status == 413 and declared.json()["error_code"] == 413
    finally:
        declared.close()
    bomb = gzip.compress(b"{" + b" " * (120 * MIB) + b"}", compresslevel=9)
    assert len(bomb) < MIB
    head = _produce_head(
        stack, acme, topic, "Content-Encoding: gzip", f"Content-Length: {len(bomb)}"
    )
    inflated = RawRequest(stack, head)
    try:
        growth = _attack(stack, inflated, iter([bomb]))
        assert inflated.status == 413 and inflated.json()["error_code"] == 413
    finally:
        inflated.close()
    assert growth < GROWTH_BOUND, f"the gateway grew {growth / MIB:.0f} MiB"
    url = http_url(stack) + TenantHttp(stack, acme).cluster + f"/topics/{topic}/records"
    for encoding, status in (("compress", 415), ("x-gzip", 415), ("br", 415)):
        # the API refuses every coding it does not decode, as 415 (tests/adversarial/
        # test_http_edge.py tries them on every route)
        unknown = requests.post(
            url,
            data=b"{}",
            headers={"Content-Encoding": encoding, "Content-Type": "application/json"},
            auth=(acme.key_id, acme.secret),
            timeout=10,
        )
        assert unknown.status_code == status, (encoding, unknown.text)
        if status == 415:
            assert unknown.json()["error_code"] == 415


def _reader_without_write(stack: GatewayStack) -> Credentials:
    """A tenant's account allowed only to READ (and DESCRIBE) its topics and groups."""
    with stack.store() as store:
        reader = GatewayStack.add_tenant(store, "dora", name="reader")
        for resource in ("TOPIC", "GROUP"):
            for operation in ("READ", "DESCRIBE"):
                store.create_acl(
                    "dora",
                    resource_type=resource,
                    pattern_type="literal",
                    resource_name="*",
                    operation=operation,
                    permission="allow",
                    principal=f"User:{reader.service_account}",
                    actor=OPERATOR,
                )
    wait_until(  # a new key: usable once the gateway has read it
        lambda: (
            requests.get(
                http_url(stack) + "/v3/clusters", auth=(reader.key_id, reader.secret), timeout=10
            ).status_code
            == 200
        ),
        what="the new key logs in",
        timeout=30,
    )
    as_reader = TenantHttp(stack, reader)
    wait_until(  # the ACLs reach the gateway through the store's change feed
        lambda: (
            as_reader.produce("absent", {"value": {"type": "STRING", "data": "x"}}).status_code
            == 403
        ),
        what="the reader's ACLs in force at the gateway",
        timeout=30,
    )
    return reader


def test_attack_13_an_account_without_write_is_refused_before_its_body_is_read(
    stack: GatewayStack,
) -> None:
    reader = _reader_without_write(stack)
    head = _produce_head(stack, reader, "anything", "Transfer-Encoding: chunked")
    request = RawRequest(stack, head)
    try:
        assert request.chunk(b"\xff" * MIB)  # the body goes on: never finished
        wait_until(request.answered, what="403 while the body is still open", timeout=10)
        assert request.status == 403, request.received[:300]
        assert request.json()["error_code"] == 40301
    finally:
        request.close()


def _produce_empty_records(stack: GatewayStack, topic: str, count: int) -> None:
    """`count` records with neither key nor value, in one zstd batch if the client can."""
    settings: dict[str, Any] = {
        "compression.type": "zstd",
        "linger.ms": 2000,
        "batch.num.messages": count,
        "batch.size": 64 * MIB,
        "message.max.bytes": 64 * MIB,
        "queue.buffering.max.messages": count + 1,
        "acks": "all",
    }
    producer = Producer(stack.client_config("acme", **settings))
    for _ in range(count):
        producer.produce(topic, value=None, key=None)
    assert producer.flush(60) == 0


def test_attack_14_a_poll_of_empty_records_is_bounded_and_stalls_no_one(
    stack: GatewayStack,
) -> None:
    acme = TenantHttp(stack, stack.credentials["acme"])
    bolt = TenantHttp(stack, stack.credentials["bolt"])
    topic = f"empties-{uuid.uuid4().hex[:8]}"
    acme.create_topic(topic)
    _produce_empty_records(stack, topic, 1_000_000)
    instance = acme.consumer(f"g-{topic}", format="binary", **{"auto.offset.reset": "earliest"})
    assigned = acme.post(
        instance + "/assignments", {"partitions": [{"topic": topic, "partition": 0}]}
    )
    assert assigned.status_code == 204, assigned.text
    baseline = rss(stack)
    polls: list[requests.Response] = []

    def poll() -> None:
        polls.append(
            acme.get(
                instance + "/records?max_bytes=1&timeout=5000",
                headers={"Accept": "application/vnd.kafka.binary.v2+json"},
            )
        )

    poller = threading.Thread(target=poll, name="attack-14-poll")
    poller.start()

    def another_tenant_answered_until_the_poll_ended() -> bool:  # asked all the while
        clusters = bolt.session.get(bolt.base + "/v3/clusters", timeout=ANSWER_DEADLINE_S)
        assert clusters.status_code == 200, clusters.text
        return not poller.is_alive()

    wait_until(another_tenant_answered_until_the_poll_ended, what="the poll's answer", timeout=60)
    poller.join(60)
    (first,) = polls
    assert first.status_code == 200, first.text
    records = first.json()
    assert 0 < len(records) <= 500  # max.poll.records' default
    assert [r["offset"] for r in records] == list(range(len(records)))
    assert all(r["key"] is None and r["value"] is None for r in records)
    assert rss(stack) - baseline < GROWTH_BOUND
    second = acme.get(  # the next poll goes on where the first stopped, with a smaller count
        instance + "/records?max_bytes=1&max_records=7&timeout=5000",
        headers={"Accept": "application/vnd.kafka.binary.v2+json"},
    )
    assert [r["offset"] for r in second.json()] == list(range(len(records), len(records) + 7))


def test_max_poll_records_is_a_consumer_setting_with_bounds(stack: GatewayStack) -> None:
    acme = TenantHttp(stack, stack.credentials["acme"])
    topic = f"counted-{uuid.uuid4().hex[:8]}"
    acme.create_topic(topic)
    for i in range(5):
        assert acme.produce(topic, {"value": {"type": "STRING", "data": str(i)}}).status_code == 200
    for bad in ("0", "10001", "many"):
        refused = acme.post(f"/consumers/g-{topic}", {"max.poll.records": bad})
        assert refused.status_code == 422, (bad, refused.text)
    instance = acme.consumer(
        f"g-{topic}", format="string", **{"auto.offset.reset": "earliest", "max.poll.records": "3"}
    )
    assigned = acme.post(
        instance + "/assignments", {"partitions": [{"topic": topic, "partition": 0}]}
    )
    assert assigned.status_code == 204, assigned.text
    assert [r["value"] for r in acme.poll(instance, "string", 5000)] == ["0", "1", "2"]
    assert [r["value"] for r in acme.poll(instance, "string", 5000)] == ["3", "4"]
