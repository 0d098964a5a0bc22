"""`Authenticator` against an in-memory credential store: PLAIN and SCRAM logins, the uniform
failure (counted, logged without secrets, delayed through the injected sleep), and lifetimes."""

from __future__ import annotations

import asyncio
import logging
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
from tenancy.domain import ApiKey, Principal, ScramCredential
from tenancy.scram import make_credential
from tests.unit.gateway.auth.scram_client import ScramClient

pytestmark = pytest.mark.unit
KEY, SECRET = "KEYID00000000001", "correcthorsebatterystaple"
PRINCIPAL = Principal("acme", "sa-1", KEY)
NOW_MS = 1_700_000_000_000
EXPIRES = datetime.fromtimestamp((NOW_MS + 60_000) / 1000, UTC)


@dataclass
class FakeStore:
    expires_at: datetime | None = EXPIRES
    error: Exception | None = None
    uses: list[str] = field(default_factory=list)

    def _usable(self, key_id: str) -> bool:
        if self.error is not None:
            raise self.error
        return key_id == KEY

    def verify_api_key(self, key_id: str, secret: str) -> Principal | None:
        return PRINCIPAL if self._usable(key_id) and secret == SECRET else None

    def scram_credential(
        self, key_id: str, mechanism: str
    ) -> tuple[Principal, ScramCredential] | None:
        if not self._usable(key_id):
            return None
        return PRINCIPAL, make_credential(mechanism, SECRET, iterations=4096)

    def record_key_use(self, key_id: str) -> None:
        self.uses.append(key_id)

    def get_api_key(self, key_id: str) -> ApiKey:
        created = datetime(2024, 1, 1, tzinfo=UTC)
        return ApiKey(key_id, "acme", "sa-1", "", created, self.expires_at, None, None)


class Harness:
    def __init__(self, store: FakeStore, now_ms: int = NOW_MS) -> None:
        self.store = store
        self.sleeps: list[float] = []
        self.registry = CollectorRegistry()
        self.authenticator = Authenticator(
            store,
            failure_delay_s=0.5,
            sleep=self.sleep,
            metrics=AuthMetrics(self.registry),
            clock_ms=lambda: now_ms,
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
    assert harness.store.uses == []  # verify_api_key records the use itself
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
