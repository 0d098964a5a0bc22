"""Shared test harness: tiers, the `slow` switch, and fixtures that start real Pier processes.

- `slow` tests are deselected unless `--run-slow` is given or `PIER_SLOW=1` is set.
- `broker` gives each test a fresh standalone broker (free port, its own tmp data dir), stopped after;
  `broker_factory` starts several, or with custom config, all stopped after the test.
- `zookeeper` is one real ZooKeeper for the whole session (it starts in well under a second, but a
  session's worth of tests only needs distinct chroots/paths, not distinct servers).
Every process goes through `infra.stack`, the launcher `infra/up` uses. When a test fails, the tail of
each log of a process it used is attached to its report, so CI failures are readable without the
machine. Fixtures run on pytest's main thread.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Generator, Iterator, Mapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from infra.probes import PORT_RANGE_ENV, listen_ports
from infra.process import log_tail
from infra.stack import BrokerProcess, ZooKeeperProcess, start_broker, start_zookeeper
from tests.polling import wait_until

# Property tests assert properties, not speed: hypothesis' default 200 ms deadline per example
# (and its too-slow health check) is a timing assertion that a busy CI machine fails at random
# (a first example that imports kio's schema modules, say).
settings.register_profile(
    "pier", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("pier")

_LOGS = pytest.StashKey[dict[str, Path]]()


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (`infra/test` runs two workers), each worker picks free ports from its
    own slice of the listen range, so two workers never hand out the same port."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or count < 2 or os.environ.get(PORT_RANGE_ENV):
        return
    low, high = listen_ports()
    width = (high - low + 1) // count
    start = low + int(worker[2:]) * width
    os.environ[PORT_RANGE_ENV] = f"{start}-{start + width - 1}"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-slow",
        action="store_true",
        default=False,
        help="also run tests marked slow (same as PIER_SLOW=1)",
    )


def slow_enabled(config: pytest.Config) -> bool:
    env = os.environ.get("PIER_SLOW", "").strip().lower()
    return bool(config.getoption("--run-slow")) or env in ("1", "true", "yes")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if slow_enabled(config):
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]


def remember_log(node: pytest.Item | pytest.Collector, name: str, path: Path) -> None:
    """Attach `path`'s tail to `node`'s report should the test fail."""
    node.stash.setdefault(_LOGS, {})[name] = path


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        saved = item.stash.get(_LOGS, {})
        logs = dict(saved)
        zookeeper = getattr(item, "funcargs", {}).get("zookeeper")
        if isinstance(zookeeper, ZooKeeperProcess):
            logs["zookeeper"] = zookeeper.log_path
        for name, path in logs.items():
            report.sections.append((f"{name} log tail ({path})", log_tail(path)))
    return report


class BrokerFactory:
    """Starts brokers for one test, each in its own tmp dir; `stop_all` stops them by PID."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory, node: pytest.Item) -> None:
        self._tmp = tmp_path_factory
        self._node = node
        self.started: list[BrokerProcess] = []

    def __call__(
        self,
        *,
        node_id: int = 0,
        config: Mapping[str, str] | None = None,
        zookeeper: str | None = None,
        port: int | None = None,
        metrics_port: int | None = None,
        wait: float = 30.0,
    ) -> BrokerProcess:
        data_dir = self._tmp.mktemp(f"broker{node_id}-") / "data"
        remember_log(self._node, f"broker {node_id}", data_dir.parent / f"broker-{node_id}.log")
        broker = start_broker(
            data_dir,
            port=port,
            node_id=node_id,
            config=config,
            metrics_port=metrics_port,
            zookeeper=zookeeper,
            wait=wait,
        )
        self.started.append(broker)
        return broker

    def stop_all(self) -> None:
        while self.started:
            self.started.pop().stop()


@pytest.fixture
def broker_factory(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[BrokerFactory]:
    factory = BrokerFactory(tmp_path_factory, request.node)
    try:
        yield factory
    finally:
        factory.stop_all()


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory()


@pytest.fixture
def chroot(zookeeper: ZooKeeperProcess) -> str:
    """`host:port/pier-test-<id>`: a fresh chroot, so tests share the server but not its znodes.

    A just-started ZooKeeper answers `ruok` a moment before it serves sessions (its log says
    "ZooKeeperServer not running"), so the first connection is retried within a deadline.
    """
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    path = f"/pier-test-{uuid.uuid4().hex[:12]}"

    def session() -> KazooClient:
        client = KazooClient(hosts=zookeeper.connect)
        try:
            client.start(5)
        except KazooTimeoutError:
            client.close()
            raise
        return client

    root = wait_until(
        session, what="a ZooKeeper session", timeout=30, retry_on=(KazooTimeoutError,)
    )
    root.ensure_path(path)
    root.stop()
    root.close()
    return f"{zookeeper.connect}{path}"


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    server = start_zookeeper(tmp_path_factory.mktemp("zookeeper"))
    try:
        yield server
    finally:
        server.stop()
