"""An HTTP connection's login, kept for the connection's next requests (docs/security.md, "HTTP
logins").

Owns: `Logins`. A keep-alive connection's next request that sends the same `Authorization` and
client id, from the same client address (requests a sibling worker or gateway proxies share its
connection and name their own client's address), reuses the `Caller` its last checked request resolved (no credential check, tenant
lookup or policy built again), while all of these hold:
- at most `REUSE_MS` since the check that made it, and never past the key's own expiry;
- the verification cache reports no change to the key or its tenant since the epoch taken before
  that check (a revocation, a suspension, a deletion, or a cache clear after a feed gap ends every
  reuse at once: a revoked key's next request is refused exactly as soon as without the reuse,
  the verification cache's bound, docs/security.md);
- the tenant is active in the directory;
- the verification cache is enabled (`verification.cache.ttl.ms` 0 keeps nothing).
The header is held as a keyed BLAKE2b digest (per-process random key), never as sent. Entries are
per transport in a `WeakKeyDictionary`, so they go with their connection. Only successes are
kept; a request whose login fails keeps nothing. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import hashlib
import secrets
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web

from gateway.http.context import Caller
from tenancy.domain import Principal

REUSE_MS = 1_000  # the longest a connection's login is reused without asking the authenticator
_DIGEST_KEY = secrets.token_bytes(32)


class LoginEpochs(Protocol):
    """`gateway.auth.authenticator.Authenticator` satisfies it."""

    def login_epoch(self) -> int | None: ...

    def login_changed_since(self, principal: Principal, epoch: int) -> bool: ...


@dataclass(slots=True)
class _Kept:
    digest: bytes
    client_id: str
    caller: Caller
    epoch: int
    until_ms: int


def _digest(authorization: str) -> bytes:
    data = authorization.encode("utf-8", "surrogateescape")
    return hashlib.blake2b(data, key=_DIGEST_KEY, digest_size=16).digest()


class Logins:
    def __init__(self, epochs: LoginEpochs, clock_ms: Callable[[], int]) -> None:
        self._epochs = epochs
        self._clock_ms = clock_ms
        self._kept: weakref.WeakKeyDictionary[object, _Kept] = weakref.WeakKeyDictionary()

    def reused(self, request: web.BaseRequest, authorization: str, client_id: str) -> Caller | None:
        """The caller this request's connection resolved before, when it may be reused."""
        transport = request.transport
        kept = None if transport is None else self._kept.get(transport)
        if kept is None:
            return None
        caller = kept.caller
        if (
            kept.client_id == client_id
            and caller.host == (request.remote or "")  # a proxied request names its client's
            and self._clock_ms() < kept.until_ms
            and kept.digest == _digest(authorization)
            and not self._epochs.login_changed_since(caller.principal, kept.epoch)
            and _active(caller)
        ):
            return caller
        del self._kept[transport]
        return None

    def keep(
        self,
        request: web.BaseRequest,
        authorization: str,
        caller: Caller,
        epoch: int | None,
        expires_at_ms: int | None,
    ) -> None:
        """Keep a login checked after `epoch` (`login_epoch()`, None: keep nothing)."""
        transport = request.transport
        if epoch is None or transport is None:
            return
        until = self._clock_ms() + REUSE_MS
        if expires_at_ms is not None:
            until = min(until, expires_at_ms)
        kept = _Kept(_digest(authorization), caller.client_id, caller, epoch, until)
        self._kept[transport] = kept

    def __len__(self) -> int:
        return len(self._kept)


def _active(caller: Caller) -> bool:
    state = caller.services.session.directory.current(caller.tenant_id)
    return state is not None and state.tenant.status == "active"
