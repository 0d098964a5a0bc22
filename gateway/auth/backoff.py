"""Failed-login backoff per source address and per key id (docs/security.md, logins).

Owns whether a login attempt may have an expensive check now (a store read, a scrypt) and the
bookkeeping of failed checks. A cached success never reaches here (the authenticator consults the
verification cache first), so a key's owner whose secret was verified once is never throttled.

- Per source address (an IPv4 address; an IPv6 /64, what one host usually holds): the first
  `free_failures` failed checks are free; after that the address waits `initial_s * 2**k` (k
  failures past the free ones, capped at `max_s`) from its last failure before its next check.
  Once an address has failed, its checks under way count as failures until they end, so a burst
  of parallel attempts cannot all slip in before the next failure is known. An address that has
  not failed may have any number of checks under way (many clients behind one NAT logging in at
  once are not throttled); each beyond the first pays its key's bucket below, so a first burst of
  guesses against one key gets at most `key_burst` checks, and the hashing queue bounds the rest. Attempts refused meanwhile do not extend the wait
  (the address gets its next check on schedule however hard it hammers). An address quiet for
  `max_s` since its last failure is forgotten. A success does not forgive earlier failures (an
  attacker could interleave logins of its own key).
- Per key id: a token bucket (`key_burst` tokens, one more every `key_refill_s`) that every check
  from a *suspect* address (one with failures or checks under way) must pay. A check from a clean
  address is free of it, and a success refunds its token. So guessers spread over many addresses
  get at most `free_failures` checks per address plus the bucket's rate against one key, while the
  key's owner, logging in from its own clean address, always gets its check: guessing from X can
  slow K's owner on Y by nothing more than the shared hashing threads' queue.

Refused attempts get no check; the caller fails them like any failure. Both tables are LRU-bounded
(`max_tracked`); evicting a quiet entry forgives it. Pure (the clock is injected); runs on the
event loop; not thread-safe.

In a worker of `pier gateway --workers N` the per-address state lives in the workers' shared
`AddressTable` (`gateway.auth.address_table`; the clock must then be `time.monotonic`), so an
address backing off on one worker backs off on all: reconnecting until another worker takes the
connection gains nothing. The per-key buckets stay per worker (a guesser spread over many
addresses gets at most N × the bucket's rate against one key).
"""

from __future__ import annotations

import contextlib
import ipaddress
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

from gateway.auth.address_table import AddressTable, SharedEntry

V = TypeVar("V")


@dataclass(frozen=True)
class BackoffPolicy:
    free_failures: int = 5  # sasl.failure.backoff.free.failures
    initial_s: float = 1.0  # sasl.failure.backoff.ms
    max_s: float = 60.0  # sasl.failure.backoff.max.ms
    key_burst: int = 10  # sasl.key.check.burst
    key_refill_s: float = 1.0  # sasl.key.check.refill.ms
    max_tracked: int = 65_536

    @classmethod
    def from_settings(cls, setting: Callable[[str], int]) -> BackoffPolicy:
        """The policy from the gateway's `sasl.*` settings (gateway/config.py)."""
        return cls(
            free_failures=setting("sasl.failure.backoff.free.failures"),
            initial_s=setting("sasl.failure.backoff.ms") / 1000,
            max_s=setting("sasl.failure.backoff.max.ms") / 1000,
            key_burst=setting("sasl.key.check.burst"),
            key_refill_s=setting("sasl.key.check.refill.ms") / 1000,
        )

    def delay_s(self, failures: int) -> float:
        """The wait after the last failure before the next check, for `failures` failures."""
        if failures < self.free_failures:
            return 0.0
        exponent = min(failures - self.free_failures, 32)
        return float(min(self.max_s, self.initial_s * 2**exponent))


@dataclass
class _Address:
    failures: int = 0
    in_flight: int = 0
    last_failure: float = 0.0


class _State(Protocol):
    failures: int
    in_flight: int
    last_failure: float


class _SharedAddress:
    """An address's state in the shared table: `in_flight` is every worker's; changing it
    changes this worker's own column by as much."""

    __slots__ = ("_entry",)

    def __init__(self, entry: SharedEntry) -> None:
        self._entry = entry

    @property
    def failures(self) -> int:
        return self._entry.failures

    @failures.setter
    def failures(self, value: int) -> None:
        self._entry.failures = value

    @property
    def last_failure(self) -> float:
        return self._entry.last_failure

    @last_failure.setter
    def last_failure(self, value: float) -> None:
        self._entry.last_failure = value

    @property
    def in_flight(self) -> int:
        return self._entry.in_flight

    @in_flight.setter
    def in_flight(self, value: int) -> None:
        self._entry.own_in_flight += value - self._entry.in_flight
        self._entry.in_flight = value


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass(frozen=True)
class Ticket:
    """An admitted check; end it with exactly one of `failed`, `succeeded`, `abandoned`."""

    address: str
    key_id: str
    paid_key_token: bool


def address_key(peer: str) -> str:
    """What failures are counted against: the IPv4 address, or the IPv6 /64 (a v4-mapped IPv6
    address counts as its IPv4 one); anything else (a Unix socket, no address) as given."""
    try:
        address = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return peer
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class LoginBackoff:
    def __init__(
        self,
        policy: BackoffPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        *,
        shared: AddressTable | None = None,
    ) -> None:
        self.policy = policy or BackoffPolicy()
        self._clock = clock
        self._shared = shared
        self._addresses: OrderedDict[str, _Address] = OrderedDict()
        self._keys: OrderedDict[str, _Bucket] = OrderedDict()

    def admit(self, peer: str, key_id: str) -> Ticket | None:
        """A ticket for one expensive check now, or None: refused (fail without checking)."""
        now = self._clock()
        address = address_key(peer)
        with self._state(address, now) as state:
            pending = state.failures + state.in_flight
            if (
                state.failures > 0
                and pending >= self.policy.free_failures
                and (
                    state.in_flight > 0
                    or now < state.last_failure + self.policy.delay_s(state.failures)
                )
            ):
                return None
            paid = pending > 0
            if paid and not self._take_token(key_id, now):
                return None
            state.in_flight += 1
            return Ticket(address, key_id, paid)

    def failed(self, ticket: Ticket) -> None:
        """The check ran and the credentials were wrong (or the key unusable)."""
        with self._existing(ticket.address) as state:
            if state is not None:
                state.in_flight = max(0, state.in_flight - 1)
                state.failures += 1
                state.last_failure = self._clock()

    def note_failure(self, peer: str) -> None:
        """A failure found without an admitted check (a wrong SCRAM proof against a cached
        verifier): it counts against the address like any other."""
        with self._state(address_key(peer), self._clock()) as state:
            state.failures += 1
            state.last_failure = self._clock()

    def succeeded(self, ticket: Ticket) -> None:
        self._release(ticket)

    def abandoned(self, ticket: Ticket) -> None:
        """The check could not be made (no hashing capacity, a store error): nothing is learnt."""
        self._release(ticket)

    def wait_s(self, peer: str) -> float:
        """How long `peer` must still wait for its next check (0: it may have one now)."""
        with self._existing(address_key(peer)) as state:
            if state is None or state.failures < self.policy.free_failures:
                return 0.0
            until = state.last_failure + self.policy.delay_s(state.failures)
            return max(0.0, until - self._clock())

    def _release(self, ticket: Ticket) -> None:
        with self._existing(ticket.address) as state:
            if state is not None:
                state.in_flight = max(0, state.in_flight - 1)
        bucket = self._keys.get(ticket.key_id)
        if ticket.paid_key_token and bucket is not None:
            bucket.tokens = min(float(self.policy.key_burst), bucket.tokens + 1)

    @contextlib.contextmanager
    def _state(self, address: str, now: float) -> Iterator[_State]:
        """`address`'s state for a block (created if new): the shared table's in a worker."""
        if self._shared is None:
            yield self._address(address, now)
            return
        with self._shared.entry(f"login:{address}", now) as entry:
            if entry is None:  # the table's window is full: this address is not tracked
                yield _Address()
                return
            state = _SharedAddress(entry)
            self._forgive_quiet(state, now)
            yield state

    @contextlib.contextmanager
    def _existing(self, address: str) -> Iterator[_State | None]:
        """`address`'s state for a block, None when it is not known (locally)."""
        if self._shared is None:
            yield self._addresses.get(address)
            return
        with self._state(address, self._clock()) as state:
            yield state

    def _forgive_quiet(self, state: _State, now: float) -> None:
        quiet = now - state.last_failure >= self.policy.max_s
        if state.failures and state.in_flight == 0 and quiet:
            state.failures = 0

    def _address(self, address: str, now: float) -> _Address:
        state = self._addresses.get(address)
        if state is None:
            state = _Address()
            self._remember_in(self._addresses, address, state, self.policy.max_tracked)
        else:
            self._addresses.move_to_end(address)
            self._forgive_quiet(state, now)
        return state

    def _take_token(self, key_id: str, now: float) -> bool:
        burst = float(self.policy.key_burst)
        bucket = self._keys.get(key_id)
        if bucket is None:
            bucket = _Bucket(burst, now)
            self._remember_in(self._keys, key_id, bucket, self.policy.max_tracked)
        else:
            self._keys.move_to_end(key_id)
            refill = self.policy.key_refill_s
            gained = (now - bucket.at) / refill if refill > 0 else burst
            bucket.tokens = min(burst, bucket.tokens + gained)
            bucket.at = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    @staticmethod
    def _remember_in(table: OrderedDict[str, V], name: str, value: V, limit: int) -> None:
        while len(table) >= limit:
            table.popitem(last=False)
        table[name] = value
