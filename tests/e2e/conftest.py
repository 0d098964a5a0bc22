"""Fixtures of the end-to-end tier: one broker shared by a test module, and fresh topic names.

`module_broker` starts one standalone broker (through `infra.stack.start_broker`, as every fixture
does) for all tests of a module, so the 20 client × codec round trips pay for one start-up; every
test still gets its own topic from `topic_name`, so tests never see each other's data. A test that
restarts or kills its broker uses the per-test `broker`/`broker_factory` fixtures from
`tests/conftest.py` instead. The shared broker's log tail is attached to any failing test's report.
`sentinel` is a raw connection opened before a hostile-input test starts. Fixtures run on
pytest's main thread.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

from infra.stack import BrokerProcess, start_broker
from tests.conftest import remember_log
from tests.e2e.raw_wire import RawConnection

# Retention runs every 200 ms so retention tests can poll for its effect instead of waiting minutes.
SHARED_BROKER_CONFIG = {"log.retention.check.interval.ms": "200"}


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("e2e-broker") / "data"
    broker = start_broker(data_dir, config=SHARED_BROKER_CONFIG)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(autouse=True)
def _attach_shared_broker_log(request: pytest.FixtureRequest) -> None:
    """When the test uses the shared broker, its log tail goes into the failure report."""
    if "module_broker" in request.fixturenames:
        broker: BrokerProcess = request.getfixturevalue("module_broker")
        remember_log(request.node, "shared broker", broker.log_path)


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test: its (sanitised) test id plus a random suffix."""
    readable = re.sub(r"[^a-zA-Z0-9._-]", "-", request.node.name)[:150]
    return f"{readable}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def sentinel(module_broker: BrokerProcess) -> Iterator[RawConnection]:
    """A raw connection to the shared broker opened before the test abuses it (ApiVersions works)."""
    with RawConnection(module_broker.host, module_broker.port) as connection:
        connection.api_versions()
        yield connection
