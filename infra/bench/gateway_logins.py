"""Raw SASL connections to the gateway: SCRAM-SHA-256 logins per second and idle connections.

Owns: a minimal asyncio Kafka client for the login handshake only (`SaslConnection`: ApiVersions
v0, SaslHandshake v1, SaslAuthenticate v1, hand-encoded: non-flexible versions, a v0 response
header), the client side of SCRAM-SHA-256 (RFC 5802; the server signature is checked), and two
measurements: `login_rate` (many short connections: connect, ApiVersions, SaslHandshake, two
SaslAuthenticate rounds, close; `concurrency` of them in flight) and `idle_connections` (open
PLAIN-authenticated connections and keep them until the caller is done). The client's PBKDF2
(8192 iterations, the same cost as the whole server side) is computed once per key before any
timing (`ScramKey.prime`), so the numbers are the gateway's, not the client's. Runs on one asyncio
event loop; not thread-safe.

The login flood of issue 21 (attacks 5 and 6: wrong secrets at full speed, a revocation meanwhile)
is `infra.bench.login_flood`, built on this client.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
import statistics
import struct
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from infra.bench.latency import percentile
from tenancy.scram import salted_password

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
SCRAM = "SCRAM-SHA-256"
CLIENT_ID = b"pier-bench-login"
_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_INT16, _INT32 = struct.Struct(">h"), struct.Struct(">i")
CALL_TIMEOUT_S = 30.0


class LoginRefused(RuntimeError):
    """The gateway answered a login step with an error (or a bad server signature)."""


@dataclass
class ScramKey:
    """An API key as a SCRAM client sees it; `prime` derives its keys from the stored salt."""

    key_id: str
    secret: str
    client_key: bytes = field(default=b"", repr=False)
    server_key: bytes = field(default=b"", repr=False)
    salt: bytes = field(default=b"", repr=False)
    iterations: int = 0

    def prime(self, salt: bytes, iterations: int) -> None:
        salted = salted_password(SCRAM, self.secret, salt, iterations)
        self.client_key = hmac.digest(salted, b"Client Key", "sha256")
        self.server_key = hmac.digest(salted, b"Server Key", "sha256")
        self.salt, self.iterations = salt, iterations


class SaslConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._correlation = 0

    @classmethod
    async def open(cls, host: str, port: int, local_host: str | None = None) -> SaslConnection:
        """A connection from `local_host` (any loopback address on Linux: 127.0.0.2, ...) when
        given, so that one machine can play several source addresses."""
        local = None if local_host is None else (local_host, 0)
        reader, writer = await asyncio.open_connection(host, port, local_addr=local)
        return cls(reader, writer)

    async def call(self, api_key: int, version: int, body: bytes) -> memoryview:
        """One request; the response payload after its correlation id."""
        self._correlation += 1
        header = _HEADER.pack(api_key, version, self._correlation, len(CLIENT_ID)) + CLIENT_ID
        size = len(header) + len(body)
        self.writer.write(_INT32.pack(size) + header + body)
        async with asyncio.timeout(CALL_TIMEOUT_S):
            (length,) = _INT32.unpack(await self.reader.readexactly(4))
            payload = memoryview(await self.reader.readexactly(length))
        if _INT32.unpack_from(payload)[0] != self._correlation:
            raise LoginRefused(f"answer out of order for api {api_key}")
        return payload[4:]

    async def api_versions(self) -> None:
        _check(await self.call(API_VERSIONS, 0, b""), "ApiVersions")

    async def handshake(self, mechanism: str) -> None:
        name = mechanism.encode()
        _check(await self.call(SASL_HANDSHAKE, 1, _INT16.pack(len(name)) + name), "SaslHandshake")

    async def send_authenticate(self, token: bytes) -> None:
        """A SaslAuthenticate v1 written without waiting for its answer (a flood's guess)."""
        self._correlation += 1
        body = _INT32.pack(len(token)) + token
        header = _HEADER.pack(SASL_AUTHENTICATE, 1, self._correlation, len(CLIENT_ID)) + CLIENT_ID
        self.writer.write(_INT32.pack(len(header) + len(body)) + header + body)
        await self.writer.drain()

    async def authenticate(self, token: bytes) -> bytes:
        """One SaslAuthenticate v1 round: the server's token."""
        answer = await self.call(SASL_AUTHENTICATE, 1, _INT32.pack(len(token)) + token)
        _check(answer, "SaslAuthenticate")
        (message_length,) = _INT16.unpack_from(answer, 2)
        at = 4 + max(0, message_length)
        (token_length,) = _INT32.unpack_from(answer, at)
        return bytes(answer[at + 4 : at + 4 + token_length])

    async def login_plain(self, key_id: str, secret: str) -> None:
        await self.api_versions()
        await self.handshake("PLAIN")
        await self.authenticate(b"\0" + key_id.encode() + b"\0" + secret.encode())

    async def login_scram(self, key: ScramKey) -> None:
        await self.api_versions()
        await self.handshake(SCRAM)
        nonce = secrets.token_urlsafe(18)
        bare = f"n={key.key_id},r={nonce}"
        server_first = (await self.authenticate(f"n,,{bare}".encode())).decode()
        fields = dict(item.split("=", 1) for item in server_first.split(","))
        if base64.b64decode(fields["s"]) != key.salt or int(fields["i"]) != key.iterations:
            raise LoginRefused("the gateway offered another salt than the store holds")
        without_proof = f"c=biws,r={fields['r']}"  # biws = base64("n,,")
        auth_message = f"{bare},{server_first},{without_proof}".encode()
        signature = hmac.digest(hashlib.sha256(key.client_key).digest(), auth_message, "sha256")
        proof = bytes(a ^ b for a, b in zip(key.client_key, signature, strict=True))
        final = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
        server_final = await self.authenticate(final)
        expected = hmac.digest(key.server_key, auth_message, "sha256")
        if server_final != b"v=" + base64.b64encode(expected):
            raise LoginRefused("wrong server signature")

    async def close(self) -> None:
        self.writer.close()
        with suppress(OSError):
            await self.writer.wait_closed()


def _check(payload: memoryview, what: str) -> None:
    (error,) = _INT16.unpack_from(payload, 0)
    if error != 0:
        raise LoginRefused(f"{what}: error {error}")


@dataclass(frozen=True, slots=True)
class LoginRun:
    kind: str  # "cold" (first login of each of N keys) or "warm" (verification cache hits)
    logins: int
    distinct_keys: int
    concurrency: int
    seconds: float
    p50_ms: float
    p99_ms: float

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "logins": self.logins,
            "distinct_keys": self.distinct_keys,
            "concurrency": self.concurrency,
            "seconds": round(self.seconds, 3),
            "logins_per_s": round(self.logins / self.seconds, 1),
            "p50_ms": round(self.p50_ms, 2),
            "p99_ms": round(self.p99_ms, 2),
        }


async def login_rate(
    host: str, port: int, kind: str, keys: Sequence[ScramKey], logins: int, concurrency: int
) -> LoginRun:
    """`logins` full SCRAM logins cycling over `keys`, `concurrency` at a time, each on a new
    connection closed right after; the clock runs from the first connect to the last close."""
    durations: list[float] = []
    queue = iter(range(logins))

    async def worker() -> None:
        for index in queue:
            began = time.perf_counter()
            connection = await SaslConnection.open(host, port)
            try:
                await connection.login_scram(keys[index % len(keys)])
            finally:
                await connection.close()
            durations.append((time.perf_counter() - began) * 1000)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    seconds = time.perf_counter() - start
    ordered = sorted(durations)
    return LoginRun(
        kind,
        logins,
        min(len(keys), logins),
        concurrency,
        seconds,
        statistics.median(ordered),
        percentile(ordered, 0.99),
    )


@asynccontextmanager
async def idle_connections(
    host: str, port: int, key_id: str, secret: str, count: int, concurrency: int = 32
) -> AsyncIterator[list[SaslConnection]]:
    """`count` PLAIN-authenticated connections, open (and idle) inside the block, closed after."""
    opened: list[SaslConnection] = []
    slots = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with slots:
            connection = await SaslConnection.open(host, port)
            opened.append(connection)
            await connection.login_plain(key_id, secret)

    try:
        await asyncio.gather(*(one() for _ in range(count)))
        yield opened
    finally:
        await asyncio.gather(*(c.close() for c in opened))
