"""Real Kafka clients through the gateway (issue 10, first acceptance bullet).

Each of confluent-kafka, kafka-python, aiokafka and kcat, logged in as tenant `acme` with SASL
PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512:
- every codec: the client creates a topic with its admin API (confluent's for kcat), produces the
  foundation's keyed, headered record stream with the codec, reads it back, and the foundation's
  round-trip checks hold (content, per-partition order, keys, headers, dense offsets, timestamps),
  as do its ListOffsets-by-timestamp answers; the broker stored the batches with the client's codec
  under the tenant's prefixed name. The mechanism rotates across codecs, so every client also logs
  in with each mechanism here;
- every mechanism: a consumer group with explicit commits (a new consumer of the group resumes at
  the committed offsets, nothing lost or read twice), and admin calls (Metadata, DescribeConfigs,
  ListGroups) answered with the tenant's own names only, none of tenant `bolt`'s.

The module runs its own gateway stack with the coordinator's initial rebalance delay off, so the
group tests do not wait 3 s per join.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from gateway.kafka.namespace import INTERNAL_TOPICS, TenantNamespace
from tests.e2e.gateway.clients import CLIENTS, GatewayClient, next_offsets
from tests.e2e.kafka_admin import create_topic
from tests.e2e.kcat_driver import KCAT_HEADERS
from tests.e2e.test_clients_roundtrip import (
    CODEC_IDS,
    assert_offsets_for_times,
    assert_stored_codec,
)
from tests.e2e.workload import assert_exact_copy, assert_keyed_stream, make_records, seq_of
from tests.gateway_stack import MECHANISMS, GatewayStack

pytestmark = pytest.mark.e2e

RECORDS = 2_000
PARTITIONS = 3
GROUP_RECORDS = 200
FIRST_ROUND = 70
CODECS = list(CODEC_IDS)
# codec i logs in with mechanism i mod 3: none/lz4 PLAIN, gzip/zstd SCRAM-SHA-256, snappy -512
MECHANISM_OF_CODEC = {codec: MECHANISMS[i % len(MECHANISMS)] for i, codec in enumerate(CODECS)}
TENANT = "acme"
ACME = TenantNamespace(TENANT)


@pytest.fixture(scope="module")
def gateway_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    root = tmp_path_factory.mktemp("gateway-clients")
    with GatewayStack(root, broker_config={"group.initial.rebalance.delay.ms": "0"}) as stack:
        yield stack


@pytest.fixture(scope="module")
def bolt_names(gateway_stack: GatewayStack) -> tuple[str, str]:
    """A topic and a group of the other tenant, which `acme` must never see."""
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"bolt-only-topic-{suffix}", f"bolt-only-group-{suffix}"
    config = gateway_stack.client_config("bolt", "PLAIN")
    create_topic(gateway_stack.bootstrap, topic, 1, security=config)
    consumer = Consumer({**config, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        consumer.close()
    return topic, group


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_round_trip_with_every_codec(
    gateway_stack: GatewayStack, topic_name: str, client: str, codec: str
) -> None:
    gateway = GatewayClient(client, gateway_stack, TENANT, MECHANISM_OF_CODEC[codec])
    driver = gateway.driver()
    bootstrap = gateway_stack.bootstrap
    gateway.create_topic(topic_name, PARTITIONS, {})
    base_timestamp = int(time.time() * 1000) - 3_600_000
    sent = make_records(RECORDS, PARTITIONS, base_timestamp)

    window_start = int(time.time() * 1000)
    driver.produce(bootstrap, topic_name, sent, codec)
    window_end = int(time.time() * 1000)
    got = driver.read(bootstrap, topic_name, PARTITIONS)

    if driver.explicit_timestamps:
        assert_exact_copy(sent, got)
    else:
        assert_keyed_stream(sent, got, KCAT_HEADERS, (window_start, window_end))
    assert gateway_stack.broker is not None
    assert_stored_codec(gateway_stack.broker.data_dir, ACME.fleet(topic_name), CODEC_IDS[codec])
    assert_offsets_for_times(driver, bootstrap, topic_name, got)


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("client", CLIENTS)
def test_group_commits_and_admin_calls(
    gateway_stack: GatewayStack,
    bolt_names: tuple[str, str],
    topic_name: str,
    client: str,
    mechanism: str,
) -> None:
    gateway = GatewayClient(client, gateway_stack, TENANT, mechanism)
    group = f"group-{topic_name}"
    retention_ms = str(3_600_000 + len(topic_name))  # a value no default has
    gateway.create_topic(topic_name, 2, {"retention.ms": retention_ms})
    sent = make_records(GROUP_RECORDS, 2, int(time.time() * 1000))
    gateway.driver().produce(gateway_stack.bootstrap, topic_name, sent, "none")

    first = gateway.consume_in_group(topic_name, group, FIRST_ROUND, 2)
    assert first.committed == next_offsets(first.records)
    second = gateway.consume_in_group(topic_name, group, GROUP_RECORDS - FIRST_ROUND, 2)
    for partition in {r.partition for r in second.records}:
        resumed_at = min(r.offset for r in second.records if r.partition == partition)
        assert resumed_at == first.committed.get(partition, 0), f"partition {partition}"
    positions = [(r.partition, r.offset) for r in first.records + second.records]
    assert len(positions) == len(set(positions)) == GROUP_RECORDS, "records lost or read twice"
    seqs = sorted(seq_of(r.value) for r in first.records + second.records)
    assert seqs == list(range(GROUP_RECORDS))
    assert second.committed == {p: max(o for q, o in positions if q == p) + 1 for p, _ in positions}

    view = gateway.admin_view(topic_name)
    bolt_topic, bolt_group = bolt_names
    assert topic_name in view.topics
    assert group in view.groups
    assert view.config_resource_names == (topic_name,)
    assert view.configs.get("retention.ms") == retention_ms
    for name in view.topics | view.groups:
        assert not name.startswith(ACME.prefix), f"a fleet name leaked: {name}"
        assert name not in INTERNAL_TOPICS, f"an internal topic is visible: {name}"
    assert bolt_topic not in view.topics
    assert bolt_group not in view.groups
