"""Operator authentication: `Authorization: Bearer <token>` checked with `store.verify_operator`.

Owns: the auth middleware and a short-lived cache of verified tokens. The store keeps tokens as
slow salted hashes, so verifying every request would cost a hash per call; a verified token is
remembered for `ttl` (default 30 s), keyed by the token's SHA-256 (the token itself is never
kept, logged or echoed). Only successes are cached, so a new operator works at once; a removed
one keeps access for at most `ttl`. Failures answer 401 with `WWW-Authenticate: Bearer`
(RFC 6750). Paths whose operations declare `security: []` (health, metrics, the document) are
public. Runs on the event loop; the cache is touched only there.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from datetime import datetime, timedelta

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from tenancy.api.context import OPERATOR, Clock, context_of
from tenancy.api.errors import UnauthorizedError
from tenancy.api.openapi import public_paths

MAX_TOKEN_LENGTH = 512


class VerifiedTokens:
    """SHA-256(token) → (operator, verified at), least recently used first; bounded."""

    def __init__(self, clock: Clock, ttl: timedelta, capacity: int = 1024) -> None:
        self._clock = clock
        self._ttl = ttl
        self._capacity = capacity
        self._entries: OrderedDict[bytes, tuple[str, datetime]] = OrderedDict()

    def get(self, digest: bytes) -> str | None:
        entry = self._entries.get(digest)
        if entry is None:
            return None
        operator, at = entry
        if self._clock() - at >= self._ttl:
            del self._entries[digest]
            return None
        self._entries.move_to_end(digest)
        return operator

    def put(self, digest: bytes, operator: str) -> None:
        self._entries[digest] = (operator, self._clock())
        self._entries.move_to_end(digest)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)

    def __repr__(self) -> str:
        return f"VerifiedTokens(entries={len(self._entries)})"


def bearer_token(header: str | None) -> str:
    if not header:
        raise UnauthorizedError("an operator bearer token is required")
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > MAX_TOKEN_LENGTH:
        raise UnauthorizedError("the Authorization header must be 'Bearer <token>'")
    return token


def auth_middleware(cache: VerifiedTokens) -> Middleware:
    public = public_paths()

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        resource = request.match_info.route.resource
        if resource is not None and resource.canonical in public:
            return await handler(request)
        token = bearer_token(request.headers.get("Authorization"))
        digest = hashlib.sha256(token.encode()).digest()
        operator = cache.get(digest)
        if operator is None:
            ctx = context_of(request)
            operator = await ctx.run(ctx.store.verify_operator, token)
            if operator is None:
                raise UnauthorizedError("the operator token is not valid")
            cache.put(digest, operator)
        request[OPERATOR] = operator
        return await handler(request)

    return authenticate
