"""One TCP connection to one broker: pipelined requests, ApiVersions negotiation, timeouts.

Owns: the asyncio side of `ClientProtocol` — the socket, a future per request in flight, write
flow control, and failure: any protocol violation, timeout or close fails every request in flight
with the same error and closes the socket (a later answer could not be matched safely). Many
requests may be in flight at once; the broker answers them in order (see `protocol.py`).
On connect, ApiVersions picks per API the highest version both sides serve (KIP-511: if our
ApiVersions version is refused, the v0 answer names the broker's range and we retry once within
it). Runs on one event loop; not thread-safe. Timeouts use the event loop's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

from brokers.client.config import SOFTWARE_NAME, SOFTWARE_VERSION, ClientConfig
from brokers.client.errors import (
    BrokerConnectionError,
    ClientError,
    ConnectionClosedError,
    RequestTimeoutError,
    check,
)
from brokers.client.messages import make, request_module
from brokers.client.protocol import ClientProtocol
from brokers.client.versions import CLIENT_VERSIONS, ApiKey, negotiate, version_for
from brokers.wire.errors import ErrorCode


class BrokerConnection(asyncio.Protocol):
    def __init__(self, address: str, config: ClientConfig) -> None:
        self.address = address
        self._config = config
        self._protocol = ClientProtocol(config.client_id, config.max_response_bytes)
        self._transport: asyncio.Transport | None = None
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._writable = asyncio.Event()
        self._writable.set()
        self._failure: BrokerConnectionError | None = None
        self._lost = asyncio.Event()
        self.versions: dict[int, int] = {}

    @classmethod
    async def connect(cls, host: str, port: int, config: ClientConfig) -> BrokerConnection:
        """Open a connection and negotiate API versions; raises BrokerConnectionError."""
        connection = cls(f"{host}:{port}", config)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(config.connect_timeout_s):
                await loop.create_connection(lambda: connection, host, port)
        except (OSError, TimeoutError) as exc:
            raise BrokerConnectionError(f"cannot connect to {host}:{port}: {exc}") from None
        try:
            await connection.negotiate()
        except BaseException:
            await connection.aclose()
            raise
        return connection

    @property
    def request_timeout_s(self) -> float:
        return self._config.request_timeout_s

    @property
    def closed(self) -> bool:
        return self._failure is not None

    def version(self, api_key: int) -> int:
        """The negotiated version of an API; UnsupportedVersionError if there is none."""
        return version_for(self.versions, api_key)

    async def send(
        self, request: Any, *, timeout_s: float | None = None, name_scope: str | None = None
    ) -> Any:
        """Send a kio request and return its decoded response (`name_scope`: see
        `ClientProtocol.request`)."""
        if not self._writable.is_set():
            await self._writable.wait()
        self._raise_if_failed()
        correlation_id, parts = self._protocol.request(request, name_scope=name_scope)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = future
        self._write(parts)
        try:
            async with asyncio.timeout(timeout_s or self._config.request_timeout_s):
                return await future
        except TimeoutError:
            self._fail(RequestTimeoutError(f"{self.address}: no response to request in time"))
            raise RequestTimeoutError(f"{self.address}: request timed out") from None

    def send_without_response(self, request: Any) -> None:
        """Write a request the broker will not answer (acks=0 produce)."""
        self._raise_if_failed()
        _correlation_id, parts = self._protocol.request(request, expect_response=False)
        self._write(parts)

    def close(self) -> None:
        """Close at once; bytes already written are still flushed to the socket."""
        self._fail(ConnectionClosedError(f"{self.address}: connection closed by the client"))

    async def aclose(self) -> None:
        """Close and wait until the socket is released."""
        self.close()
        if self._transport is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._config.connect_timeout_s):
                    await self._lost.wait()

    # -- asyncio.Protocol callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's: no asyncio.Transport
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            answers = self._protocol.feed(data)
        except BrokerConnectionError as exc:
            self._fail(exc)
            return
        for answer in answers:
            future = self._waiting.pop(answer.correlation_id, None)
            if future is not None and not future.done():  # done: its caller gave up
                future.set_result(answer.response)

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f"{self.address}: connection closed by the broker"
        try:
            self._protocol.eof()
        except ClientError as lost:
            reason = f"{self.address}: {lost}"
        self._fail(ConnectionClosedError(reason))
        self._lost.set()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # -- internals ------------------------------------------------------------------------------
    def _write(self, parts: list[bytes]) -> None:
        assert self._transport is not None
        self._transport.writelines(parts)

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _fail(self, error: BrokerConnectionError) -> None:
        if self._failure is not None:
            return
        self._failure = error
        self._writable.set()  # wake writers so they see the failure
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(error)
        if self._transport is not None:
            # Flush what was written (acks=0 produce) unless the stream itself is broken.
            broken = not isinstance(error, ConnectionClosedError)
            (self._transport.abort if broken else self._transport.close)()

    async def negotiate(self) -> None:
        """ApiVersions: record the version to use per API (`connect` does this first)."""
        low, high = CLIENT_VERSIONS[ApiKey.API_VERSIONS]  # needed before anything is known
        response = await self.send(_api_versions_request(high))
        if response.error_code == ErrorCode.unsupported_version:
            theirs = [k.max_version for k in response.api_keys if k.api_key == ApiKey.API_VERSIONS]
            retry_at = min(max(theirs, default=low), high)
            if retry_at < low:
                check(response.error_code, self.address)
            response = await self.send(_api_versions_request(retry_at))
        check(response.error_code, f"{self.address} ApiVersions")
        self.versions = negotiate(
            ((int(k.api_key), int(k.min_version), int(k.max_version)) for k in response.api_keys),
            self._config.api_versions,
        )


def _api_versions_request(version: int) -> Any:
    module = request_module(ApiKey.API_VERSIONS, version)
    return make(
        module,
        "ApiVersionsRequest",
        client_software_name=SOFTWARE_NAME,
        client_software_version=SOFTWARE_VERSION,
    )
