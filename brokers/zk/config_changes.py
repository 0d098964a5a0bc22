"""Config change notifications in ZooKeeper mode (Kafka's `ZkNodeChangeNotificationListener` on
`/config/changes`, with the version-2 `ConfigChangeNotification` format).

Owns: the notification codec — sequential znodes `/config/changes/config_change_NNNNNNNNNN`
holding `{"version":2,"entity_path":"topics/<t>"}` —, `notify_topic_change` (written by the
topic admin after `/config/topics/<t>`), and `ConfigChangeListener`, which every broker runs: a
children watch on `/config/changes` wakes it; it handles each notification whose sequence number
is above the last one it handled by awaiting `on_topic_change(topic)` once per topic they name,
in the order of each topic's first notification (the caller re-reads the topic's config, so one
read serves all of a round's notices of it; entity types other than topics are skipped, as Pier
has no dynamic client/user/broker configs yet). Notifications present at `start` are history: the caller loads
the current configs itself. Handled notifications older than `expiration_ms` are deleted; Kafka
uses 15 minutes measured from the znode's ctime, we measure from when this broker first saw the
notification (an injected clock), which only delays a purge. After a session expiry the watch is
re-armed and the backlog handled. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable

from brokers.common.clock import Clock
from brokers.controller import zk_paths
from brokers.controller.errors import ControllerError, ZNodeFormatError, ZNodeMissingError
from brokers.controller.zk_client import SessionEvent, ZkClient

log = logging.getLogger("pier.config_changes")
CONFIG_CHANGES = "/config/changes"
CHANGE_PREFIX = "config_change_"
TOPICS_ENTITY = "topics"
CHANGE_PATH_PREFIX = f"{CONFIG_CHANGES}/{CHANGE_PREFIX}"
DEFAULT_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's DefaultChangeExpirationMs
EXPIRATION_PROPERTY = "config.changes.expiration.ms"


def encode_change(entity_type: str, entity_name: str) -> bytes:
    body = {"version": 2, "entity_path": f"{entity_type}/{entity_name}"}
    return json.dumps(body, separators=(",", ":")).encode()


def decode_change(data: bytes | None) -> tuple[str, str]:
    """(entity type, entity name) of a version-2 notification; ZNodeFormatError otherwise."""
    try:
        value = json.loads(data or b"")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ZNodeFormatError(f"not JSON: {data!r:.80}") from exc
    if not isinstance(value, dict) or value.get("version") != 2:
        raise ZNodeFormatError(f"not a version 2 config change: {data!r:.80}")
    path = value.get("entity_path")
    if not isinstance(path, str) or "/" not in path:
        raise ZNodeFormatError(f"bad entity_path {path!r:.80}")
    entity_type, entity_name = path.split("/", 1)
    return entity_type, entity_name


def sequence_of(name: str) -> int | None:
    """The sequence number of a notification znode name; None if it is not one."""
    digits = name.removeprefix(CHANGE_PREFIX)
    return int(digits) if digits != name and digits.isdigit() else None


async def notify_topic_change(zk: ZkClient, topic: str) -> str:
    """Announce that `/config/topics/<topic>` changed; returns the notification's path."""
    path, _ = await zk.create(CHANGE_PATH_PREFIX, topic_change(topic), sequence=True)
    return path


def notify_topic_change_blocking(zk: ZkClient, topic: str) -> str:
    """The same from a synchronous handler: the change is announced before the client's answer,
    as Kafka's AdminZkClient does, so a failure is reported rather than lost."""
    return zk.create_blocking(CHANGE_PATH_PREFIX, topic_change(topic), sequence=True)


def topic_change(topic: str) -> bytes:
    return encode_change(TOPICS_ENTITY, zk_paths.check_topic(topic))


class ConfigChangeListener:
    def __init__(
        self,
        zk: ZkClient,
        clock: Clock,
        on_topic_change: Callable[[str], Awaitable[None]],
        *,
        expiration_ms: int = DEFAULT_EXPIRATION_MS,
    ) -> None:
        self._zk = zk
        self._clock = clock
        self._on_topic_change = on_topic_change
        self._expiration_ms = expiration_ms
        self._last_handled = -1
        self._first_seen: dict[str, int] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def last_handled(self) -> int:
        return self._last_handled

    async def start(self) -> None:
        """Arm the watch; what is there now counts as handled."""
        await self._zk.ensure_path(CONFIG_CHANGES)
        names = await self._zk.children(CONFIG_CHANGES, self._changed)
        self._last_handled = max(
            (s for n in names if (s := sequence_of(n)) is not None), default=-1
        )
        self._remember(names)
        self._zk.add_session_listener(self._on_session)
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _changed(self, _path: str) -> None:
        self._wakeup.set()

    def _on_session(self, event: SessionEvent) -> None:
        if event is SessionEvent.CONNECTED:  # watches may be gone with an expired session
            self._wakeup.set()

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                await self.process()
            except ControllerError as exc:  # ZooKeeper unreachable: retried on reconnection
                log.warning("event=config_changes_failed error=%s", exc)
            except Exception as exc:  # one bad notification must not stop the listener
                log.error("event=config_changes_failed error=%r", exc)

    async def process(self) -> None:
        """Handle new notifications (re-arming the watch): each topic they name is re-read once,
        in the order of its first notification (a topic changed many times since the last round
        costs one read and one apply); then purge. A failure leaves the round to be handled
        again (re-reading a topic is idempotent)."""
        names = await self._zk.children(CONFIG_CHANGES, self._changed)
        self._remember(names)
        pending = sorted(
            (s, n) for n in names if (s := sequence_of(n)) is not None and s > self._last_handled
        )
        topics: dict[str, None] = {}  # ordered: first notified first
        for _sequence, name in pending:
            topic = await self._topic_of(name)
            if topic is not None:
                topics[topic] = None
        for topic in topics:
            await self._on_topic_change(topic)
        if pending:
            self._last_handled = pending[-1][0]
        await self._purge(names)

    async def _topic_of(self, name: str) -> str | None:
        """The topic a notification names; None for another entity type or a bad notice."""
        try:
            node = await self._zk.get(f"{CONFIG_CHANGES}/{name}")
            entity_type, entity_name = decode_change(node.data)
        except (ZNodeMissingError, ZNodeFormatError) as exc:
            log.warning("event=config_change_skipped name=%s error=%s", name, exc)
            return None
        return entity_name if entity_type == TOPICS_ENTITY else None

    def _remember(self, names: list[str]) -> None:
        now = self._clock.time_ms()
        self._first_seen = {n: self._first_seen.get(n, now) for n in names}

    async def _purge(self, names: list[str]) -> None:
        now = self._clock.time_ms()
        for name in names:
            sequence = sequence_of(name)
            expired = now - self._first_seen.get(name, now) >= self._expiration_ms
            if sequence is not None and sequence <= self._last_handled and expired:
                with contextlib.suppress(ZNodeMissingError):
                    await self._zk.delete(f"{CONFIG_CHANGES}/{name}")
                self._first_seen.pop(name, None)
