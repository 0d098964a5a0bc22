"""HTTP v2 consumer instances across the workers of one gateway (`--workers N`).

Owns: which worker owns an instance and getting a request to it. The owner of an instance is a
pure function of its group and name (`owner_of`: a stable digest modulo the worker count), so
every worker knows it without asking anyone, and two workers can never hold one instance (a
second create of a name lands on the same owner and is 409 there). A create without a name gets
one the receiving worker owns; a create naming one another worker owns, and every request for an
instance another worker owns, is proxied to that worker's internal socket (`WorkerSlot`,
`<dir>/w<k>.sock`, a directory only the gateway's user can open) with the client's own headers:
the owner authenticates the caller again and applies every check (the service account that made
the instance; 404 for any other) exactly as for a request that reached it first. The body is
streamed through, never buffered here; the owner's bounds and timeouts apply to it. An owner that
is down (killed, restarting) has lost its instances: the answer is the 404 of a missing instance
(a create naming one it would own is 503 with Retry-After). A request that came in on the
internal socket is never proxied again, and only there is the client's address taken from the
`X-Pier-Client-Addr` header. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import secrets
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from gateway.config import WorkerSlot
from gateway.http.errors import CONSUMER_INSTANCE_NOT_FOUND, KAFKA_RETRIABLE, ApiError

log = logging.getLogger("pier.gateway.http.workers")
CLIENT_ADDR = "X-Pier-Client-Addr"
GATEWAY_HOP = "X-Pier-Gateway-Hop"  # proxied from another gateway: never proxied to a third
FORWARDED_PROTO = "X-Pier-Forwarded-Proto"
FORWARDED_HOST = "X-Pier-Forwarded-Host"
# The client's headers the owner needs to answer exactly as if the request had reached it.
PASSED_HEADERS = (
    "Authorization",
    "Accept",
    "Content-Type",
    "Content-Encoding",
    "User-Agent",
    GATEWAY_HOP,
)
HOP_HEADERS = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length"})
CONNECT_TIMEOUT_S = 5.0
CHUNK_BYTES = 256 * 1024


def owner_of(group: str, name: str, count: int) -> int:
    """The worker (0..count-1) that owns the instance `name` of `group`; the same in every
    process (a digest, not Python's salted `hash`)."""
    digest = hashlib.blake2b(f"{group}\0{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % count


def arrived_internally(request: web.Request) -> bool:
    """Whether the request came in on a worker's internal (Unix) socket: a sibling proxied it."""
    transport = request.transport
    return transport is not None and isinstance(transport.get_extra_info("sockname"), str)


class WorkerRouter:
    def __init__(self, slot: WorkerSlot) -> None:
        self.slot = slot
        self._sessions: dict[int, aiohttp.ClientSession] = {}

    @property
    def socket_path(self) -> Path:
        return self.slot.socket_path(self.slot.index)

    def owner(self, group: str, name: str) -> int | None:
        """The worker that owns the instance, None when it is this one."""
        owner = owner_of(group, name, self.slot.count)
        return None if owner == self.slot.index else owner

    def local_name(self, group: str) -> str:
        """A fresh instance name this worker owns (about `count` draws)."""
        while True:
            name = f"rest-consumer-{secrets.token_hex(8)}"
            if self.owner(group, name) is None:
                return name

    @staticmethod
    def origin(request: web.Request) -> tuple[str, str]:
        """The scheme and host the client used (a proxied request carries them in headers)."""
        if arrived_internally(request):
            return (
                request.headers.get(FORWARDED_PROTO, request.scheme),
                request.headers.get(FORWARDED_HOST, request.host),
            )
        return request.scheme, request.host

    @staticmethod
    def with_client_address(request: web.Request) -> web.Request:
        """A proxied request as its owner sees it: the client's address, not the socket's."""
        if arrived_internally(request) and CLIENT_ADDR in request.headers:
            return request.clone(remote=request.headers[CLIENT_ADDR])
        return request

    async def forward(
        self, request: web.Request, owner: int, *, body: bytes | None = None, create: bool = False
    ) -> web.StreamResponse:
        """Proxy `request` to worker `owner` and stream its answer back."""
        scheme, host = self.origin(request)
        extra = {CLIENT_ADDR: request.remote or "", FORWARDED_PROTO: scheme, FORWARDED_HOST: host}
        try:
            return await proxy(
                self._session(owner), f"http://worker{owner}", request, extra, body=body
            )
        except (aiohttp.ClientConnectionError, FileNotFoundError, ConnectionRefusedError) as exc:
            log.warning(
                "event=worker_unreachable worker=%d owner=%d error=%s",
                self.slot.index,
                owner,
                exc.__class__.__name__,
            )
            if create:
                raise ApiError(
                    503, "the worker that owns this name is restarting", KAFKA_RETRIABLE, 1
                ) from None
            raise not_found(request) from None

    async def gather_json(self, request: web.Request) -> list[Any]:
        """`request` (a GET) answered by every other worker: their JSON answers that were 200
        (a worker that is down or refuses is left out, logged)."""
        answers: list[Any] = []
        headers = {h: request.headers[h] for h in PASSED_HEADERS if h in request.headers}
        for owner in range(self.slot.count):
            if owner == self.slot.index:
                continue
            url = f"http://worker{owner}{request.rel_url}"
            try:
                async with self._session(owner).get(url, headers=headers) as answer:
                    if answer.status == 200:
                        answers.append(await answer.json(content_type=None))
                        continue
                    status: object = answer.status
            except (aiohttp.ClientError, FileNotFoundError, ConnectionRefusedError) as exc:
                status = exc.__class__.__name__
            log.warning("event=worker_not_listed worker=%d answer=%s", owner, status)
        return answers

    def _session(self, owner: int) -> aiohttp.ClientSession:
        session = self._sessions.get(owner)
        if session is None or session.closed:
            # A connection per request: a pooled one the owner closed (keep-alive timeout, an
            # answer with `Connection: close`) would fail a proxied request that cannot be retried.
            connector = aiohttp.UnixConnector(
                path=str(self.slot.socket_path(owner)), force_close=True
            )
            session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S),
                auto_decompress=False,
            )
            self._sessions[owner] = session
        return session

    async def close(self) -> None:
        """Close the clients, remove this worker's socket, and the directory when it is the last
        (the supervisor removes it too, unless it was killed)."""
        for session in self._sessions.values():
            await session.close()
        self._sessions.clear()
        with contextlib.suppress(OSError):
            self.socket_path.unlink()
            self.slot.socket_dir.rmdir()


def not_found(request: web.Request) -> ApiError:
    """The 404 of an instance that does not exist (or is not the caller's)."""
    group, name = request.match_info.get("group_name"), request.match_info.get("instance")
    return ApiError(
        404, f"consumer instance {name!r} of group {group!r} not found", CONSUMER_INSTANCE_NOT_FOUND
    )


def gateways_session() -> aiohttp.ClientSession:
    """A client for proxying to other gateways' HTTP APIs (their TLS certificates verified)."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(force_close=True),  # as between workers
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S),
        auto_decompress=False,
    )


async def to_gateway(
    session: aiohttp.ClientSession, request: web.Request, url: str
) -> web.StreamResponse:
    """Proxy `request` to the gateway at `url` (it holds the instance); its answer streamed
    back. A gateway that cannot be reached holds no live instance: 404."""
    try:
        return await proxy(session, url, request, {GATEWAY_HOP: "1"})
    except aiohttp.ClientConnectionError as exc:
        log.warning("event=gateway_unreachable url=%s error=%s", url, exc.__class__.__name__)
        raise not_found(request) from None


async def proxy(
    session: aiohttp.ClientSession,
    origin: str,
    request: web.Request,
    extra: dict[str, str],
    *,
    body: bytes | None = None,
) -> web.StreamResponse:
    """`request` sent to `origin` with the client's headers and `extra`; the answer relayed."""
    headers = {h: request.headers[h] for h in PASSED_HEADERS if h in request.headers}
    headers.update(extra)
    if body is not None:
        headers["Content-Type"] = "application/json"
        headers.pop("Content-Encoding", None)
    data: object = body
    if body is None and request.can_read_body:
        data = request.content  # streamed, never buffered here
    url = f"{origin}{request.rel_url}"
    async with session.request(request.method, url, headers=headers, data=data) as answer:
        return await _relay(request, answer)


async def _relay(request: web.Request, answer: aiohttp.ClientResponse) -> web.StreamResponse:
    response = web.StreamResponse(status=answer.status, reason=answer.reason)
    for name, value in answer.headers.items():
        if name.lower() not in HOP_HEADERS:
            response.headers.add(name, value)
    if answer.content_length is not None:
        response.content_length = answer.content_length
    await response.prepare(request)
    async for chunk in answer.content.iter_chunked(CHUNK_BYTES):
        await response.write(chunk)
    await response.write_eof()
    return response
