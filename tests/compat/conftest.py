"""Fixtures of the compatibility tier: Apache Kafka's own Java tools against a real Pier broker.

`reference_kafka` makes sure the kafka-tools jars are in their cache (`infra/reference/kafka
fetch`: Maven Central through mvn the first time, a checksum comparison after; infra/test fetches
before pytest so the download never counts against a test's time) and returns a runner for a tool
class. A missing mvn or network is a test error with the fetch's own message, never a skip: CI has
both, and a compatibility check that quietly does not run is no check. `module_broker` is one
standalone broker per test module (as in tests/e2e). Fixtures run on pytest's main thread.
"""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from infra.stack import BrokerProcess, start_broker
from tests.conftest import remember_log

REFERENCE = Path(__file__).resolve().parents[2] / "infra" / "reference" / "kafka"
FETCH_TIMEOUT_S = 600.0
TOOL_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ReferenceKafka:
    """Runs `infra/reference/kafka tool CLASS ARGS...` and returns the finished process."""

    def run(self, tool_class: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(REFERENCE), "tool", tool_class, *args],
            capture_output=True,
            text=True,
            timeout=TOOL_TIMEOUT_S,
            check=False,
        )


@pytest.fixture(scope="session")
def reference_kafka() -> ReferenceKafka:
    fetched = subprocess.run(
        [str(REFERENCE), "fetch"],
        capture_output=True,
        text=True,
        timeout=FETCH_TIMEOUT_S,
        check=False,
    )
    assert fetched.returncode == 0, f"infra/reference/kafka fetch failed:\n{fetched.stderr}"
    return ReferenceKafka()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("compat-broker") / "data"
    broker = start_broker(data_dir)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(autouse=True)
def _attach_broker_log(request: pytest.FixtureRequest) -> None:
    if "module_broker" in request.fixturenames:
        broker: BrokerProcess = request.getfixturevalue("module_broker")
        remember_log(request.node, "compat broker", broker.log_path)


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test (as tests/e2e names them)."""
    readable = re.sub(r"[^a-zA-Z0-9._-]", "-", request.node.name)[:150]
    return f"{readable}-{uuid.uuid4().hex[:8]}"
