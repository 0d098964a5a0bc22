"""Fixtures of the fault tests: the proxy thread, a direct ZooKeeper session, a `FaultCluster`.

Teardown order matters: brokers must stop while their proxies still forward (a controlled
shutdown talks to the controller), so `fault_cluster` depends on `proxy_loop` first and on
`broker_factory` second — pytest tears dependencies down in reverse, brokers before proxies.
Fixtures run on pytest's main thread; the proxies run on their own thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from infra.fault_proxy import ProxyLoop
from tests.fault.harness import FaultCluster


@pytest.fixture
def proxy_loop() -> Iterator[ProxyLoop]:
    with ProxyLoop() as loop:
        yield loop


@pytest.fixture
def zk_session(chroot: str) -> Iterator[KazooClient]:
    client = KazooClient(hosts=chroot)
    client.start(10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def fault_cluster(
    proxy_loop: ProxyLoop, broker_factory: Any, chroot: str, zk_session: KazooClient
) -> Iterator[FaultCluster]:
    cluster = FaultCluster(proxy_loop, broker_factory, chroot, zk_session)
    try:
        yield cluster
    finally:
        for broker in cluster.brokers.values():  # let the brokers shut down cleanly
            broker.link.heal()
            broker.zk_link.heal()
