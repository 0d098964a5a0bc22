"""Probes shared by the tests that run several real brokers: `metadata_of` (a broker's view of the
cluster through the internal client), `zk_read` (one znode through a short-lived kazoo session),
`start_registered` (brokers started and seen by each other), and the exception types that mean
"not yet" while such a cluster settles, for
`tests.polling.wait_until(..., retry_on=...)`. Anything else a probe raises is a failure.
Blocking; any thread (each probe opens and closes its own client)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from brokers.client import ClientConfig
from brokers.client.admin import Admin
from brokers.client.errors import (
    BrokerConnectionError,
    BrokerResponseError,
    NoLeaderError,
    UnknownTopicError,
)
from brokers.client.metadata import ClusterMetadata
from infra.stack import BrokerProcess
from tests.polling import wait_until

SETTLE_S = 60.0  # how long a cluster gets to settle after a start, a kill or an election

# A broker not listening yet (or any more): starting, restarting, killed, or cut off.
BROKER_UNREACHABLE: tuple[type[Exception], ...] = (BrokerConnectionError,)
# A topic still being created or moved: not in the metadata yet, no leader yet, or its error code
# in the metadata (LEADER_NOT_AVAILABLE) or in an answer (NOT_LEADER_OR_FOLLOWER, NOT_CONTROLLER).
TOPIC_SETTLING: tuple[type[Exception], ...] = (
    UnknownTopicError,
    NoLeaderError,
    BrokerResponseError,
)
# A znode the controller (or a broker) has not written yet.
ZNODE_MISSING: tuple[type[Exception], ...] = (NoNodeError,)


def metadata_of(broker: BrokerProcess) -> ClusterMetadata:
    async def ask() -> ClusterMetadata:
        config = ClientConfig(request_timeout_s=5.0)
        async with Admin.for_bootstrap(broker.bootstrap, config) as admin:
            return await admin.describe_cluster()

    return asyncio.run(ask())


def zk_read(chroot: str, path: str) -> tuple[bytes, int]:
    client = KazooClient(hosts=chroot)
    client.start(10)
    try:
        data, stat = client.get(path)
        return data, stat.version
    finally:
        client.stop()
        client.close()


def start_registered(
    broker_factory: Callable[..., BrokerProcess],
    chroot: str,
    node_ids: Sequence[int],
    config: Mapping[str, str],
) -> dict[int, BrokerProcess]:
    """Start a broker per node id on `chroot` and wait until each lists them all."""
    brokers = {n: broker_factory(node_id=n, zookeeper=chroot, config=config) for n in node_ids}
    wait_until(
        lambda: all(sorted(metadata_of(b).brokers) == sorted(node_ids) for b in brokers.values()),
        what=f"brokers {sorted(node_ids)} registered",
        timeout=SETTLE_S,
    )
    return brokers
