"""A short-lived in-process cache of successful credential checks (PLAIN secrets, SCRAM verifiers).

A cold PLAIN check costs one scrypt (tens of ms); a connection storm of the same client would
otherwise pay it per connection, and an attacker's wrong guesses must not be able to make the
owner pay it again (docs/security.md, logins). Entries are keyed by a keyed BLAKE2b of (key id,
secret) with a per-process random key, so the cache holds nothing that would help recover a
secret; only successes are cached. An entry lives `ttl_s` (and never past the key's own expiry,
which it carries so a cache hit needs no other read). Revocations, suspensions and deletions reach
it through `apply(change)`, which every `ChangeFeed` calls for each change it delivers (and
`clear()` when it detects a gap), and the store calls directly for its own changes, so a revoked
key stops working within the feed's latency, not the TTL.

Change epochs close the race of a check that read the store before a revocation and finishes
after the cache applied it: a caller takes `epoch()` before reading the store, and `put(...,
epoch=)` (or `changed_since`) refuses when a change to that key or its tenant, or a `clear()`,
came after. `ttl_s = 0` disables caching (epochs still work). Thread-safe: one lock around the
dicts; every method is cheap enough to call on an event loop.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from tenancy.domain import Change, Principal, ScramCredential

MAX_ENTRIES = 10_000
_PROCESS_KEY = secrets.token_bytes(32)


@dataclass(frozen=True)
class CacheEntry:
    principal: Principal
    credential: ScramCredential | None
    until: datetime
    expires_at: datetime | None = None  # the key's own expiry


class VerificationCache:
    def __init__(self, ttl_s: float, clock: Callable[[], datetime]) -> None:
        self._ttl = timedelta(seconds=max(0.0, ttl_s))
        self._clock = clock
        self._entries: dict[bytes, CacheEntry] = {}
        self._lock = threading.Lock()
        self._epoch = 0
        self._floor = 0  # a put or check from before this epoch is refused (a clear, an overflow)
        self._key_epochs: dict[str, int] = {}
        self._tenant_epochs: dict[str, int] = {}
        self._verified: dict[str, datetime] = {}  # key id -> until when its PLAIN secret is cached

    @property
    def enabled(self) -> bool:
        return self._ttl > timedelta(0)

    @staticmethod
    def plain_key(key_id: str, secret: str) -> bytes:
        data = key_id.encode("utf-8") + b"\0" + secret.encode("utf-8")
        return hashlib.blake2b(data, key=_PROCESS_KEY, digest_size=32, person=b"plain").digest()

    @staticmethod
    def scram_key(key_id: str, mechanism: str) -> bytes:
        data = key_id.encode("utf-8") + b"\0" + mechanism.encode("utf-8")
        return hashlib.blake2b(data, key=_PROCESS_KEY, digest_size=32, person=b"scram").digest()

    def epoch(self) -> int:
        """Take before reading the store; pass to `put` / `changed_since` after the check."""
        with self._lock:
            return self._epoch

    def changed_since(self, principal: Principal, epoch: int) -> bool:
        """True when the key or its tenant changed (or the cache was cleared) after `epoch`."""
        with self._lock:
            return self._stale(principal, epoch)

    def has_verified_secret(self, key_id: str) -> bool:
        """True while a PLAIN secret of `key_id` is cached. A key's secret never changes (a new
        secret is a new key), so any other secret offered for it is wrong: no check needed."""
        if not self.enabled:
            return False
        with self._lock:
            until = self._verified.get(key_id)
            if until is not None and until <= self._clock():
                del self._verified[key_id]
                return False
            return until is not None

    def get(self, key: bytes) -> CacheEntry | None:
        if not self.enabled:
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.until <= self._clock():
                del self._entries[key]
                return None
            return entry

    def put(
        self,
        key: bytes,
        principal: Principal,
        expires_at: datetime | None,
        credential: ScramCredential | None = None,
        *,
        epoch: int | None = None,
    ) -> bool:
        """Cache a success; False (nothing cached) when `epoch` is given and stale."""
        until = self._clock() + self._ttl
        if expires_at is not None:
            until = min(until, expires_at)
        with self._lock:
            if epoch is not None and self._stale(principal, epoch):
                return False
            if not self.enabled:
                return True
            if len(self._entries) >= MAX_ENTRIES:
                self._evict()
            self._entries[key] = CacheEntry(principal, credential, until, expires_at)
            if credential is None:
                if len(self._verified) >= MAX_ENTRIES:
                    self._verified.clear()  # forgetting only costs checks, never lets one through
                self._verified[principal.key_id] = until
            return True

    def apply(self, change: Change) -> None:
        """Drop what `change` may have made stale: a key's entries, or a whole tenant's."""
        if change.kind.startswith("api_key."):
            self._drop(lambda entry: entry.principal.key_id == change.subject)
            self._mark(self._key_epochs, change.subject)
        elif change.kind.startswith("tenant.") and change.tenant_id is not None:
            tenant_id = change.tenant_id
            self._drop(lambda entry: entry.principal.tenant_id == tenant_id)
            self._mark(self._tenant_epochs, tenant_id)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._verified.clear()
            self._epoch += 1
            self._floor = self._epoch
            self._key_epochs.clear()
            self._tenant_epochs.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _stale(self, principal: Principal, epoch: int) -> bool:
        """Called with the lock held."""
        return (
            epoch < self._floor
            or self._key_epochs.get(principal.key_id, 0) > epoch
            or self._tenant_epochs.get(principal.tenant_id, 0) > epoch
        )

    def _mark(self, epochs: dict[str, int], name: str) -> None:
        with self._lock:
            self._epoch += 1
            if len(epochs) >= MAX_ENTRIES:  # forget the detail, refuse everything older instead
                epochs.clear()
                self._floor = self._epoch
            epochs[name] = self._epoch

    def _drop(self, stale: Callable[[CacheEntry], bool]) -> None:
        with self._lock:
            for key in [key for key, entry in self._entries.items() if stale(entry)]:
                self._verified.pop(self._entries.pop(key).principal.key_id, None)

    def _evict(self) -> None:
        """Called with the lock held: drop expired entries, else the oldest tenth."""
        now = self._clock()
        expired = [key for key, entry in self._entries.items() if entry.until <= now]
        if not expired:
            expired = list(self._entries)[: MAX_ENTRIES // 10]
        for key in expired:
            self._verified.pop(self._entries.pop(key).principal.key_id, None)
