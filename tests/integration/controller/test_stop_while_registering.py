"""SIGTERM while a broker waits for its id's registration to go away stops it at once.

A broker restarted after a crash may wait up to twice its ZooKeeper session timeout for the dead
session's `/brokers/ids/<id>` to expire (registration.py). A launcher that stops it meanwhile
(infra/up's Ctrl-C, 30 s before SIGKILL) must not wait that out: the start-up is cancelled and the
broker exits 0 without a controlled shutdown it has nothing to move for.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from brokers.controller import zk_paths
from brokers.controller.state import BrokerEndpoint
from infra.broker import BrokerProcess, start_broker
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
NODE_ID = 7


@pytest.fixture
def holder(chroot: str) -> Iterator[KazooClient]:
    """A live session holding `/brokers/ids/7`, as a crashed broker's unexpired session does."""
    client = KazooClient(hosts=chroot)
    client.start(20)
    endpoint = BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9999)
    data = zk_paths.encode_broker(zk_paths.BrokerRegistration(NODE_ID, (endpoint,), None, 0))
    client.create(zk_paths.broker_path(NODE_ID), data, ephemeral=True, makepath=True)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def test_sigterm_during_the_registration_wait_stops_the_broker(
    tmp_path: Path, chroot: str, holder: KazooClient
) -> None:
    broker: BrokerProcess = start_broker(
        tmp_path / "data",
        node_id=NODE_ID,
        zookeeper=chroot,
        config={"zookeeper.session.timeout.ms": "30000"},  # a 60 s registration wait
        wait=0,
    )
    try:
        wait_until(
            lambda: "registration_waiting" in broker.log_path.read_text(),
            what="the broker waiting for the held registration",
        )
        broker.process.send_signal(signal.SIGTERM)
        status = broker.process.wait(timeout=20)  # a bound on a hang, not a timing claim
        log = broker.log_path.read_text()
        assert status == 0, f"exit {status}; log tail: {log[-2000:]}"
        assert "stopped_while_starting" in log
        assert holder.exists(zk_paths.broker_path(NODE_ID)), "the holder's registration is kept"
    finally:
        broker.kill()
