"""`kafka-topics --describe` (TopicCommand, kafka-tools 4.1.1: the Java Admin client, which
describes through DescribeTopicPartitions, KIP-966) through the gateway, as two tenants whose topic
names overlap. Paged one partition a response, each tenant's describe of all its topics prints
exactly its own topics and partitions with the eligible-leader-replica columns (not the N/A of the
Metadata fallback), never the other tenant's topics, a fleet prefix or an internal topic."""

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
TOPICS = {"acme": {"orders": 3, "shared": 2}, "bolt": {"payments": 1, "shared": 1}}
_PARTITION_LINE = re.compile(r"^\tTopic: (\S+)\tPartition: (\d+)\tLeader: \d+\tReplicas: \d+\t")
_TOPIC_ID = re.compile(r"TopicId: [A-Za-z0-9_-]+")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with GatewayStack(Path(tmp_path_factory.mktemp("java-gateway"))) as s:
        for tenant, wanted in TOPICS.items():
            admin = AdminClient(s.client_config(tenant))
            for future in admin.create_topics(
                [NewTopic(n, p, 1) for n, p in wanted.items()]
            ).values():
                future.result(TIMEOUT_S)
        yield s


def describe(
    reference_kafka: ReferenceKafka, stack: GatewayStack, tenant: str, tmp_path: Path
) -> str:
    creds = stack.credentials[tenant]
    config = tmp_path / f"{tenant}.properties"
    config.write_text(
        java_client_properties(stack.bootstrap, {"key_id": creds.key_id, "secret": creds.secret})
    )
    ran = reference_kafka.run(
        TOPICS_TOOL, "--bootstrap-server", stack.bootstrap, "--command-config", str(config),
        "--describe", "--partition-size-limit-per-response", "1",
    )  # fmt: skip
    assert ran.returncode == 0, f"exit {ran.returncode}\n{ran.stdout}\n{ran.stderr}"
    return ran.stdout


@pytest.mark.parametrize("tenant", sorted(TOPICS))
def test_each_tenant_describes_exactly_its_topics(
    reference_kafka: ReferenceKafka, stack: GatewayStack, tenant: str, tmp_path: Path
) -> None:
    out = describe(reference_kafka, stack, tenant, tmp_path)
    partitions = [
        (m.group(1), int(m.group(2))) for m in map(_PARTITION_LINE.match, out.splitlines()) if m
    ]
    expected = [(n, i) for n, count in sorted(TOPICS[tenant].items()) for i in range(count)]
    assert sorted(partitions) == expected, out
    other = next(t for t in TOPICS if t != tenant)
    # A topic id is random base64url ('_' is one of its letters): leaks are looked for around it.
    named = _TOPIC_ID.sub("TopicId: <id>", out)
    for leak in (f"{tenant}_", f"{other}_", "__", *set(TOPICS[other]) - set(TOPICS[tenant])):
        assert leak not in named, out
    for line in out.splitlines():
        if _PARTITION_LINE.match(line):
            assert line.endswith("\tElr: \tLastKnownElr: ") or line.endswith(
                "\tElr: \tLastKnownElr:"
            ), line
