"""Fixtures of the cluster tests: a fresh ZooKeeper chroot per test on the session's server."""

from __future__ import annotations

import time
import uuid

import pytest
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from infra.stack import ZooKeeperProcess


@pytest.fixture
def chroot(zookeeper: ZooKeeperProcess) -> str:
    """`host:port/pier-cluster-<id>`: tests share the server, never its znodes.

    A just-started ZooKeeper may refuse sessions for a moment, so connecting is retried.
    """
    path = f"/pier-cluster-{uuid.uuid4().hex[:12]}"
    deadline = time.monotonic() + 30
    while True:
        root = KazooClient(hosts=zookeeper.connect)
        try:
            root.start(5)
            break
        except KazooTimeoutError:
            root.close()
            assert time.monotonic() < deadline, "ZooKeeper never accepted a session"
    root.ensure_path(path)
    root.stop()
    root.close()
    return f"{zookeeper.connect}{path}"
