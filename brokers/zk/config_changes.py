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
re-armed and the backlog handled. Every listing names every notice kept (the fleet's sum: each
tenant's changes are paced at the gateway, their number is not), so a round parses only the
names its listing adds and visits only the expired ones, and after each round the listener pauses
`ROUND_GAP_FACTOR` times the round's duration (at most `MAX_ROUND_GAP_S`): the next round takes
every notice that came meanwhile, and the listener's share of the loop stays bounded however many
notices are kept. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
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
# After each round the listener pauses this many times the round's own duration, at most
# `MAX_ROUND_GAP_S`: the notices a round coalesces grow with the pause (every listing names all
# of them), so the listener's share of the loop stays at ~10 % (measured, 20,000 notices pending
# and 50 new a second: 74 % of a core before, docs/benchmarks.md "Config change notices").
ROUND_GAP_FACTOR = 9.0
MAX_ROUND_GAP_S = 2.0
FAILED_ROUND_RETRY_S = 1.0  # a round that failed is taken again after this pause


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
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._zk = zk
        self._clock = clock
        self._on_topic_change = on_topic_change
        self._expiration_ms = expiration_ms
        self._sleep = sleep
        self._last_handled = -1
        self._unhandled: list[tuple[int, str]] = []  # taken by a round that failed, in order
        self._present: set[str] = set()  # the names of the last listing
        self._aging: deque[tuple[int, int, str]] = deque()  # (first seen ms, sequence, name)
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def last_handled(self) -> int:
        return self._last_handled

    async def start(self) -> None:
        """Arm the watch; what is there now counts as handled."""
        await self._zk.ensure_path(CONFIG_CHANGES)
        names = await self._zk.children(CONFIG_CHANGES, self._changed)
        fresh = self._take_listing(names)
        self._last_handled = fresh[-1][0] if fresh else -1
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
            started = self._clock.monotonic()
            gap = 0.0
            try:
                await self.process()
            except ControllerError as exc:  # ZooKeeper unreachable: retried after a pause
                log.warning("event=config_changes_failed error=%s", exc)
                gap = FAILED_ROUND_RETRY_S
            except Exception as exc:  # one bad notification must not stop the listener
                log.error("event=config_changes_failed error=%r", exc)
                gap = FAILED_ROUND_RETRY_S
            if gap:
                self._wakeup.set()  # the unhandled notices are taken again
            await self._sleep(max(gap, round_gap_s(self._clock.monotonic() - started)))

    async def process(self) -> None:
        """Handle new notifications (re-arming the watch): each topic they name is re-read once,
        in the order of its first notification (a topic changed many times since the last round
        costs one read and one apply); then purge. A failure keeps the round's notices to be
        handled at the next round (re-reading a topic is idempotent). Only the names this listing
        adds are parsed and only expired ones visited: the rest of the round is set arithmetic."""
        names = await self._zk.children(CONFIG_CHANGES, self._changed)
        fresh = [(s, n) for s, n in self._take_listing(names) if s > self._last_handled]
        pending = self._unhandled + fresh
        self._unhandled = pending  # until the round has applied them all
        topics: dict[str, None] = {}  # ordered: first notified first
        for _sequence, name in pending:
            topic = await self._topic_of(name)
            if topic is not None:
                topics[topic] = None
        for topic in topics:
            await self._on_topic_change(topic)
        self._unhandled = []
        if pending:
            self._last_handled = max(self._last_handled, pending[-1][0])
        await self._purge()

    async def _topic_of(self, name: str) -> str | None:
        """The topic a notification names; None for another entity type or a bad notice."""
        try:
            node = await self._zk.get(f"{CONFIG_CHANGES}/{name}")
            entity_type, entity_name = decode_change(node.data)
        except (ZNodeMissingError, ZNodeFormatError) as exc:
            log.warning("event=config_change_skipped name=%s error=%s", name, exc)
            return None
        return entity_name if entity_type == TOPICS_ENTITY else None

    def _take_listing(self, names: list[str]) -> list[tuple[int, str]]:
        """Remember a listing; the notifications it adds, by sequence number, each put in the
        purge queue as first seen now (a name another broker deleted leaves `_present` here and
        the queue when its turn comes)."""
        present = set(names)
        fresh = sorted((s, n) for n in present - self._present if (s := sequence_of(n)) is not None)
        self._present = present
        now = self._clock.time_ms()
        self._aging.extend((now, s, n) for s, n in fresh)
        return fresh

    async def _purge(self) -> None:
        """Delete the handled notifications first seen `expiration_ms` ago or more (the queue is
        in order of first sight, so this visits only those and the one that stops it)."""
        expired_before = self._clock.time_ms() - self._expiration_ms
        aging = self._aging
        while aging and aging[0][0] <= expired_before and aging[0][1] <= self._last_handled:
            name = aging[0][2]
            if name in self._present:
                with contextlib.suppress(ZNodeMissingError):
                    await self._zk.delete(f"{CONFIG_CHANGES}/{name}")
                self._present.discard(name)
            aging.popleft()  # only once deleted: a failed delete is tried again next round


def round_gap_s(round_s: float) -> float:
    """The pause after a round that took `round_s`: the listener spends at most
    1 / (1 + `ROUND_GAP_FACTOR`) of the loop on notices whatever their number (a listing of
    45,000 names takes ~20 ms), and a cheap round (a few ms) delays the next change by tens of
    milliseconds at most."""
    return min(max(round_s, 0.0) * ROUND_GAP_FACTOR, MAX_ROUND_GAP_S)
