"""`Authenticator` against an in-memory credential store: PLAIN and SCRAM logins, the uniform
failure (counted, logged without secrets, delayed through the injected sleep), and lifetimes."""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry

from gateway.auth import (
    FAILED_MESSAGE,
    MECHANISMS,
    AuthenticationFailed,
    Authenticator,
    AuthMetrics,
    SaslStep,
    UnsupportedMechanismError,
)
from gateway.auth.backoff import BackoffPolicy, LoginBackoff
from gateway.auth.hashing import HashingPool
from tenancy.authentication import KeyLogin, PlainVerifier, ScramLogin
from tenancy.credentials import hash_secret
from tenancy.domain import Principal
from tenancy.scram import make_credential
from tests.unit.gateway.auth.scram_client import ScramClient

pytestmark = pytest.mark.unit
KEY, SECRET = "KEYID00000000001", "correcthorsebatterystaple"
PRINCIPAL = Principal("acme", "sa-1", KEY)
NOW_MS = 1_700_000_000_000
EXPIRES = datetime.fromtimestamp((NOW_MS + 60_000) / 1000, UTC)
SECRET_HASH = hash_secret(SECRET)


@dataclass
class FakeStore:
    expires_at: datetime | None = EXPIRES
    error: Exception | None = None
    uses: list[str] = field(default_factory=list)
    cache: dict[tuple[str, str], KeyLogin] = field(default_factory=dict)
    reads: int = 0
    changed: bool = False  # remember_plain reports a change during the check, always
    stale_remembers: int = 0  # ... this many times
    revoked_on_reread: bool = False  # plain_verifier reads after the first find the key revoked

    def _usable(self, key_id: str) -> bool:
        if self.error is not None:
            raise self.error
        return key_id == KEY

    def _login(self) -> KeyLogin:
        return KeyLogin(PRINCIPAL, self.expires_at)

    def cached_plain(self, key_id: str, secret: str) -> KeyLogin | None:
        return self.cache.get((key_id, secret))

    def has_verified_secret(self, key_id: str) -> bool:
        return any(cached == key_id for cached, _secret in self.cache)

    def plain_verifier(self, key_id: str) -> PlainVerifier | None:
        self.reads += 1
        if not self._usable(key_id) or (self.revoked_on_reread and self.reads > 1):
            return None
        return PlainVerifier(self._login(), SECRET_HASH, 0)

    def remember_plain(self, verifier: PlainVerifier, secret: str) -> bool:
        if self.changed or self.stale_remembers > 0 or self.revoked_on_reread:
            self.stale_remembers -= 1
            return False
        self.cache[(verifier.login.principal.key_id, secret)] = verifier.login
        return True

    def cached_scram(self, key_id: str, mechanism: str) -> ScramLogin | None:
        return None

    def scram_login(self, key_id: str, mechanism: str) -> ScramLogin | None:
        self.reads += 1
        if not self._usable(key_id):
            return None
        return ScramLogin(self._login(), make_credential(mechanism, SECRET, iterations=4096))

    def record_key_use(self, key_id: str) -> None:
        self.uses.append(key_id)


class Harness:
    def __init__(self, store: FakeStore, now_ms: int = NOW_MS) -> None:
        self.store = store
        self.now_ms = now_ms
        self.sleeps: list[float] = []
        self.registry = CollectorRegistry()
        self.authenticator = Authenticator(
            store,
            failure_delay_s=0.5,
            sleep=self.sleep,
            metrics=AuthMetrics(self.registry),
            clock_ms=lambda: self.now_ms,
        )

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def count(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0


def plain(harness: Harness, token: bytes) -> SaslStep:
    return asyncio.run(harness.authenticator.exchange("PLAIN").evaluate(token))


def scram(harness: Harness, mechanism: str, user: str = KEY, **final: str) -> SaslStep:
    async def run() -> SaslStep:
        exchange = harness.authenticator.exchange(mechanism)
        client = ScramClient(mechanism, user, SECRET)
        first = await exchange.evaluate(client.first())
        assert first.authenticated is None
        step = await exchange.evaluate(client.final(first.challenge, **final))
        assert client.server_verified(step.challenge)
        return step

    return asyncio.run(run())


def test_plain_logs_in_with_the_key_expiry() -> None:
    harness = Harness(FakeStore())
    step = plain(harness, f"\0{KEY}\0{SECRET}".encode())
    assert step.challenge == b""
    assert step.authenticated is not None
    assert step.authenticated.principal == PRINCIPAL
    assert step.authenticated.mechanism == "PLAIN"
    assert step.authenticated.key_expires_at_ms == NOW_MS + 60_000
    assert harness.store.uses == [KEY]
    labels = {"mechanism": "PLAIN", "tenant": "acme"}
    assert harness.count("pier_gateway_authentications_total", **labels) == 1
    assert harness.sleeps == []


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_logs_in_and_records_the_key_use(mechanism: str) -> None:
    harness = Harness(FakeStore(expires_at=None))
    step = scram(harness, mechanism)
    assert step.authenticated is not None
    assert (step.authenticated.principal, step.authenticated.mechanism) == (PRINCIPAL, mechanism)
    assert step.authenticated.key_expires_at_ms is None
    assert harness.store.uses == [KEY]
    labels = {"mechanism": mechanism, "tenant": "acme"}
    assert harness.count("pier_gateway_authentications_total", **labels) == 1


def test_mechanisms_and_unsupported_ones() -> None:
    authenticator = Harness(FakeStore()).authenticator
    assert authenticator.mechanisms == MECHANISMS == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    for name in ("GSSAPI", "OAUTHBEARER", "plain", "SCRAM-SHA-1"):
        with pytest.raises(UnsupportedMechanismError):
            authenticator.exchange(name)


def failing_plain(token: bytes, store: FakeStore | None = None, now_ms: int = NOW_MS) -> Harness:
    harness = Harness(store or FakeStore(), now_ms)
    with pytest.raises(AuthenticationFailed) as failed:
        plain(harness, token)
    assert str(failed.value) == FAILED_MESSAGE
    return harness


@pytest.mark.parametrize(
    ("token", "store", "now_ms", "reason"),
    [
        (f"\0{KEY}\0wrong".encode(), None, NOW_MS, "credentials_rejected"),
        (f"\0KEYID00000000002\0{SECRET}".encode(), None, NOW_MS, "credentials_rejected"),
        (b"garbage", None, NOW_MS, "not_three_fields"),
        (f"\0{KEY}\0{SECRET}".encode(), FakeStore(error=OSError("db")), NOW_MS, "store_error"),
        (f"\0{KEY}\0{SECRET}".encode(), None, NOW_MS + 60_000, "key_expired"),
    ],
)
def test_every_plain_failure_is_uniform_counted_logged_and_delayed(
    token: bytes,
    store: FakeStore | None,
    now_ms: int,
    reason: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="gateway.auth"):
        harness = failing_plain(token, store, now_ms)
    assert harness.sleeps == [0.5]
    assert harness.count("pier_gateway_authentication_failures_total", mechanism="PLAIN") == 1
    assert (
        harness.count("pier_gateway_authentications_total", mechanism="PLAIN", tenant="acme") == 0
    )
    [record] = caplog.records
    assert record.levelno == logging.INFO
    assert record.getMessage().startswith("event=sasl_failed mechanism=PLAIN key_id=")
    assert f"reason={reason}" in record.getMessage()
    assert SECRET not in caplog.text


@pytest.mark.parametrize(
    ("mechanism", "user", "final", "store", "reason"),
    [
        ("SCRAM-SHA-256", KEY, {"secret": "wrong"}, FakeStore(), "wrong_proof"),
        ("SCRAM-SHA-512", KEY, {"secret": "wrong"}, FakeStore(), "wrong_proof"),
        ("SCRAM-SHA-256", "KEYID00000000002", {}, FakeStore(), "credentials_rejected"),
        ("SCRAM-SHA-256", KEY, {}, FakeStore(error=OSError("db")), "store_error:OSError"),
        ("SCRAM-SHA-256", KEY, {"nonce": "fyko"}, FakeStore(), "nonce_mismatch"),
    ],
)
def test_every_scram_failure_comes_at_the_proof_and_is_uniform(
    mechanism: str,
    user: str,
    final: dict[str, str],
    store: FakeStore,
    reason: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    harness = Harness(store)
    with (
        caplog.at_level(logging.INFO, logger="gateway.auth"),
        pytest.raises(AuthenticationFailed) as failed,
    ):
        scram(harness, mechanism, user, **final)
    assert str(failed.value) == FAILED_MESSAGE
    assert harness.sleeps == [0.5]
    assert harness.count("pier_gateway_authentication_failures_total", mechanism=mechanism) == 1
    assert harness.store.uses == []
    [record] = caplog.records
    assert record.getMessage() == (
        f"event=sasl_failed mechanism={mechanism} key_id={user} reason={reason}"
    )


def test_a_scram_key_expired_by_the_gateway_clock_fails() -> None:
    harness = Harness(FakeStore(), now_ms=NOW_MS + 60_001)
    with pytest.raises(AuthenticationFailed):
        scram(harness, "SCRAM-SHA-256")
    assert harness.store.uses == []


def test_a_failed_exchange_stays_failed_and_is_counted_once() -> None:
    harness = Harness(FakeStore())

    async def run() -> None:
        exchange = harness.authenticator.exchange("SCRAM-SHA-256")
        with pytest.raises(AuthenticationFailed):
            await exchange.evaluate(b"p=tls-unique,,n=KEY,r=abc")
        client = ScramClient("SCRAM-SHA-256", KEY, SECRET)
        with pytest.raises(AuthenticationFailed):
            await exchange.evaluate(client.first())

    asyncio.run(run())
    assert harness.sleeps == [0.5]
    labels = {"mechanism": "SCRAM-SHA-256"}
    assert harness.count("pier_gateway_authentication_failures_total", **labels) == 1


def test_a_token_after_completion_fails() -> None:
    harness = Harness(FakeStore())

    async def run() -> None:
        exchange = harness.authenticator.exchange("PLAIN")
        await exchange.evaluate(f"\0{KEY}\0{SECRET}".encode())
        with pytest.raises(AuthenticationFailed):
            await exchange.evaluate(f"\0{KEY}\0{SECRET}".encode())

    asyncio.run(run())
    assert harness.sleeps == [0.5]


def test_a_secret_typed_as_the_username_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="gateway.auth"):
        failing_plain(f"\0{SECRET}\0{SECRET}".encode())
    assert "key_id=<malformed>" in caplog.text
    assert SECRET not in caplog.text


def test_a_failed_key_use_write_does_not_fail_the_login() -> None:
    class Flaky(FakeStore):
        def record_key_use(self, key_id: str) -> None:
            raise OSError("database is locked")

    assert scram(Harness(Flaky()), "SCRAM-SHA-256").authenticated is not None


# -- the order of a check: cache, backoff, store read, bounded hashing ---------------------------
def plain_from(harness: Harness, peer: str, secret: str) -> bool:
    async def run() -> bool:
        exchange = harness.authenticator.exchange("PLAIN", peer)
        try:
            await exchange.evaluate(f"\0{KEY}\0{secret}".encode())
        except AuthenticationFailed:
            return False
        return True

    return asyncio.run(run())


def throttling_harness(store: FakeStore | None = None) -> Harness:
    harness = Harness(store or FakeStore())
    harness.authenticator.backoff = LoginBackoff(BackoffPolicy(free_failures=2, initial_s=60))
    return harness


def test_wrong_secrets_back_off_without_a_store_read_or_a_hash(
    caplog: pytest.LogCaptureFixture,
) -> None:
    harness = throttling_harness()
    with caplog.at_level(logging.INFO, logger="gateway.auth"):
        assert [plain_from(harness, "10.0.0.1", "wrong") for _ in range(6)] == [False] * 6
    assert harness.store.reads == 2  # the two free failures; the other four were refused unread
    assert harness.count("pier_gateway_secret_checks_total", outcome="mismatch") == 2
    assert harness.count("pier_gateway_authentication_throttled_total", mechanism="PLAIN") == 4
    assert harness.count("pier_gateway_authentication_failures_total", mechanism="PLAIN") == 6
    assert harness.sleeps == [0.5] * 6  # a refused attempt looks and waits like any failure
    assert caplog.text.count("reason=throttled") == 1  # unchecked failures: a line a second


def test_unchecked_failures_are_logged_once_a_second_with_the_count_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    harness = throttling_harness()
    with caplog.at_level(logging.INFO, logger="gateway.auth"):
        for _ in range(7):
            plain_from(harness, "10.0.0.1", "wrong")  # 2 checked, then 5 throttled
        harness.now_ms += 1000
        plain_from(harness, "10.0.0.1", "wrong")
    lines = [r.getMessage() for r in caplog.records if "reason=throttled" in r.getMessage()]
    assert len(lines) == 2
    assert lines[1].endswith("reason=throttled suppressed=4")
    assert caplog.text.count("reason=credentials_rejected") == 2, "checked failures: each"


def test_the_owner_on_another_address_is_not_throttled() -> None:
    harness = throttling_harness()
    for _ in range(4):
        plain_from(harness, "10.0.0.1", "wrong")
    assert plain_from(harness, "192.0.2.7", SECRET), "a cold owner from its own address"


def test_a_cached_secret_is_accepted_before_any_throttling() -> None:
    harness = throttling_harness()
    assert plain_from(harness, "10.0.0.1", SECRET)  # verified once: cached
    for _ in range(4):
        plain_from(harness, "10.0.0.1", "wrong")
    reads = harness.store.reads
    assert plain_from(harness, "10.0.0.1", SECRET), "the owner behind the attacker's address"
    assert harness.store.reads == reads, "no store read, no hash for a cached secret"
    assert harness.count("pier_gateway_authentication_cache_hits_total", mechanism="PLAIN") == 1


def test_no_hashing_capacity_fails_the_attempt_without_counting_it_against_the_address(
    caplog: pytest.LogCaptureFixture,
) -> None:
    harness = throttling_harness()

    async def run() -> None:
        pool = HashingPool(threads=1, queue_size=0, max_wait_s=1)
        harness.authenticator.hashing = pool
        blocker = threading.Event()
        hold = asyncio.create_task(pool.run(lambda: blocker.wait(5)))
        await asyncio.sleep(0.01)
        for _ in range(3):
            exchange = harness.authenticator.exchange("PLAIN", "10.0.0.1")
            with pytest.raises(AuthenticationFailed):
                await exchange.evaluate(f"\0{KEY}\0{SECRET}".encode())
        blocker.set()
        await hold
        pool.close()

    with caplog.at_level(logging.INFO, logger="gateway.auth"):
        asyncio.run(run())
    assert caplog.text.count("reason=hashing_busy") == 3
    assert harness.count("pier_gateway_secret_checks_total", outcome="busy") == 3
    assert harness.authenticator.backoff.wait_s("10.0.0.1") == 0.0
    harness.authenticator.hashing = HashingPool()
    assert plain_from(harness, "10.0.0.1", SECRET)


def test_a_key_changed_during_the_check_is_re_read_before_it_counts() -> None:
    harness = Harness(FakeStore(stale_remembers=1))
    assert plain_from(harness, "10.0.0.1", SECRET), "a change that left the key usable"
    assert harness.store.reads == 2
    revoked = Harness(FakeStore(revoked_on_reread=True))
    assert not plain_from(revoked, "10.0.0.1", SECRET), "the change was the key's revocation"
    assert revoked.store.cache == {}
    churning = Harness(FakeStore(changed=True))
    assert not plain_from(churning, "10.0.0.1", SECRET)
    assert churning.store.cache == {} and churning.store.reads == 4


def test_wrong_scram_proofs_count_against_the_address() -> None:
    harness = throttling_harness()

    async def attempt(secret: str) -> bool:
        exchange = harness.authenticator.exchange("SCRAM-SHA-256", "10.0.0.1")
        client = ScramClient("SCRAM-SHA-256", KEY, secret)
        try:
            first = await exchange.evaluate(client.first())
            await exchange.evaluate(client.final(first.challenge))
        except AuthenticationFailed:
            return False
        return True

    assert [asyncio.run(attempt("wrong")) for _ in range(4)] == [False] * 4
    assert harness.store.reads == 2, "the credential read is refused once the address backs off"
    assert harness.count("pier_gateway_authentication_throttled_total", mechanism="SCRAM-SHA-256")


def test_once_a_secret_is_verified_other_secrets_for_the_key_fail_unchecked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    harness = throttling_harness()
    assert plain_from(harness, "192.0.2.7", SECRET)
    reads = harness.store.reads
    with caplog.at_level(logging.INFO, logger="gateway.auth"):
        assert not plain_from(harness, "10.0.0.9", "wrong")  # a clean address, too
    assert harness.store.reads == reads, "no store read, no scrypt for a known-wrong secret"
    assert harness.count("pier_gateway_secret_checks_total", outcome="mismatch") == 0
    assert "reason=secret_differs_from_verified" in caplog.text
    assert harness.authenticator.backoff.wait_s("10.0.0.9") == 0.0  # 1 failure of 2 free
    assert not plain_from(harness, "10.0.0.9", "wrong")
    assert harness.authenticator.backoff.wait_s("10.0.0.9") > 0, "they count against the address"


def test_a_pool_logging_in_together_with_one_key_shares_one_check() -> None:
    harness = throttling_harness()  # two checks under way from one address would be throttled

    async def run() -> list[bool]:
        async def login(secret: str) -> bool:
            exchange = harness.authenticator.exchange("PLAIN", "10.0.0.1")
            try:
                await exchange.evaluate(f"\0{KEY}\0{secret}".encode())
            except AuthenticationFailed:
                return False
            return True

        return await asyncio.gather(*(login(SECRET) for _ in range(20)))

    assert asyncio.run(run()) == [True] * 20
    assert harness.store.reads == 1, "one store read and one scrypt for the twenty"
    assert harness.count("pier_gateway_secret_checks_total", outcome="match") == 1
    assert harness.count("pier_gateway_authentication_throttled_total", mechanism="PLAIN") == 0


def test_the_same_wrong_secret_sent_together_is_checked_once_and_fails_every_login() -> None:
    harness = throttling_harness()

    async def run() -> list[bool]:
        async def login() -> bool:
            exchange = harness.authenticator.exchange("PLAIN", "10.0.0.1")
            try:
                await exchange.evaluate(f"\0{KEY}\0wrong".encode())
            except AuthenticationFailed:
                return False
            return True

        return await asyncio.gather(*(login() for _ in range(8)))

    assert asyncio.run(run()) == [False] * 8
    assert harness.count("pier_gateway_secret_checks_total", outcome="mismatch") == 1
    assert harness.count("pier_gateway_authentication_failures_total", mechanism="PLAIN") == 8


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_pool_logging_in_together_with_scram_shares_one_store_read(mechanism: str) -> None:
    harness = throttling_harness()

    async def run() -> list[bool]:
        async def login() -> bool:
            exchange = harness.authenticator.exchange(mechanism, "10.0.0.1")
            client = ScramClient(mechanism, KEY, SECRET)
            first = await exchange.evaluate(client.first())
            step = await exchange.evaluate(client.final(first.challenge))
            return step.authenticated is not None

        return await asyncio.gather(*(login() for _ in range(12)))

    assert asyncio.run(run()) == [True] * 12
    assert harness.store.reads == 1
