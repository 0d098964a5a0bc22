"""Turns one request frame into one response: header parsing, routing, version checks, decoding.

Owns: the protocol logic of a connection, kept apart from asyncio plumbing so tests can feed it
bytes. Runs on the event loop; one call per request, and a connection awaits each call before
reading the next request, which is what keeps responses in request order (Kafka mutes a channel
while its request is in flight for the same reason). A handler that raises anything but
`CloseConnection` is answered as Kafka's `KafkaApis.handleError` answers it: the API's response
with UNKNOWN_SERVER_ERROR in every entry (`brokers.server.error_response`), logged once as
`event=handler_failed` with its traceback, and the connection stays open (an acks=0 produce,
which has no response, closes it instead, as in Kafka).
Produce answers come encoded from their handler (`produce_response`; kio's writer for the shape
it leaves), OffsetCommit answers are encoded by `offset_commit_response` (struct-packed; kio's
writer for the shapes it leaves), and the per-API request metrics' labelled children are looked
up once per API.
"""

from __future__ import annotations

import logging
import struct
import time
from dataclasses import dataclass
from typing import Any

from brokers.server.context import RequestContext
from brokers.server.error_response import error_response
from brokers.server.metrics import ServerMetrics
from brokers.server.offset_commit_response import encode_offset_commit_response
from brokers.server.response import RawResponse
from brokers.server.routes import LegacyHandler, RouteTable
from brokers.wire.errors import ErrorCode
from brokers.wire.headers import parse_fixed, parse_request_header
from brokers.wire.messages import (
    MalformedRequestError,
    UnknownMessageError,
    decode_request,
    encode_entity,
    is_flexible_request,
    response_header_is_flexible,
    response_schema,
)

PRODUCE_KEY = 0
OFFSET_COMMIT_KEY = 8
_ENCODED = (RawResponse, bytes)  # a handler's answer already encoded (a tuple: no union per call)
API_VERSIONS_KEY = 18
UNKNOWN_SERVER_ERROR_MESSAGE = (
    "The server experienced an unexpected error when processing the request."
)
log = logging.getLogger("pier.server")


class CloseConnection(Exception):
    """The request cannot be answered; Kafka closes the connection in these cases."""


@dataclass(frozen=True, slots=True)
class Reply:
    correlation_id: int
    flexible_header: bool
    body: bytes | RawResponse


@dataclass(frozen=True, slots=True)
class Peer:
    host: str
    connection_id: str
    principal: str = "User:ANONYMOUS"


class Dispatcher:
    def __init__(self, routes: RouteTable, metrics: ServerMetrics | None = None) -> None:
        self._routes = routes
        self._metrics = metrics
        self._observers: dict[str, tuple[Any, Any]] = {}  # per API: its metrics' children
        self._header_kinds: dict[tuple[int, int], tuple[bool, bool]] = {}

    async def dispatch(self, frame: memoryview, peer: Peer) -> Reply | None:
        api_key, version, correlation_id = parse_fixed(frame)
        route = self._routes.get(api_key)
        if route is None:
            raise CloseConnection(f"unknown api key {api_key}")
        if not route.serves(version):
            if api_key == API_VERSIONS_KEY:
                return Reply(correlation_id, False, self._unsupported_api_versions())
            raise CloseConnection(f"api key {api_key} version {version} not served")
        if route.is_legacy(version):
            return self._legacy(route.legacy, frame, peer, version)
        flexible, flexible_response = self._headers(api_key, version)
        header, offset = parse_request_header(frame, flexible)
        if route.decode is None:
            request = decode_request(api_key, version, frame, offset)
        else:
            request = route.decode(version, frame[offset:])
        context = RequestContext(header, peer.host, peer.connection_id, peer.principal)
        started = time.perf_counter()
        encoded: bytes | RawResponse | None
        try:
            body = await route.handler(context, request)
            if body is None:  # acks=0 produce: no response at all
                encoded = None
            elif isinstance(body, _ENCODED):
                encoded = body
            elif api_key == OFFSET_COMMIT_KEY:
                encoded = encode_offset_commit_response(body) or encode_entity(body)
            else:
                encoded = encode_entity(body)
        except CloseConnection:
            raise
        except Exception as exc:
            if route.decode is not None:  # the error answer mirrors each entry of kio's reading
                request = decode_request(api_key, version, frame, offset)
            encoded = self._failed(context, request, correlation_id, exc)
        if self._metrics is not None:
            count, latency = self._observer(route.name or str(api_key))
            count.inc()
            latency.observe(time.perf_counter() - started)
        if encoded is None:
            return None
        return Reply(correlation_id, flexible_response, encoded)

    def _headers(self, api_key: int, version: int) -> tuple[bool, bool]:
        """Whether the request and the response header of (api_key, version) are flexible
        (found once per version: two schema lookups and a name comparison)."""
        found = self._header_kinds.get((api_key, version))
        if found is None:
            try:
                flexible = is_flexible_request(api_key, version)
            except UnknownMessageError as exc:
                raise CloseConnection(str(exc)) from None
            found = (flexible, response_header_is_flexible(api_key, version))
            self._header_kinds[(api_key, version)] = found
        return found

    def _observer(self, name: str) -> tuple[Any, Any]:
        """The request counter and latency histogram of API `name` (a label lookup takes a lock
        and builds a key: once per API, not per request)."""
        found = self._observers.get(name)
        if found is None:
            assert self._metrics is not None
            found = (
                self._metrics.requests.labels(name),
                self._metrics.request_latency.labels(name),
            )
            self._observers[name] = found
        return found

    def _failed(
        self, context: RequestContext, request: Any, correlation_id: int, exc: Exception
    ) -> bytes:
        """UNKNOWN_SERVER_ERROR for every entry of the request; the connection stays open."""
        api_key, version = context.header.api_key, context.api_version
        log.error(
            "event=handler_failed api_key=%d api_version=%d correlation_id=%d error=%r",
            api_key,
            version,
            correlation_id,
            exc,
            exc_info=exc,
        )
        if api_key == PRODUCE_KEY and getattr(request, "acks", None) == 0:
            raise CloseConnection("acks=0 produce failed") from None  # no response expected
        try:
            response = error_response(
                request,
                response_schema(api_key, version),
                ErrorCode.unknown_server_error,
                UNKNOWN_SERVER_ERROR_MESSAGE,
            )
            return encode_entity(response)
        except Exception as build_exc:  # a response we cannot shape: Kafka's last resort
            raise CloseConnection(f"no error response for api {api_key}: {build_exc!r}") from None

    def _legacy(
        self, legacy: LegacyHandler | None, frame: memoryview, peer: Peer, version: int
    ) -> Reply | None:
        assert legacy is not None  # RouteTable.add refuses refused versions without a handler
        _, _, correlation_id = parse_fixed(frame)
        header, offset = parse_request_header(frame, flexible=False)
        context = RequestContext(header, peer.host, peer.connection_id, peer.principal)
        try:
            body = legacy(context, frame, offset)
        except (struct.error, IndexError, ValueError):
            raise MalformedRequestError(f"malformed legacy api {header.api_key} request") from None
        return None if body is None else Reply(correlation_id, False, body)

    def _unsupported_api_versions(self) -> bytes:
        """KIP-511: a v0 body with UNSUPPORTED_VERSION and our ranges, so the client can retry."""
        ranges = self._routes.version_ranges()
        out = bytearray(struct.pack(">hi", ErrorCode.unsupported_version, len(ranges)))
        for api_key, low, high in ranges:
            out += struct.pack(">hhh", api_key, low, high)
        return bytes(out)


__all__ = ["CloseConnection", "Dispatcher", "MalformedRequestError", "Peer", "Reply"]
