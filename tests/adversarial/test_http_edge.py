"""Attacks on the HTTP API's edge: how a body is coded, when it is read, and a body that stalls.

Issue 21's leftovers on the HTTP side: a body coded `br` or `zstd` got aiohttp's own plain-text
400 before the API's code ran; routes other than produce read their body (up to 1 MiB) before
the ACL check, so an account without rights still cost a body read; and a body that stopped
arriving was waited for without end, holding its bytes. Defended (docs/security.md, "HTTP
decoding"; docs/gateway-http.md, "Request bodies"): the API decodes bodies itself within bounds
(identity, gzip, deflate and zstd; any other coding 415, over the limit 413, not what it says
400), always as the API's error JSON, on every route that reads a body, chunked or not; every
route authorizes before it reads (403 with the body unread, then the connection is closed); a
body that gets no byte for `http.body.read.timeout.ms` is 408, and the bytes it held go back to
the tenant's `queued.max.request.bytes` pool. Checked against a real gateway, broker and tenant
store, with raw sockets for the hand-made requests and the gateway's Prometheus metrics.
"""

from __future__ import annotations

import base64
import gzip
import json
import socket
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import zstandard

from infra.probes import free_port
from tests.adversarial.gateway_probes import gateway_metric
from tests.e2e.gateway.http_stack import TenantHttp, http_url, wait_http
from tests.gateway_stack import OPERATOR, Credentials, GatewayStack
from tests.polling import wait_until

MIB = 1024 * 1024
READ_TIMEOUT_MS = 1500
CLOSED_WITHIN_S = 15  # the 2 s the server discards a refused body for, and slack


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    port = free_port()
    running = GatewayStack(
        Path(tmp_path_factory.mktemp("http-edge")),
        gateway_settings={
            "http.port": str(port),
            "http.body.read.timeout.ms": str(READ_TIMEOUT_MS),
        },
        gateway_metrics_port=free_port(),
    )
    running.http_url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    with running:
        wait_http(running)
        yield running


@dataclass(frozen=True)
class Targets:
    """What the routes name: a topic and a consumer instance of acme's."""

    cluster: str
    topic: str
    group: str
    instance: str


@pytest.fixture(scope="module")
def targets(stack: GatewayStack) -> Targets:
    acme = TenantHttp(stack, stack.credentials["acme"])
    topic = f"edge-{uuid.uuid4().hex[:8]}"
    acme.create_topic(topic)
    group = f"g-{topic}"
    instance = acme.consumer(group, format="binary")
    return Targets(acme.cluster, topic, group, instance.removeprefix(acme.base))


def _routes(t: Targets) -> list[tuple[str, str]]:
    """Every kind of route that reads a body: produce, topic creation, configs, v2 consumers."""
    return [
        ("POST", f"{t.cluster}/topics/{t.topic}/records"),
        ("POST", f"{t.cluster}/topics"),
        ("POST", f"{t.cluster}/topics/{t.topic}/configs:alter"),
        ("PUT", f"{t.cluster}/topics/{t.topic}/configs/retention.ms"),
        ("POST", f"/consumers/{t.group}"),
        ("POST", f"{t.instance}/subscription"),
        ("POST", f"{t.instance}/positions"),
    ]


def _authorization(creds: Credentials) -> str:
    return "Basic " + base64.b64encode(f"{creds.key_id}:{creds.secret}".encode()).decode()


class Raw:
    """An HTTP/1.1 request written by hand; its answer read as soon as it comes."""

    def __init__(
        self, stack: GatewayStack, creds: Credentials, method: str, path: str, *headers: str
    ) -> None:
        host, port = http_url(stack).removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        lines = [
            f"{method} {path} HTTP/1.1",
            "Host: pier",
            f"Authorization: {_authorization(creds)}",
            "Content-Type: application/json",
            *headers,
        ]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.received = b""
        self.eof = False

    def send(self, data: bytes) -> bool:
        try:
            self.sock.sendall(data)
        except OSError:
            return False
        return True

    def _drain(self) -> None:
        self.sock.setblocking(False)
        try:
            while data := self.sock.recv(65536):
                self.received += data
            self.eof = True
        except BlockingIOError:
            pass
        except OSError:
            self.eof = True
        finally:
            self.sock.setblocking(True)

    def answered(self) -> bool:
        self._drain()
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

    def closed(self) -> bool:
        self._drain()
        return self.eof

    @property
    def status(self) -> int:
        return int(self.received.split(b" ", 2)[1])

    def header(self, name: str) -> str | None:
        head = self.received.partition(b"\r\n\r\n")[0].decode("latin-1")
        for line in head.split("\r\n")[1:]:
            key, _, value = line.partition(":")
            if key.strip().lower() == name.lower():
                return value.strip()
        return None

    def problem(self) -> dict[str, Any]:
        """The answer's error JSON (the API's shape: error_code and message)."""
        assert (self.header("Content-Type") or "").startswith("application/json"), self.received
        body = json.loads(self.received.partition(b"\r\n\r\n")[2])
        assert set(body) == {"error_code", "message"}, body
        return dict(body)

    def close(self) -> None:
        self.sock.close()


def _chunks(body: bytes, size: int = 64 * 1024) -> bytes:
    framed = b"".join(
        f"{len(body[i : i + size]):x}\r\n".encode() + body[i : i + size] + b"\r\n"
        for i in range(0, len(body), size)
    )
    return framed + b"0\r\n\r\n"


def _bomb_text() -> bytes:
    return b'{"value": "' + b"x" * (64 * MIB) + b'"}'  # one value, far over every limit


def _codings() -> list[tuple[str, str, bytes, int]]:
    """(what, Content-Encoding, body, status) for the bad bodies every route must refuse."""
    text = _bomb_text()
    return [
        ("brotli", "br", b"\x1b\x01\x00\x00{}", 415),
        ("unknown coding", "compress", b"{}", 415),
        ("two codings", "gzip, zstd", gzip.compress(b"{}"), 415),
        ("zstd bomb", "zstd", zstandard.ZstdCompressor(level=19).compress(text), 413),
        ("gzip bomb", "gzip", gzip.compress(text, 9), 413),
        ("deflate bomb", "deflate", zlib.compress(text, 9), 413),
        ("not gzip", "gzip", b"this is not gzip data" * 10, 400),
        ("not zstd", "zstd", b"\x28\xb5\x2f\xfd" + b"\xff" * 64, 400),
        ("gzip cut short", "gzip", gzip.compress(b'{"value": "' + b"x" * 1000)[:-9], 400),
    ]


def _send(
    stack: GatewayStack,
    method: str,
    path: str,
    coding: str,
    body: bytes,
    chunked: bool,
    what: str = "",
) -> Raw:
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}"
    request = Raw(
        stack, stack.credentials["acme"], method, path, f"Content-Encoding: {coding}", framing
    )
    request.send(_chunks(body) if chunked else body)
    wait_until(request.answered, what=f"the answer to {method} {path} ({what})", timeout=30)
    return request


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_every_body_route_answers_a_bad_coding_with_the_apis_error_json(
    stack: GatewayStack, targets: Targets, chunked: bool
) -> None:
    codings = _codings()
    for method, path in _routes(targets):
        for what, coding, body, status in codings:
            request = _send(stack, method, path, coding, body, chunked, what)
            try:
                assert request.status == status, (method, path, what, request.received[:300])
                assert request.problem()["error_code"] == status, (method, path, what)
            finally:
                request.close()


def test_zstd_gzip_and_deflate_bodies_are_decoded(stack: GatewayStack, targets: Targets) -> None:
    acme = stack.credentials["acme"]
    url = http_url(stack) + f"{targets.cluster}/topics/{targets.topic}/records"
    record = json.dumps({"value": {"type": "STRING", "data": "coded"}}).encode()
    for coding, body in (
        ("zstd", zstandard.ZstdCompressor().compress(record)),
        ("gzip", gzip.compress(record)),
        ("deflate", zlib.compress(record)),
    ):
        answer = requests.post(
            url,
            data=body,
            headers={"Content-Encoding": coding, "Content-Type": "application/json"},
            auth=(acme.key_id, acme.secret),
            timeout=10,
        )
        assert answer.status_code == 200, (coding, answer.text)
        assert answer.json()["error_code"] == 200, (coding, answer.text)


def _account_without_rights(stack: GatewayStack) -> Credentials:
    """A tenant whose accounts need ACLs, and an account that has none."""
    tenant = f"bare{uuid.uuid4().hex[:6]}"
    with stack.store() as store:
        store.create_tenant(
            display_name=tenant,
            plan="free",
            tenant_id=tenant,
            authorization="acls",
            actor=OPERATOR,
        )
        account = store.create_service_account(tenant, name="nothing", actor=OPERATOR)
        key, secret = store.create_api_key(tenant, service_account_id=account.id, actor=OPERATOR)
    creds = Credentials(tenant, account.id, key.key_id, str(secret))
    wait_until(  # a new key: usable once the gateway has read it
        lambda: (
            requests.get(
                http_url(stack) + "/v3/clusters", auth=(creds.key_id, creds.secret), timeout=10
            ).status_code
            == 200
        ),
        what="the new key logs in",
        timeout=30,
    )
    return creds


def test_a_refused_route_answers_403_without_reading_its_body(stack: GatewayStack) -> None:
    creds = _account_without_rights(stack)
    cluster = TenantHttp(stack, creds).cluster
    for method, path in (
        ("POST", f"{cluster}/topics"),
        ("POST", f"{cluster}/topics/anything/configs:alter"),
        ("PUT", f"{cluster}/topics/anything/configs/retention.ms"),
        ("POST", f"{cluster}/topics/anything/records"),
        ("POST", "/consumers/anything"),
    ):
        request = Raw(stack, creds, method, path, f"Content-Length: {MIB}")
        try:
            assert request.send(b'{"topic_name": "' + b"x" * 1000)  # 1 KiB of the 1 MiB
            wait_until(  # well before the read timeout would answer 408 to the unsent rest
                request.answered, what=f"403 to {method} {path}", timeout=READ_TIMEOUT_MS / 2000
            )
            assert request.status == 403, (method, path, request.received[:300])
            assert request.problem()["error_code"] in (403, 40301)
            assert request.header("Connection") == "close"
            wait_until(
                request.closed, what="the refused connection closed", timeout=CLOSED_WITHIN_S
            )
        finally:
            request.close()


def _queued(stack: GatewayStack) -> float:
    return gateway_metric(stack, "pier_gateway_queued_request_bytes", tenant="acme")


def test_a_body_that_stops_arriving_is_408_and_its_bytes_go_back(
    stack: GatewayStack, targets: Targets
) -> None:
    path = f"{targets.cluster}/topics/{targets.topic}/records"
    request = Raw(stack, stack.credentials["acme"], "POST", path, f"Content-Length: {4 * MIB}")
    try:
        assert request.send(b'{"value": {"type": "STRING", "data": "' + b"x" * (2 * MIB))
        held = wait_until(  # the bytes read so far count in the tenant's pool...
            lambda: _queued(stack) >= 2 * MIB, what="the stalled body's bytes held", timeout=10
        )
        assert held
        wait_until(request.answered, what="408 to the stalled body", timeout=READ_TIMEOUT_MS / 100)
        assert request.status == 408, request.received[:300]
        assert request.problem()["error_code"] == 408
        wait_until(  # ...and go back once it is answered
            lambda: _queued(stack) == 0, what="the stalled body's bytes given back", timeout=10
        )
        wait_until(request.closed, what="the stalled connection closed", timeout=CLOSED_WITHIN_S)
    finally:
        request.close()


def test_100_continue_is_sent_only_once_the_route_has_authorized(
    stack: GatewayStack, targets: Targets
) -> None:
    creds = _account_without_rights(stack)
    cluster = TenantHttp(stack, creds).cluster
    refused = Raw(
        stack, creds, "POST", f"{cluster}/topics", f"Content-Length: {MIB}", "Expect: 100-continue"
    )
    try:  # the client waits for 100 Continue before its body: it gets 403 instead, sends nothing
        wait_until(refused.answered, what="403 before any body", timeout=10)
        assert refused.received.startswith(b"HTTP/1.1 403 "), refused.received[:200]
        assert b"100 Continue" not in refused.received
    finally:
        refused.close()
    body = json.dumps({"value": {"type": "STRING", "data": "after 100"}}).encode()
    path = f"{targets.cluster}/topics/{targets.topic}/records"
    allowed = Raw(
        stack,
        stack.credentials["acme"],
        "POST",
        path,
        f"Content-Length: {len(body)}",
        "Expect: 100-continue",
    )
    try:
        wait_until(
            lambda: (allowed.answered() or True) and b"100 Continue" in allowed.received,
            what="100 Continue once authorized",
            timeout=10,
        )
        assert allowed.send(body)
        wait_until(
            lambda: (allowed.answered() or True) and b"HTTP/1.1 200 " in allowed.received,
            what="the produce answered",
            timeout=10,
        )
    finally:
        allowed.close()
