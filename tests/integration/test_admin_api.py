"""Admin APIs against a real in-process broker, through real clients (librdkafka via
confluent-kafka, and kafka-python), checked against Kafka's semantics."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)
from kafka import errors as kafka_errors
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.static.primitive import i8

from brokers.log.config import TOPIC_CONFIGS
from tests.integration.inproc import raw_call, running_broker
from tests.polling import wait_until

pytestmark = pytest.mark.integration
WAIT_S = 30.0
PROPERTIES = {"log.retention.hours": "2", "num.partitions": "1"}


@pytest.fixture
def bootstrap(tmp_path: Path) -> Iterator[str]:
    with running_broker(tmp_path, PROPERTIES) as address:
        yield address


@pytest.fixture
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


@pytest.fixture
def kp_admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="pier-admin-test")
    try:
        yield client
    finally:
        client.close()


def _result(future: Any) -> Any:
    return future.result(timeout=WAIT_S)


def _error_of(future: Any) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        _result(future)
    error: KafkaError = raised.value.args[0]
    return error


def _create(admin: AdminClient, *topics: NewTopic, validate_only: bool = False) -> dict[str, Any]:
    return admin.create_topics(list(topics), validate_only=validate_only, operation_timeout=WAIT_S)


def _topic_configs(admin: AdminClient, topic: str) -> dict[str, Any]:
    (future,) = admin.describe_configs([ConfigResource("topic", topic)]).values()
    configs: dict[str, Any] = _result(future)
    return configs


def _topics(admin: AdminClient) -> dict[str, Any]:
    return admin.list_topics(timeout=WAIT_S).topics


# ---- CreateTopics -----------------------------------------------------------------------------
def test_create_topics_ok_exists_and_invalid(admin: AdminClient) -> None:
    futures = _create(
        admin,
        NewTopic("orders", num_partitions=3, replication_factor=1),
        NewTopic("defaults"),
        NewTopic("bad name!", num_partitions=1, replication_factor=1),
        NewTopic(
            "bad-config", num_partitions=1, replication_factor=1, config={"retention.ms": "x"}
        ),
        NewTopic("too-replicated", num_partitions=1, replication_factor=3),
    )
    assert _result(futures["orders"]) is None and _result(futures["defaults"]) is None
    assert _error_of(futures["bad name!"]).code() == KafkaError.TOPIC_EXCEPTION
    config_error = _error_of(futures["bad-config"])
    assert config_error.code() == KafkaError.INVALID_CONFIG
    assert "retention.ms" in config_error.str()
    assert _error_of(futures["too-replicated"]).code() == KafkaError.INVALID_REPLICATION_FACTOR
    topics = _topics(admin)
    assert len(topics["orders"].partitions) == 3 and len(topics["defaults"].partitions) == 1
    assert "bad-config" not in topics and "too-replicated" not in topics
    again = _create(admin, NewTopic("orders", num_partitions=1, replication_factor=1))
    assert _error_of(again["orders"]).code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_create_topics_validate_only_creates_nothing(admin: AdminClient) -> None:
    futures = _create(
        admin, NewTopic("dry", num_partitions=2, replication_factor=1), validate_only=True
    )
    assert _result(futures["dry"]) is None
    assert "dry" not in _topics(admin)


def test_kafka_python_create_topics_bad_partitions(kp_admin: KafkaAdminClient) -> None:
    with pytest.raises(kafka_errors.InvalidPartitionsError):
        kp_admin.create_topics([KpNewTopic("zero", num_partitions=0, replication_factor=1)])
    with pytest.raises(kafka_errors.TopicAlreadyExistsError):
        kp_admin.create_topics([KpNewTopic("kp", 2, 1)])
        kp_admin.create_topics([KpNewTopic("kp", 2, 1)])
    assert "kp" in kp_admin.list_topics() and "zero" not in kp_admin.list_topics()


# ---- DescribeConfigs --------------------------------------------------------------------------
def test_describe_configs_defaults_overrides_and_synonyms(admin: AdminClient) -> None:
    topic = NewTopic("cfg", num_partitions=1, replication_factor=1, config={"segment.ms": "60000"})
    _result(_create(admin, topic)["cfg"])
    configs = _topic_configs(admin, "cfg")
    assert configs.keys() == TOPIC_CONFIGS.keys()
    segment_ms = configs["segment.ms"]
    assert (segment_ms.value, segment_ms.source) == (
        "60000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )
    retention = configs["retention.ms"]  # from the broker's log.retention.hours=2
    assert (retention.value, retention.source) == (
        "7200000",
        ConfigSource.STATIC_BROKER_CONFIG.value,
    )
    # no DEFAULT_CONFIG synonym: Kafka's log.retention.ms defaults to null (docs/compatibility.md)
    assert list(retention.synonyms) == ["log.retention.hours"]
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert next(iter(segment_ms.synonyms)) == "segment.ms"


def test_describe_configs_documentation_over_the_wire(bootstrap: str, admin: AdminClient) -> None:
    _result(_create(admin, NewTopic("doc", num_partitions=1, replication_factor=1))["doc"])
    resource = DescribeConfigsResource(
        resource_type=i8(2), resource_name="doc", configuration_keys=("retention.ms",)
    )
    request = DescribeConfigsRequest(
        resources=(resource,), include_synonyms=True, include_documentation=True
    )
    (result,) = raw_call(bootstrap, request).results
    (entry,) = result.configs
    assert entry.documentation == TOPIC_CONFIGS["retention.ms"].doc
    assert entry.config_type == 5  # LONG


def test_kafka_python_describe_configs_and_broker_resource(kp_admin: KafkaAdminClient) -> None:
    kp_admin.create_topics([KpNewTopic("kpc", 1, 1, topic_configs={"cleanup.policy": "compact"})])
    described = kp_admin.describe_configs([KpConfigResource("TOPIC", "kpc")], config_filter="all")
    topic = described["topic"]["kpc"]
    assert topic["cleanup.policy"]["value"] == "compact"
    assert topic["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    broker = kp_admin.describe_configs([KpConfigResource("BROKER", "0")], config_filter="all")
    assert broker["broker"]["0"]["log.retention.hours"]["value"] == "2"


# ---- AlterConfigs / IncrementalAlterConfigs ---------------------------------------------------
def test_legacy_alter_configs_replaces_overrides(admin: AdminClient) -> None:
    config = {"segment.ms": "60000", "retention.ms": "1000"}
    _result(
        _create(admin, NewTopic("alt", num_partitions=1, replication_factor=1, config=config))[
            "alt"
        ]
    )
    (future,) = admin.alter_configs(
        [ConfigResource("topic", "alt", set_config={"retention.ms": "5000"})]
    ).values()
    _result(future)
    configs = _topic_configs(admin, "alt")
    assert configs["retention.ms"].value == "5000"
    assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value  # override dropped
    (bad,) = admin.alter_configs(
        [ConfigResource("topic", "alt", set_config={"retention.ms": "x"})]
    ).values()
    assert _error_of(bad).code() == KafkaError.INVALID_CONFIG


def test_kafka_python_legacy_alter_keeps_other_overrides(
    kp_admin: KafkaAdminClient, admin: AdminClient
) -> None:
    kp_admin.create_topics([KpNewTopic("kpa", 1, 1, topic_configs={"segment.ms": "60000"})])
    result = kp_admin.alter_configs(
        [KpConfigResource("TOPIC", "kpa", configs={"retention.ms": "9000"})], incremental=False
    )
    assert result == {"topic": {"kpa": "OK"}}
    configs = _topic_configs(admin, "kpa")
    assert (configs["retention.ms"].value, configs["segment.ms"].value) == ("9000", "60000")


def _incremental(admin: AdminClient, topic: str, *entries: ConfigEntry) -> Any:
    resource = ConfigResource("topic", topic, incremental_configs=list(entries))
    (future,) = admin.incremental_alter_configs([resource]).values()
    return future


def test_incremental_alter_set_delete_append_subtract(admin: AdminClient) -> None:
    config = {"segment.ms": "60000"}
    _result(
        _create(admin, NewTopic("inc", num_partitions=1, replication_factor=1, config=config))[
            "inc"
        ]
    )
    _result(
        _incremental(
            admin,
            "inc",
            ConfigEntry("retention.ms", "1234", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
        )
    )
    configs = _topic_configs(admin, "inc")
    assert configs["retention.ms"].value == "1234"
    assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].value == "delete,compact"
    subtract = ConfigEntry(
        "cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT
    )
    _result(_incremental(admin, "inc", subtract))
    assert _topic_configs(admin, "inc")["cleanup.policy"].value == "compact"
    not_a_list = ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)
    assert _error_of(_incremental(admin, "inc", not_a_list)).code() == KafkaError.INVALID_CONFIG


# ---- CreatePartitions -------------------------------------------------------------------------
def test_create_partitions_grows_only(admin: AdminClient) -> None:
    _result(_create(admin, NewTopic("grow", num_partitions=1, replication_factor=1))["grow"])
    _result(admin.create_partitions([NewPartitions("grow", 4)], operation_timeout=WAIT_S)["grow"])
    assert len(_topics(admin)["grow"].partitions) == 4
    shrink = admin.create_partitions([NewPartitions("grow", 2)], operation_timeout=WAIT_S)["grow"]
    assert _error_of(shrink).code() == KafkaError.INVALID_PARTITIONS
    dry = admin.create_partitions([NewPartitions("grow", 6)], validate_only=True)["grow"]
    assert _result(dry) is None and len(_topics(admin)["grow"].partitions) == 4


# ---- DeleteRecords ----------------------------------------------------------------------------
def test_delete_records_moves_the_low_watermark(bootstrap: str, admin: AdminClient) -> None:
    _result(_create(admin, NewTopic("recs", num_partitions=1, replication_factor=1))["recs"])
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(5):
        producer.produce("recs", value=b"r%d" % i, partition=0)
    assert producer.flush(WAIT_S) == 0
    (future,) = admin.delete_records([TopicPartition("recs", 0, 2)]).values()
    assert _result(future).low_watermark == 2
    (to_end,) = admin.delete_records([TopicPartition("recs", 0, -1)]).values()
    assert _result(to_end).low_watermark == 5
    (past,) = admin.delete_records([TopicPartition("recs", 0, 99)]).values()
    assert _error_of(past).code() == KafkaError.OFFSET_OUT_OF_RANGE


# ---- DeleteTopics -----------------------------------------------------------------------------
def test_delete_topics(admin: AdminClient, kp_admin: KafkaAdminClient) -> None:
    _result(_create(admin, NewTopic("gone", num_partitions=2, replication_factor=1))["gone"])
    kp_admin.create_topics([KpNewTopic("kpgone", 1, 1)])
    futures = admin.delete_topics(["gone", "never"], operation_timeout=WAIT_S)
    assert _result(futures["gone"]) is None
    assert _error_of(futures["never"]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    kp_admin.delete_topics(["kpgone"])
    wait_until(
        lambda: not {"gone", "kpgone"} & _topics(admin).keys(),
        what="gone and kpgone deleted",
        timeout=WAIT_S,
    )


# ---- DescribeCluster --------------------------------------------------------------------------
def test_describe_cluster(bootstrap: str, admin: AdminClient, kp_admin: KafkaAdminClient) -> None:
    port = int(bootstrap.rsplit(":", 1)[1])
    # kafka-python sends DescribeCluster (key 60); librdkafka answers describe_cluster from Metadata.
    kp = kp_admin.describe_cluster()
    assert [(b["broker_id"], b["host"], b["port"]) for b in kp["brokers"]] == [
        (0, "127.0.0.1", port)
    ]
    assert kp["controller_id"] == 0 and kp["cluster_id"]
    assert set(kp["authorized_operations"]) == {
        "CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
        "IDEMPOTENT_WRITE",
    }  # fmt: skip
    described = _result(admin.describe_cluster())
    assert described.cluster_id == kp["cluster_id"]
    assert [(n.id, n.port) for n in described.nodes] == [(0, port)]
