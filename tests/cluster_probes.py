"""Polling and probes shared by the tests that run several real brokers: `eventually` (poll with a
deadline instead of sleeping), `metadata_of` (a broker's view of the cluster through the internal
client) and `zk_read` (one znode through a short-lived kazoo session)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient

from brokers.client import ClientConfig
from brokers.client.admin import Admin
from brokers.client.metadata import ClusterMetadata
from infra.stack import BrokerProcess


def eventually(check: Callable[[], Any], timeout: float = 60.0) -> Any:
    """Poll `check` until it returns a truthy value without raising; return that value."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if result:
                return result
        except Exception:
            if time.monotonic() > deadline:
                raise
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)


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
