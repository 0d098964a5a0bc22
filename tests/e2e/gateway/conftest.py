"""Fixtures of the gateway's end-to-end tests: one broker + tenant store + gateway per module.

`gateway_stack` (module scope) is a `tests.gateway_stack.GatewayStack`; the gateway's and the
broker's log tails are attached to any failing test's report. Topic names come from `topic_name`
(tests/e2e/conftest.py), unique per test. Fixtures run on pytest's main thread.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import remember_log
from tests.gateway_stack import GatewayStack


@pytest.fixture(scope="module")
def gateway_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with GatewayStack(tmp_path_factory.mktemp("gateway-stack")) as stack:
        yield stack


@pytest.fixture(autouse=True)
def _attach_gateway_logs(request: pytest.FixtureRequest) -> None:
    if "gateway_stack" in request.fixturenames:
        stack: GatewayStack = request.getfixturevalue("gateway_stack")
        if stack.gateway is not None:
            remember_log(request.node, "gateway", stack.gateway.log_path)
        if stack.broker is not None:
            remember_log(request.node, "broker", stack.broker.log_path)
