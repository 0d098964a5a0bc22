"""`Session._logged_in` when the client leaves during it: the connection slot and the
`pier_gateway_connections` gauge are given back exactly once (never counted down below what was
counted up), and a broker connection that finishes opening after the client left is closed, not
kept. A client that logs in and hangs up at once, over and over, would otherwise leak one broker
connection each time, and one that finds no broker would drive the gauge negative."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from gateway.auth.authenticator import Authenticated
from gateway.kafka import session as session_module
from gateway.kafka.metrics import GatewayMetrics
from gateway.kafka.services import SessionServices
from gateway.kafka.session import Session
from gateway.kafka.upstream import Upstream
from tenancy.domain import Principal
from tests.unit.gateway.kafka.test_connection_limits import SilentChannel

pytestmark = pytest.mark.unit
TENANT = "acme"
CACHE_EPOCH = 7  # the verification cache's epoch now: a login that began before it may be stale
IDENTITY = Authenticated(Principal(TENANT, "sa-1", "key-1"), "PLAIN", None)


class QuietChannel(SilentChannel):
    def authenticated(self, tenant: str) -> None:
        pass


class Directory:
    def __init__(self) -> None:
        self.held = 0
        self.usable = True  # what the store says of the key when asked again
        self.asked: list[str] = []

    async def key_usable(self, key_id: str) -> bool:
        self.asked.append(key_id)
        return self.usable

    @contextlib.contextmanager
    def admitting(self, session: Session, principal: Principal) -> Iterator[None]:
        yield

    async def state(self, tenant_id: str) -> Any:
        return SimpleNamespace(tenant=SimpleNamespace(id=tenant_id, tenant_id=tenant_id))

    async def admit(self, session: Session, state: Any) -> str | None:
        self.held += 1
        return None

    def release(self, session: Session) -> None:
        self.held -= 1


class Throttling:
    async def load(self, tenant_id: str) -> None:
        return None


class Fleet:
    def __init__(self, address: tuple[str, int] | None) -> None:
        self.address = address

    def upstream_address(self, node_id: int) -> tuple[str, int] | None:
        return self.address


class FakeUpstream:
    def __init__(self) -> None:
        self.closed = False
        self.on_drained: Any = None

    def close(self) -> None:
        self.closed = True


def login_session(
    address: tuple[str, int] | None,
) -> tuple[Session, Directory, CollectorRegistry, list[Any]]:
    directory = Directory()
    opened: list[Any] = []
    services = SimpleNamespace(
        authenticator=SimpleNamespace(
            login_changed_since=lambda principal, epoch: epoch < CACHE_EPOCH
        ),
        directory=directory,
        throttling=Throttling(),
        fleet=Fleet(address),
        clock_ms=lambda: 0,
        max_reauth_ms=0,
        meter=SimpleNamespace(connection_opened=opened.append, connection_closed=opened.remove),
    )
    registry = CollectorRegistry()
    metrics = GatewayMetrics(registry)
    session = Session(
        cast(SessionServices, services),
        QuietChannel(),
        peer_host="127.0.0.1",
        node_id=0,
        metrics=metrics,
    )
    return session, directory, registry, opened


def connections(registry: CollectorRegistry) -> float:
    return registry.get_sample_value("pier_gateway_connections", {"tenant": TENANT}) or 0.0


@pytest.fixture(autouse=True)
def plain_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    identity = SimpleNamespace(usage_key=lambda topic: ("usage", topic))
    monkeypatch.setattr(
        session_module, "session_policy", lambda *args: SimpleNamespace(identity=identity)
    )


def test_a_client_gone_while_its_broker_connection_opens_leaks_neither_it_nor_a_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> None:
        session, directory, registry, opened = login_session(("127.0.0.1", 9))
        connecting = asyncio.Event()
        finish = asyncio.Event()
        upstream = FakeUpstream()

        async def slow_connect(host: str, port: int, lost: Any) -> FakeUpstream:
            connecting.set()
            await finish.wait()
            return upstream

        monkeypatch.setattr(Upstream, "connect", slow_connect)
        login = asyncio.create_task(session._logged_in(IDENTITY))
        await asyncio.wait_for(connecting.wait(), 5)
        assert directory.held == 1 and connections(registry) == 1
        session.close("client gone")
        assert directory.held == 0 and connections(registry) == 0
        finish.set()
        assert await asyncio.wait_for(login, 5) is not None
        assert upstream.closed, "the broker connection opened for a closed session was kept"
        assert session.upstream is None
        assert directory.held == 0 and connections(registry) == 0 and opened == []

    asyncio.run(scenario())


def test_a_login_that_finds_no_broker_counts_its_connection_down_once() -> None:
    async def scenario() -> None:
        session, directory, registry, opened = login_session(None)
        assert await session._logged_in(IDENTITY) == "broker unavailable"
        assert directory.held == 0 and connections(registry) == 0 and opened == []

    asyncio.run(scenario())


def test_a_login_counts_its_connection_until_the_session_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> None:
        session, directory, registry, opened = login_session(("127.0.0.1", 9))
        upstream = FakeUpstream()

        async def connect(host: str, port: int, lost: Any) -> FakeUpstream:
            return upstream

        monkeypatch.setattr(Upstream, "connect", connect)
        assert await session._logged_in(IDENTITY) is None
        assert cast(object, session.upstream) is upstream and not upstream.closed
        assert directory.held == 1 and connections(registry) == 1 and len(opened) == 1
        session.close("done")
        assert upstream.closed
        assert directory.held == 0 and connections(registry) == 0 and opened == []

    asyncio.run(scenario())


@pytest.mark.parametrize("usable", [False, True])
def test_a_key_changed_while_it_was_checked_is_read_again_before_the_login_is_admitted(
    usable: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        session, directory, registry, opened = login_session(("127.0.0.1", 9))
        directory.usable = usable

        async def connect(host: str, port: int, lost: Any) -> FakeUpstream:
            return FakeUpstream()

        monkeypatch.setattr(Upstream, "connect", connect)
        unchanged = await session._logged_in(IDENTITY, CACHE_EPOCH)  # nothing changed since
        assert unchanged is None and directory.asked == []
        session.close("next")
        session, directory, registry, opened = login_session(("127.0.0.1", 9))
        directory.usable = usable
        refused = await session._logged_in(IDENTITY, CACHE_EPOCH - 1)  # began before a change
        assert directory.asked == ["key-1"]
        if usable:
            assert refused is None and directory.held == 1
        else:
            assert refused == "api key revoked or expired"
            assert directory.held == 0 and connections(registry) == 0 and opened == []

    asyncio.run(scenario())
