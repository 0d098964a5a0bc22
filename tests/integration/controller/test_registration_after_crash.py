"""A broker restarted after `kill -9` registers once its predecessor's session is gone (issue 13).

The predecessor is a real process holding `/brokers/ids/<id>` in its own ZooKeeper session,
killed with SIGKILL: its session, and the ephemeral znode, outlive it until ZooKeeper expires the
session. A ZooKeeper restart in that window restores the session with its timeout renewed (the
"re-armed" registration of the issue), so `infra/up` run again failed every time with "broker id
N is registered by another live broker". The registrar now waits for the znode to vanish and
then registers; a live holder still makes it fail (test_zookeeper_controller.py).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.controller import zk_paths
from brokers.controller.registration import BrokerRegistrar
from brokers.controller.state import BrokerEndpoint
from brokers.controller.zk_client import ZkClient
from infra.stack import start_zookeeper

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
CLOCK = ManualClock()
# Long enough for the registrant to be killed and (test 2) ZooKeeper to restart inside it.
DEAD_SESSION_TIMEOUT_S = 8.0
STALE_WAIT_S = 40.0  # generous: the test is about waiting it out, not about how long

REGISTRANT = textwrap.dedent(
    """
    import sys, time
    from kazoo.client import KazooClient
    connect, path, data, timeout = sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3]), sys.argv[4]
    client = KazooClient(hosts=connect, timeout=float(timeout))
    client.start(20)
    client.create(path, data, ephemeral=True, makepath=True)
    print(client.client_id[0], flush=True)
    time.sleep(600)
    """
)


def registration(broker_id: int) -> zk_paths.BrokerRegistration:
    endpoint = BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id)
    return zk_paths.BrokerRegistration(broker_id, (endpoint,), None, 0)


@contextmanager
def registrant(connect: str, broker_id: int) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """A process registered as `broker_id` in its own session: (session id, process)."""
    data = zk_paths.encode_broker(registration(broker_id)).hex()
    argv = [sys.executable, "-c", REGISTRANT, connect, zk_paths.broker_path(broker_id), data]
    process = subprocess.Popen(
        [*argv, str(DEAD_SESSION_TIMEOUT_S)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.strip().isdigit(), f"the registrant did not register (exit {process.poll()})"
        yield int(line), process
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


async def register_after(connect: str, broker_id: int, dead_session: int) -> None:
    """Register `broker_id` while the dead session's znode is still there; check it is ours."""
    zk = ZkClient(connect)
    await zk.start()
    try:
        path = zk_paths.broker_path(broker_id)
        node = await zk.get(path)
        assert node.ephemeral_owner == dead_session, "the dead session's registration is gone"
        loop = asyncio.get_running_loop()
        started = loop.time()
        registrar = BrokerRegistrar(zk, registration(broker_id), CLOCK, stale_wait_s=STALE_WAIT_S)
        epoch = await registrar.register()
        waited = loop.time() - started
        node = await zk.get(path)
        assert node.ephemeral_owner == zk.session_id, f"not ours after waiting {waited:.1f}s"
        assert node.czxid == epoch == registrar.epoch
        print(f"registered after waiting {waited:.1f}s for session 0x{dead_session:x} to expire")
    finally:
        await zk.close()


def test_a_killed_predecessors_registration_is_waited_out(chroot: str) -> None:
    with registrant(chroot, 7) as (session, process):
        process.kill()
        process.wait()
        asyncio.run(register_after(chroot, 7, session))


def test_a_registration_re_armed_by_a_zookeeper_restart_is_waited_out(tmp_path: Path) -> None:
    server = start_zookeeper(tmp_path / "zookeeper")
    try:
        with registrant(server.connect, 5) as (session, process):
            process.kill()
            process.wait()
            # ZooKeeper stops inside the dead session's timeout and comes back on the same data.
            assert server.stop() in (0, 143)
            server = start_zookeeper(tmp_path / "zookeeper", port=server.port)
            asyncio.run(register_after(server.connect, 5, session))
    finally:
        server.stop()
