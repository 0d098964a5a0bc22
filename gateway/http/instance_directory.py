"""HTTP v2 consumer instances across gateways: which gateway holds a live instance, in ZooKeeper.

Owns: one ephemeral znode per live instance of this gateway process,
`/pier/http-instances/<digest>` (under the chroot of `zookeeper.connect`; the digest is a SHA-256
of tenant, service account, group and name: no tenant's names in ZooKeeper), whose data is
`<holder> <url>`: this process's gateway id and incarnation, and its gateway's HTTP URL (what a
sibling gateway proxies to). `claim` makes it when an instance is created (False: a live instance
of another gateway already has the name, so the create is 409), `release` removes it when the
instance closes, `lookup` says where an instance this gateway does not hold lives. A znode of a
dead process of this same gateway URL (a worker SIGKILLed and restarted: its session lingers for
the session timeout) is taken over. Since the key holds the service account, another account's
lookup finds nothing: it gets the 404 of a missing instance, as on the owner. After a session
expiry the znodes are made again (checked every `RESYNC_S`). ZooKeeper unreachable is not an
error: an instance is then known only to its own gateway (logged), as without ZooKeeper.

Concurrency: kazoo runs its own threads; each blocking kazoo call runs in a worker thread
(`asyncio.to_thread`); the held set is changed on the event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

log = logging.getLogger("pier.gateway.http.instances")
INSTANCES_PATH = "/pier/http-instances"
CONNECT_TIMEOUT_S = 10.0
RESYNC_S = 2.0
InstanceKey = tuple[str, str, str, str]  # tenant, service account, group, name
_FAILURES = (KazooException, KazooTimeoutError, OSError)


def znode_of(key: InstanceKey) -> str:
    digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:40]
    return f"{INSTANCES_PATH}/{digest}"


class InstanceDirectory:
    def __init__(self, connect: str, holder: str) -> None:
        self._zk = KazooClient(hosts=connect, timeout=CONNECT_TIMEOUT_S)
        self._holder = holder  # `<gateway id>/<incarnation>` of this process
        self.url = ""  # this gateway's HTTP URL, set once it listens
        self._held: dict[str, bytes] = {}
        self._session: object = None
        self._task: asyncio.Task[None] | None = None
        self._down_logged = False

    def start(self, url: str) -> None:
        self.url = url
        self._zk.start_async()
        self._task = asyncio.create_task(self._resync(), name="http-instance-directory")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with contextlib.suppress(*_FAILURES):
            self._zk.stop()
        self._zk.close()

    @property
    def _data(self) -> bytes:
        return f"{self._holder} {self.url}".encode()

    async def claim(self, key: InstanceKey) -> bool:
        """Record that this process holds `key`; False when another gateway's live instance has
        the name."""
        path = znode_of(key)
        try:
            taken = await asyncio.to_thread(self._claim, path)
        except _FAILURES as exc:
            self._unavailable(exc)
            self._held[path] = self._data  # made when ZooKeeper is back (_resync)
            return True
        if taken:
            self._held[path] = self._data
        return taken

    def _claim(self, path: str) -> bool:
        self._require_session()
        try:
            self._zk.create(path, self._data, ephemeral=True, makepath=True)
            return True
        except NodeExistsError:
            pass
        try:
            data, _stat = self._zk.get(path)
        except NoNodeError:
            return self._claim(path)
        holder, _, url = data.decode(errors="replace").partition(" ")
        if url != self.url:
            return False
        # The same gateway URL and another holder: a dead process of this gateway (the worker
        # that owns the name is the same worker, restarted). Take the name over.
        log.info("event=instance_taken_over previous=%s", holder)
        with contextlib.suppress(NoNodeError):
            self._zk.delete(path)
        return self._claim(path)

    async def release(self, key: InstanceKey) -> None:
        path = znode_of(key)
        if self._held.pop(path, None) is None:
            return
        try:
            await asyncio.to_thread(self._release, path)
        except _FAILURES as exc:
            self._unavailable(exc)

    def _release(self, path: str) -> None:
        self._require_session()
        with contextlib.suppress(NoNodeError):
            data, stat = self._zk.get(path)
            if data == self._data:
                self._zk.delete(path, version=stat.version)

    async def lookup(self, key: InstanceKey) -> str | None:
        """The HTTP URL of the gateway holding `key`, None when no gateway does (or ZooKeeper
        cannot say)."""
        try:
            data = await asyncio.to_thread(self._get, znode_of(key))
        except _FAILURES as exc:
            self._unavailable(exc)
            return None
        if data is None:
            return None
        _holder, _, url = data.decode(errors="replace").partition(" ")
        return url or None

    def _get(self, path: str) -> bytes | None:
        self._require_session()
        try:
            data, _stat = self._zk.get(path)
        except NoNodeError:
            return None
        return bytes(data)

    def _require_session(self) -> None:
        if not self._zk.connected:
            raise KazooTimeoutError("no ZooKeeper session")

    def _unavailable(self, exc: BaseException) -> None:
        if not self._down_logged:
            log.warning("event=instance_directory_unavailable error=%s", type(exc).__name__)
            self._down_logged = True

    async def _resync(self) -> None:
        """Make this process's znodes again after a new session (an expiry drops them)."""
        while True:
            await asyncio.sleep(RESYNC_S)
            session = self._zk.client_id if self._zk.connected else None
            if session is None or session == self._session:
                continue
            try:
                await asyncio.to_thread(self._remake, list(self._held))
            except _FAILURES as exc:
                self._unavailable(exc)
                continue
            self._session = session
            if self._down_logged:
                log.info("event=instance_directory_available held=%d", len(self._held))
                self._down_logged = False

    def _remake(self, paths: list[str]) -> None:
        for path in paths:
            with contextlib.suppress(NodeExistsError):
                self._zk.create(path, self._data, ephemeral=True, makepath=True)
