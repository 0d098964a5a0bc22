"""The four real Kafka clients as a tenant uses them through the gateway (SASL_PLAINTEXT).

Owns: each client's SASL settings in its own idiom (`security_settings`), the foundation's
round-trip drivers configured with them (`GatewayClient.driver`), and what the round-trip drivers
do not cover, per client: creating a topic with its admin API (kcat has none: confluent-kafka's
AdminClient stands in), consuming in a consumer group with explicit commits, reading the committed
offsets back (OffsetFetch), and the admin view a tenant gets (topic names, one topic's configs,
group names). Blocking; each call creates and closes its own clients (aiokafka on its own event
loop via `asyncio.run`), so everything is safe from any thread.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewTopic as AioNewTopic
from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
from aiokafka.admin.config_resource import ConfigResourceType as AioConfigResourceType
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.admin._resource import ResourceType
from kafka import KafkaConsumer
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpConfigResourceType
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic
from kafka.structs import OffsetAndMetadata as KpOffsetAndMetadata
from kafka.structs import TopicPartition as KpTopicPartition

from tests.e2e.client_drivers import ClientDriver, ConfluentDriver
from tests.e2e.kafka_admin import (
    ADMIN_TIMEOUT_S,
    StoredRecord,
    create_topic,
    to_stored,
    wait_for_leaders,
)
from tests.e2e.kcat_driver import KcatDriver, run_kcat
from tests.e2e.python_drivers import AioKafkaDriver, KafkaPythonDriver, _stored
from tests.gateway_stack import Credentials, GatewayStack
from tests.polling import wait_until, wait_until_async

CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka", "kcat")
LIBRDKAFKA = frozenset({"confluent-kafka", "kcat"})
GROUP_TIMEOUT_S = 60.0
_FIELD = "\x1f"


def security_settings(client: str, credentials: Credentials, mechanism: str) -> dict[str, Any]:
    """SASL_PLAINTEXT with `mechanism` and the tenant's API key, in `client`'s own settings."""
    if client in LIBRDKAFKA:
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": credentials.key_id,
            "sasl.password": credentials.secret,
        }
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": credentials.key_id,
        "sasl_plain_password": credentials.secret,
    }


@dataclass(frozen=True)
class AdminView:
    """What a tenant's admin calls answered: topic names, one topic's configs, group ids."""

    topics: frozenset[str]
    configs: Mapping[str, str]
    config_resource_names: tuple[str, ...]  # as DescribeConfigs answered (confluent: as asked)
    groups: frozenset[str]


@dataclass(frozen=True)
class GroupRound:
    """One consumer of a group: the records it consumed, and the offsets committed after."""

    records: list[StoredRecord]
    committed: dict[int, int]  # partition → committed offset, for partitions with a commit


class GatewayClient:
    def __init__(self, client: str, stack: GatewayStack, tenant: str, mechanism: str) -> None:
        assert client in CLIENTS, client
        credentials = stack.credentials[tenant]
        self.client = client
        self.bootstrap = stack.bootstrap
        self.security = security_settings(client, credentials, mechanism)
        # confluent-kafka stands in where kcat has no API, with the same key and mechanism.
        self.confluent = security_settings("confluent-kafka", credentials, mechanism)

    def driver(self) -> ClientDriver:
        if self.client == "confluent-kafka":
            return ConfluentDriver(self.security)
        if self.client == "kafka-python":
            return KafkaPythonDriver(self.security)
        if self.client == "aiokafka":
            return AioKafkaDriver(self.security)
        return KcatDriver(self.security)

    # -- admin ---------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, config: Mapping[str, str]) -> None:
        """CreateTopics with this client's admin API, then wait until every leader is known."""
        if self.client in LIBRDKAFKA:
            create_topic(self.bootstrap, name, partitions, config, security=self.confluent)
            return
        if self.client == "kafka-python":
            admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, **self.security)
            try:
                admin.create_topics(
                    [KpNewTopic(name, partitions, 1, topic_configs=dict(config))],
                    timeout_ms=int(ADMIN_TIMEOUT_S * 1000),
                )  # raises on a topic error
            finally:
                admin.close()
        else:
            asyncio.run(self._aio_create(name, partitions, config))
        admin = AdminClient({"bootstrap.servers": self.bootstrap, **self.confluent})
        wait_for_leaders(admin, name, partitions)

    async def _aio_create(self, name: str, partitions: int, config: Mapping[str, str]) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, **self.security)
        await admin.start()
        try:
            response = await admin.create_topics(
                [AioNewTopic(name, partitions, 1, topic_configs=dict(config))]
            )
        finally:
            await admin.close()
        errors = [(topic, code) for topic, code, *_ in response.topic_errors]
        assert errors == [(name, 0)], f"CreateTopics answered {errors}"

    def admin_view(self, topic: str) -> AdminView:
        """Metadata (all topics), DescribeConfigs of `topic`, ListGroups, via this client."""
        if self.client == "kafka-python":
            return self._kafka_python_view(topic)
        if self.client == "aiokafka":
            return asyncio.run(self._aio_view(topic))
        view = _confluent_view(self.bootstrap, self.confluent, topic)
        if self.client == "kcat":  # kcat's own admin call: Metadata (`-L`)
            listing = json.loads(run_kcat(["-L", "-J"], self.bootstrap, self.security))
            view = AdminView(
                frozenset(t["topic"] for t in listing["topics"]),
                view.configs,
                view.config_resource_names,
                view.groups,
            )
        return view

    def _kafka_python_view(self, topic: str) -> AdminView:
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, **self.security)
        try:
            topics = frozenset(admin.list_topics())
            described = admin.describe_configs(
                [KpConfigResource(KpConfigResourceType.TOPIC, topic)], config_filter="all"
            )["topic"]
            groups = frozenset(g["group_id"] for g in admin.list_groups())
        finally:
            admin.close()
        configs = {name: entry["value"] for name, entry in described.get(topic, {}).items()}
        return AdminView(topics, configs, tuple(described), groups)

    async def _aio_view(self, topic: str) -> AdminView:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, **self.security)
        await admin.start()
        try:
            topics = frozenset(await admin.list_topics())
            responses = await admin.describe_configs(
                [AioConfigResource(AioConfigResourceType.TOPIC, topic)]
            )
            groups = frozenset(group_id for group_id, _type in await admin.list_consumer_groups())
        finally:
            await admin.close()
        configs: dict[str, str] = {}
        names: list[str] = []
        for response in responses:
            for error, _message, _type, name, entries in response.resources:
                assert error == 0, f"DescribeConfigs {name}: error {error}"
                names.append(name)
                configs.update({entry[0]: entry[1] for entry in entries})
        return AdminView(topics, configs, tuple(names), groups)

    # -- consumer groups -----------------------------------------------------------------------
    def consume_in_group(self, topic: str, group: str, count: int, partitions: int) -> GroupRound:
        """Join `group` on `topic`, consume exactly `count` records, commit them, read the
        committed offsets back (OffsetFetch), leave."""
        if self.client == "confluent-kafka":
            return self._confluent_group(topic, group, count, partitions)
        if self.client == "kafka-python":
            return self._kafka_python_group(topic, group, count, partitions)
        if self.client == "aiokafka":
            return asyncio.run(self._aio_group(topic, group, count, partitions))
        return self._kcat_group(topic, group, count, partitions)

    def _confluent_group(self, topic: str, group: str, count: int, partitions: int) -> GroupRound:
        consumer = Consumer(_group_config(self.bootstrap, self.security, group))
        records: list[StoredRecord] = []
        try:
            consumer.subscribe([topic])

            def consumed() -> bool:
                for message in consumer.consume(num_messages=count - len(records), timeout=0.5):
                    if message.error() is not None:
                        raise KafkaException(message.error())
                    records.append(to_stored(message))
                return len(records) >= count

            wait_until(
                consumed, what=_group_what(count, group), timeout=GROUP_TIMEOUT_S, interval=0
            )
            offsets = [TopicPartition(topic, p, o) for p, o in next_offsets(records).items()]
            consumer.commit(offsets=offsets, asynchronous=False)
            query = [TopicPartition(topic, p) for p in range(partitions)]
            committed = consumer.committed(query, timeout=10)
        finally:
            consumer.close()
        return GroupRound(records, {tp.partition: tp.offset for tp in committed if tp.offset >= 0})

    def _kafka_python_group(
        self, topic: str, group: str, count: int, partitions: int
    ) -> GroupRound:
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **self.security,
        )
        records: list[StoredRecord] = []
        try:
            consumer.subscribe([topic])

            def consumed() -> bool:
                polled = consumer.poll(timeout_ms=500, max_records=count - len(records))
                for batch in polled.values():
                    records.extend(_stored(r) for r in batch)
                return len(records) >= count

            wait_until(
                consumed, what=_group_what(count, group), timeout=GROUP_TIMEOUT_S, interval=0
            )
            consumer.commit(
                {
                    KpTopicPartition(topic, p): KpOffsetAndMetadata(o, "", -1)
                    for p, o in next_offsets(records).items()
                }
            )
            committed = {
                p: consumer.committed(KpTopicPartition(topic, p)) for p in range(partitions)
            }
        finally:
            consumer.close()
        return GroupRound(records, {p: o for p, o in committed.items() if o is not None})

    async def _aio_group(self, topic: str, group: str, count: int, partitions: int) -> GroupRound:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=self.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **self.security,
        )
        await consumer.start()
        records: list[StoredRecord] = []

        async def consumed() -> bool:
            polled = await consumer.getmany(timeout_ms=500, max_records=count - len(records))
            for batch in polled.values():
                records.extend(_stored(r) for r in batch)
            return len(records) >= count

        try:
            await wait_until_async(
                consumed, what=_group_what(count, group), timeout=GROUP_TIMEOUT_S, interval=0
            )
            await consumer.commit(
                {AioTopicPartition(topic, p): o for p, o in next_offsets(records).items()}
            )
            committed = {
                p: await consumer.committed(AioTopicPartition(topic, p)) for p in range(partitions)
            }
        finally:
            await consumer.stop()
        return GroupRound(records, {p: o for p, o in committed.items() if o is not None})

    def _kcat_group(self, topic: str, group: str, count: int, partitions: int) -> GroupRound:
        """kcat's balanced consumer (`-G`): it stores the offset of each record it prints and
        commits them when it exits after `-c count` records (librdkafka's auto commit on close)."""
        out = run_kcat(
            [
                "-G",
                group,
                "-X",
                "auto.offset.reset=earliest",
                "-c",
                str(count),
                "-f",
                _FIELD.join(["%p", "%o", "%k", "%s"]) + "\\n",
                topic,
            ],
            self.bootstrap,
            self.security,
        )
        records = []
        for line in out.splitlines():
            partition, offset, key, value = line.split(_FIELD)
            records.append(
                StoredRecord(int(partition), int(offset), key.encode(), value.encode(), (), 0)
            )
        assert len(records) == count, f"kcat consumed {len(records)} of {count}"
        return GroupRound(records, _confluent_committed(self, topic, group, partitions))


def _group_what(count: int, group: str) -> str:
    return f"{count} records consumed in group {group}"


def next_offsets(records: Sequence[StoredRecord]) -> dict[int, int]:
    """Partition → the offset after the last record consumed from it: what a commit names."""
    offsets: dict[int, int] = {}
    for record in records:
        offsets[record.partition] = max(offsets.get(record.partition, 0), record.offset + 1)
    return offsets


def _group_config(bootstrap: str, security: Mapping[str, Any], group: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        **security,
    }


def _confluent_committed(
    client: GatewayClient, topic: str, group: str, partitions: int
) -> dict[int, int]:
    consumer = Consumer(_group_config(client.bootstrap, client.confluent, group))
    try:
        query = [TopicPartition(topic, p) for p in range(partitions)]
        committed = consumer.committed(query, timeout=10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in committed if tp.offset >= 0}


def _confluent_view(bootstrap: str, security: Mapping[str, Any], topic: str) -> AdminView:
    admin = AdminClient({"bootstrap.servers": bootstrap, **security})
    topics = frozenset(admin.list_topics(timeout=10).topics)
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    configs: dict[str, str] = {}
    names: list[str] = []
    for resource, future in futures.items():
        names.append(resource.name)
        configs.update({name: entry.value for name, entry in future.result(10).items()})
    listed = admin.list_consumer_groups().result(10)
    assert not listed.errors, f"ListGroups errors: {listed.errors}"
    groups = frozenset(g.group_id for g in listed.valid)
    return AdminView(topics, configs, tuple(names), groups)
