"""A thin typed layer over kazoo: versioned reads/writes, ephemeral nodes, multi-ops, watches, session events.

Owns: the one ZooKeeper session of a broker and the translation of kazoo's exceptions into
`brokers.controller.errors`.

Concurrency contract: kazoo runs its own threads (connection, callbacks). Nothing here blocks the
event loop: every `async` method starts kazoo's `*_async` call and links its result with
`rawlink`; the link runs on kazoo's thread and hands the outcome to the loop with
`loop.call_soon_threadsafe`, where the awaiting future is settled. Watch callbacks and session
listeners are handed over the same way, so all user callbacks run on the event loop. The
`*_blocking` methods wait on kazoo's result in the caller's thread, for the few synchronous
interfaces (`BlockStore`); each costs one ZooKeeper round trip. One `ZkClient` per loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

from brokers.controller.errors import (
    ControllerError,
    ZNodeExistsError,
    ZNodeMissingError,
    ZNodeVersionError,
    ZooKeeperUnavailableError,
)

ANY_VERSION = -1
BLOCKING_TIMEOUT_S = 10.0


class SessionEvent(enum.Enum):
    CONNECTED = "connected"  # (re)connected, possibly with a new session after EXPIRED
    SUSPENDED = "suspended"  # connection lost; the session (and its ephemerals) may survive
    EXPIRED = "expired"  # session gone: its ephemeral znodes are deleted, watches are lost


@dataclass(frozen=True, slots=True)
class Versioned:
    """A znode's data with the stat fields the controller needs."""

    data: bytes
    version: int
    czxid: int
    ephemeral_owner: int


@dataclass(frozen=True, slots=True)
class CreateOp:
    path: str
    data: bytes
    ephemeral: bool = False


@dataclass(frozen=True, slots=True)
class SetOp:
    path: str
    data: bytes
    version: int


@dataclass(frozen=True, slots=True)
class CheckOp:
    path: str
    version: int


@dataclass(frozen=True, slots=True)
class DeleteOp:
    path: str
    version: int = ANY_VERSION


Op = CreateOp | SetOp | CheckOp | DeleteOp


def translate(exc: BaseException) -> BaseException:
    """kazoo's exception → our domain error (others pass through unchanged)."""
    if isinstance(exc, NodeExistsError):
        return ZNodeExistsError(str(exc) or "node exists")
    if isinstance(exc, NoNodeError):
        return ZNodeMissingError(str(exc) or "no node")
    if isinstance(exc, BadVersionError):
        return ZNodeVersionError(str(exc) or "bad version")
    if isinstance(
        exc, ConnectionLoss | SessionExpiredError | ConnectionClosedError | KazooTimeoutError
    ):
        return ZooKeeperUnavailableError(f"{type(exc).__name__}: {exc}")
    return exc


def _versioned(result: tuple[bytes | None, Any]) -> Versioned:
    data, stat = result
    return Versioned(data or b"", stat.version, stat.czxid, stat.ephemeralOwner)


class ZkClient:
    def __init__(self, connect: str, *, session_timeout_s: float = 6.0) -> None:
        """`connect` is `host:port[,host:port][/chroot]`; kazoo creates nothing until `start`."""
        self._kazoo = KazooClient(hosts=connect, timeout=session_timeout_s)
        self.session_timeout_s = session_timeout_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: list[Callable[[SessionEvent], None]] = []
        self._closing = False
        self._kazoo.add_listener(self._on_state)

    # --- lifecycle and session ---------------------------------------------------------------

    async def start(self, timeout_s: float = 10.0) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            await asyncio.to_thread(self._kazoo.start, timeout_s)
        except KazooTimeoutError as exc:
            raise ZooKeeperUnavailableError(f"no ZooKeeper session within {timeout_s}s") from exc

    async def close(self) -> None:
        """End the session (its ephemeral znodes vanish at once) and stop kazoo's threads."""
        self._closing = True
        await asyncio.to_thread(self._stop)

    def _stop(self) -> None:
        self._kazoo.stop()
        self._kazoo.close()

    @property
    def session_id(self) -> int:
        client_id = self._kazoo.client_id
        return int(client_id[0]) if client_id else 0

    @property
    def connected(self) -> bool:
        return bool(self._kazoo.connected)

    def add_session_listener(self, listener: Callable[[SessionEvent], None]) -> None:
        """`listener` runs on the event loop for each session state change."""
        self._listeners.append(listener)

    def _on_state(self, state: str) -> None:
        # kazoo's thread; must not block or call kazoo (its docs forbid it in listeners).
        event = {
            KazooState.CONNECTED: SessionEvent.CONNECTED,
            KazooState.SUSPENDED: SessionEvent.SUSPENDED,
            KazooState.LOST: SessionEvent.EXPIRED,
        }[state]
        if self._closing:
            return
        for listener in list(self._listeners):
            self._to_loop(listener, event)

    def _to_loop(self, callback: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed between the check and now
            loop.call_soon_threadsafe(callback, *args)

    def _watcher(self, callback: Callable[[str], None] | None) -> Callable[[Any], None] | None:
        if callback is None:
            return None
        return lambda event: self._to_loop(callback, event.path)

    # --- async operations ---------------------------------------------------------------------

    async def _await(self, pending: Any, convert: Callable[[Any], Any] = lambda r: r) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def settle(result: Any) -> None:
            if future.done():
                return
            try:
                future.set_result(convert(result.get_nowait()))
            except ControllerError as exc:
                future.set_exception(exc)
            except Exception as exc:
                future.set_exception(translate(exc))

        pending.rawlink(lambda result: self._to_loop(settle, result))
        return await future

    async def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequence: bool = False
    ) -> tuple[str, int]:
        """Create `path` (parents made as needed); returns the path made and its czxid."""
        pending = self._kazoo.create_async(
            path, data, ephemeral=ephemeral, sequence=sequence, makepath=True, include_data=True
        )
        made_path, stat = await self._await(pending)
        return str(made_path), int(stat.czxid)

    async def get(self, path: str, watch: Callable[[str], None] | None = None) -> Versioned:
        result: Versioned = await self._await(
            self._kazoo.get_async(path, self._watcher(watch)), _versioned
        )
        return result

    async def exists(self, path: str, watch: Callable[[str], None] | None = None) -> bool:
        """Whether `path` exists; the watch fires on its creation, deletion or change."""
        stat = await self._await(self._kazoo.exists_async(path, self._watcher(watch)))
        return stat is not None

    async def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> int:
        """Write `data` if the znode is at `version`; returns the new version."""
        stat = await self._await(self._kazoo.set_async(path, data, version))
        return int(stat.version)

    async def delete(self, path: str, version: int = ANY_VERSION) -> None:
        await self._await(self._kazoo.delete_async(path, version))

    async def children(self, path: str, watch: Callable[[str], None] | None = None) -> list[str]:
        names = await self._await(self._kazoo.get_children_async(path, self._watcher(watch)))
        return sorted(str(name) for name in names)

    async def ensure_path(self, path: str) -> None:
        await self._await(self._kazoo.ensure_path_async(path))

    async def multi(self, ops: Sequence[Op]) -> list[Any]:
        """All of `ops` atomically, or none: the first failing op's error is raised."""
        transaction = self._kazoo.transaction()
        for op in ops:
            if isinstance(op, CreateOp):
                transaction.create(op.path, op.data, ephemeral=op.ephemeral)
            elif isinstance(op, SetOp):
                transaction.set_data(op.path, op.data, op.version)
            elif isinstance(op, CheckOp):
                transaction.check(op.path, op.version)
            else:
                transaction.delete(op.path, op.version)
        results: list[Any] = await self._await(transaction.commit_async())
        failures = [r for r in results if isinstance(r, Exception)]
        real = [r for r in failures if not isinstance(r, RolledBackError)]
        if failures:
            raise translate(real[0] if real else failures[0])
        return results

    # --- blocking operations (caller's thread; never on the event loop's hot path) -------------

    def _wait(self, pending: Any) -> Any:
        try:
            return pending.get(timeout=BLOCKING_TIMEOUT_S)
        except Exception as exc:
            raise translate(exc) from exc

    def get_blocking(self, path: str) -> Versioned:
        return _versioned(self._wait(self._kazoo.get_async(path)))

    def set_blocking(self, path: str, data: bytes, version: int) -> int:
        return int(self._wait(self._kazoo.set_async(path, data, version)).version)

    def create_blocking(self, path: str, data: bytes, *, sequence: bool = False) -> str:
        """Create `path` (parents too); the created path (with its suffix when `sequence`)."""
        return str(
            self._wait(self._kazoo.create_async(path, data, makepath=True, sequence=sequence))
        )
