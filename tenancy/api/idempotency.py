"""`Idempotency-Key` on POST (draft-ietf-httpapi-idempotency-key-header): replay, don't redo.

Owns: the replay cache and its middleware. The first POST with a key runs and, if it succeeds
(2xx), its response is kept; the same key with the same request (method, path and canonical JSON
body) replays that response with `Idempotent-Replayed: true`; the same key with a different
request is a 422 problem; a request arriving while the first is still running is a 409 problem.
Failed requests are not kept, so a retry runs again. Keys are scoped per operator and expire 24 h
after first use. Storage choice: an in-process LRU (bounded), because the store offers no
idempotency table — keys do not survive a restart nor span several API processes; the kept
responses (including a new API key's secret, which the caller must be able to recover) live only
in memory, are never logged, and are hidden from `repr()`. Runs on the event loop only.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from tenancy.api.context import OPERATOR, Clock
from tenancy.api.errors import IdempotencyInFlightError, IdempotencyMismatchError
from tenancy.api.validation import BODY

HEADER = "Idempotency-Key"
TTL = timedelta(hours=24)
_KEPT_HEADERS = ("Location", "Link")


@dataclass(slots=True)
class Remembered:
    fingerprint: bytes
    created_at: datetime
    status: int | None = None  # None while the first request is still running
    body: bytes = field(default=b"", repr=False)
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


class ReplayCache:
    """(operator, key) → the remembered response; least recently used first."""

    def __init__(self, clock: Clock, ttl: timedelta = TTL, capacity: int = 10_000) -> None:
        self._clock = clock
        self._ttl = ttl
        self._capacity = capacity
        self._entries: OrderedDict[tuple[str, str], Remembered] = OrderedDict()

    def claim(self, scope: tuple[str, str], fingerprint: bytes) -> Remembered | None:
        """The finished entry to replay, or None after reserving `scope` for this request."""
        entry = self._entries.get(scope)
        now = self._clock()
        if entry is not None and now - entry.created_at >= self._ttl:
            del self._entries[scope]
            entry = None
        if entry is None:
            self._entries[scope] = Remembered(fingerprint, now)
            self._evict()
            return None
        if entry.fingerprint != fingerprint:
            raise IdempotencyMismatchError("this Idempotency-Key was used for a different request")
        if entry.status is None:
            raise IdempotencyInFlightError("a request with this Idempotency-Key is in progress")
        self._entries.move_to_end(scope)
        return entry

    def finish(self, scope: tuple[str, str], response: web.Response) -> None:
        entry = self._entries.get(scope)
        if entry is None:
            return
        if not 200 <= response.status < 300 or not isinstance(response.body, bytes):
            del self._entries[scope]
            return
        entry.status = response.status
        entry.body = response.body
        entry.content_type = response.content_type
        entry.headers = {h: response.headers[h] for h in _KEPT_HEADERS if h in response.headers}

    def forget(self, scope: tuple[str, str]) -> None:
        self._entries.pop(scope, None)

    def _evict(self) -> None:
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)

    def __repr__(self) -> str:
        return f"ReplayCache(entries={len(self._entries)})"


def fingerprint(request: web.Request) -> bytes:
    body = request.get(BODY)
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{request.method} {request.path}\n{canonical}".encode()).digest()


def replay(entry: Remembered) -> web.Response:
    headers = {**entry.headers, "Idempotent-Replayed": "true"}
    response = web.Response(status=entry.status or 200, body=entry.body, headers=headers)
    response.content_type = entry.content_type
    return response


def idempotency_middleware(cache: ReplayCache) -> Middleware:
    @web.middleware
    async def idempotent(request: web.Request, handler: Handler) -> web.StreamResponse:
        key = request.headers.get(HEADER)
        if request.method != "POST" or key is None:
            return await handler(request)
        scope = (request.get(OPERATOR, ""), key)
        remembered = cache.claim(scope, fingerprint(request))
        if remembered is not None:
            return replay(remembered)
        try:
            response = await handler(request)
        except BaseException:
            cache.forget(scope)
            raise
        if isinstance(response, web.Response):
            cache.finish(scope, response)
        else:
            cache.forget(scope)
        return response

    return idempotent
