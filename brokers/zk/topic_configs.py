"""Topic overrides in ZooKeeper mode, as this broker reads and applies them (Kafka's
`TopicConfigHandler` and `ZkConfigRepository`).

Owns: reading `/config/topics/<t>` (`read`, `read_blocking`: an absent znode means no
overrides), the overrides a newly created log starts with (`for_new_log`, Kafka's
`Partition.createLog` fetching the topic config from ZooKeeper; cached per topic id, so a topic
re-created under the same name is read afresh and a LeaderAndIsr creating many partitions of one
topic costs one read), and `apply`: the overrides replace the metadata cache's copy, every local
log of the topic gets the new `LogConfig` at once (retention, segment, cleanup policy,
min.insync.replicas, message.max.bytes, ... are read from the log's config when used, so no
restart is needed), and each `listeners` callback hears of it (the controller, for
`unclean.leader.election.enable`). Overrides that do not parse (another tool wrote them) are
logged and left unapplied. `load_local` applies ZooKeeper's overrides to the logs found on disk
at start-up, which opened with the broker defaults.
Runs on the event loop; not thread-safe. `read_blocking`/`for_new_log` wait for one ZooKeeper
round trip on the caller's thread (they serve the synchronous handler and LeaderAndIsr paths).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping

from brokers.controller import zk_paths
from brokers.controller.errors import (
    ZNodeFormatError,
    ZNodeMissingError,
    ZooKeeperUnavailableError,
)
from brokers.controller.zk_client import ZkClient
from brokers.log.config import LogConfig
from brokers.log.errors import InvalidConfigError
from brokers.log.log_manager import LogManager
from brokers.replication.metadata_cache import MetadataCache

log = logging.getLogger("pier.topic_configs")
SWEEP_MIN_ENTRIES = 1_024  # the new-log cache is swept of deleted topics past this, then at 2×
ConfigListener = Callable[[str, Mapping[str, str]], None]


class TopicConfigs:
    def __init__(
        self,
        zk: ZkClient,
        metadata: MetadataCache,
        logs: LogManager,
        *,
        broker_defaults: Mapping[str, str],
    ) -> None:
        self._zk = zk
        self._metadata = metadata
        self._logs = logs
        self._broker_defaults = dict(broker_defaults)
        self._for_new_logs: dict[str, tuple[uuid.UUID, dict[str, str]]] = {}
        self._sweep_at = SWEEP_MIN_ENTRIES
        self.listeners: list[ConfigListener] = []

    # --- reads ---------------------------------------------------------------------------------

    async def read(self, topic: str) -> dict[str, str]:
        try:
            node = await self._zk.get(zk_paths.topic_config_path(topic))
        except ZNodeMissingError:
            return {}
        return zk_paths.decode_topic_config(node.data)

    def read_blocking(self, topic: str) -> dict[str, str]:
        try:
            node = self._zk.get_blocking(zk_paths.topic_config_path(topic))
        except ZNodeMissingError:
            return {}
        return zk_paths.decode_topic_config(node.data)

    def for_new_log(self, topic: str, topic_id: uuid.UUID) -> dict[str, str] | None:
        """The overrides a new log of `topic` starts with; {} if ZooKeeper has none readable,
        None while ZooKeeper cannot be reached (the caller keeps the request's copy)."""
        cached = self._for_new_logs.get(topic)
        if cached is not None and cached[0] == topic_id:
            return dict(cached[1])
        try:
            overrides = self.read_blocking(topic)
        except ZNodeFormatError as exc:
            log.warning("event=topic_config_unreadable topic=%s error=%s", topic, exc)
            overrides = {}
        except ZooKeeperUnavailableError as exc:
            log.warning("event=topic_config_unavailable topic=%s error=%s", topic, exc)
            return None
        self._forget_deleted_topics()
        self._for_new_logs[topic] = (topic_id, overrides)
        return dict(overrides)

    def _forget_deleted_topics(self) -> None:
        """Keep the cache to the topics this broker still knows, so it cannot grow without end:
        swept once it has doubled since the last sweep (at least `SWEEP_MIN_ENTRIES`), so a
        new topic costs the sweep's share, not a walk of every cached topic (10,000: ~1 ms a
        new topic on every replica broker)."""
        if len(self._for_new_logs) < self._sweep_at:
            return
        for name in [t for t in self._for_new_logs if t not in self._metadata.topics]:
            del self._for_new_logs[name]
        self._sweep_at = max(SWEEP_MIN_ENTRIES, 2 * len(self._for_new_logs))

    # --- applying ------------------------------------------------------------------------------

    async def refresh(self, topic: str) -> None:
        """Re-read the topic's overrides and apply them (a `/config/changes` notification)."""
        try:
            overrides = await self.read(topic)
        except ZNodeFormatError as exc:
            log.warning("event=topic_config_unreadable topic=%s error=%s", topic, exc)
            return
        self.apply(topic, overrides)

    def apply(self, topic: str, overrides: Mapping[str, str]) -> None:
        try:
            config = LogConfig.from_properties(overrides, self._broker_defaults)
        except InvalidConfigError as exc:
            log.warning("event=topic_config_invalid topic=%s error=%s", topic, exc)
            return
        cached = self._metadata.topics.get(topic)
        if cached is not None:
            cached.configs = dict(overrides)
        known = self._for_new_logs.get(topic)
        if known is not None:
            self._for_new_logs[topic] = (known[0], dict(overrides))
        for log_ in self._logs.logs():  # Kafka's LogManager.updateTopicConfig
            if log_.topic == topic:
                log_.update_config(config)
        for listener in self.listeners:
            try:
                listener(topic, dict(overrides))
            except Exception as exc:  # a listener must not stop the logs from being updated
                log.error("event=topic_config_listener_failed topic=%s error=%r", topic, exc)
        log.info("event=topic_config_applied topic=%s overrides=%s", topic, dict(overrides))

    async def load_local(self) -> None:
        """Apply ZooKeeper's overrides to every topic with a log on this broker."""
        for topic in sorted({log_.topic for log_ in self._logs.logs()}):
            await self.refresh(topic)
