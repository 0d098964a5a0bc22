"""A short-lived in-process cache of successful credential checks (PLAIN secrets, SCRAM verifiers).

A cold PLAIN check costs one scrypt (tens of ms); a connection storm of the same client would
otherwise pay it per connection. Entries are keyed by a keyed BLAKE2b of (key id, secret) with a
per-process random key, so the cache holds nothing that would help recover a secret; only
successes are cached. An entry lives `ttl_s` (and never past the key's own expiry). Revocations,
suspensions and deletions reach it through `apply(change)`, which every `ChangeFeed` calls for each
change it delivers (and `clear()` when it detects a gap), and the store calls directly for its own
changes, so a revoked key stops working within the feed's latency, not the TTL. `ttl_s = 0`
disables caching. Thread-safe: one lock around the dict.
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
class _Entry:
    principal: Principal
    credential: ScramCredential | None
    until: datetime


class VerificationCache:
    def __init__(self, ttl_s: float, clock: Callable[[], datetime]) -> None:
        self._ttl = timedelta(seconds=max(0.0, ttl_s))
        self._clock = clock
        self._entries: dict[bytes, _Entry] = {}
        self._lock = threading.Lock()

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

    def get(self, key: bytes) -> _Entry | None:
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
    ) -> None:
        if not self.enabled:
            return
        until = self._clock() + self._ttl
        if expires_at is not None:
            until = min(until, expires_at)
        with self._lock:
            if len(self._entries) >= MAX_ENTRIES:
                self._evict()
            self._entries[key] = _Entry(principal, credential, until)

    def apply(self, change: Change) -> None:
        """Drop what `change` may have made stale: a key's entries, or a whole tenant's."""
        if change.kind.startswith("api_key."):
            self._drop(lambda entry: entry.principal.key_id == change.subject)
        elif change.kind.startswith("tenant.") and change.tenant_id is not None:
            self._drop(lambda entry: entry.principal.tenant_id == change.tenant_id)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _drop(self, stale: Callable[[_Entry], bool]) -> None:
        with self._lock:
            for key in [key for key, entry in self._entries.items() if stale(entry)]:
                del self._entries[key]

    def _evict(self) -> None:
        """Called with the lock held: drop expired entries, else the oldest tenth."""
        now = self._clock()
        expired = [key for key, entry in self._entries.items() if entry.until <= now]
        if not expired:
            expired = list(self._entries)[: MAX_ENTRIES // 10]
        for key in expired:
            del self._entries[key]
