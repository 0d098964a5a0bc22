"""Kafka's own `kafka-topics --describe --topic-id` (TopicCommand, kafka-tools 4.1.1: the Java Admin
describes by id with Metadata v12) through the gateway, as two tenants (issue 27 item 4): each
tenant describes its own topic by the id the gateway shows it, and the other tenant's id is an
unknown topic id to it, with nothing of the topic printed. (Kafka's Java client sends an id
look-up with the name "", not null: the brokers and the gateway take a non-zero id without a name
as a look-up by id, as Kafka does.)"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from infra.connect_help import java_client_properties
from tests.compat.conftest import ReferenceKafka
from tests.gateway_stack import GatewayStack

pytestmark = [pytest.mark.compat]
TOPICS_TOOL = "org.apache.kafka.tools.TopicCommand"
TIMEOUT_S = 30.0
TOPIC = {"acme": "invoices", "bolt": "parcels"}
_TOPIC_ID = re.compile(r"TopicId: (\S+)")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with GatewayStack(Path(tmp_path_factory.mktemp("java-topic-ids"))) as s:
        for tenant, topic in TOPIC.items():
            admin = AdminClient(s.client_config(tenant))
            for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
                future.result(TIMEOUT_S)
        yield s


def topics_tool(
    reference_kafka: ReferenceKafka, stack: GatewayStack, tenant: str, tmp_path: Path, *args: str
) -> tuple[int, str]:
    creds = stack.credentials[tenant]
    config = tmp_path / f"{tenant}.properties"
    config.write_text(
        java_client_properties(stack.bootstrap, {"key_id": creds.key_id, "secret": creds.secret})
    )
    ran = reference_kafka.run(
        TOPICS_TOOL, "--bootstrap-server", stack.bootstrap, "--command-config", str(config), *args
    )
    return ran.returncode, ran.stdout + ran.stderr


def test_a_tenant_describes_its_topic_by_id_and_not_the_others(
    reference_kafka: ReferenceKafka, stack: GatewayStack, tmp_path: Path
) -> None:
    ids = {}
    for tenant, topic in TOPIC.items():
        code, out = topics_tool(
            reference_kafka, stack, tenant, tmp_path, "--describe", "--topic", topic
        )
        assert code == 0, out
        found = _TOPIC_ID.search(out)
        assert found is not None, out
        ids[tenant] = found.group(1)
    for tenant, topic in TOPIC.items():
        code, out = topics_tool(
            reference_kafka, stack, tenant, tmp_path, "--describe", "--topic-id", ids[tenant]
        )
        assert code == 0, out
        assert f"Topic: {topic}\tTopicId: {ids[tenant]}\tPartitionCount: 2" in out, out
    code, out = topics_tool(
        reference_kafka, stack, "bolt", tmp_path, "--describe", "--topic-id", ids["acme"]
    )
    # What Kafka's tool prints for an id no topic has (UNKNOWN_TOPIC_ID from the gateway).
    assert code != 0 and f"TopicId '{ids['acme']}' does not exist as expected" in out, out
    assert TOPIC["acme"] not in out and "acme_" not in out, out
