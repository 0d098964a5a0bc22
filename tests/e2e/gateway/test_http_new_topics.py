"""The HTTP produce's wait for a topic it does not see (gateway/http/topic_metadata.py; the cluster
case, where metadata really lags, is test_up_running.py): a topic that does not exist is 404 once
the bounded wait is over, and a stream of many records to one answers every record with 404
without waiting that bound per record; a topic made by a Kafka client after a 404 is found.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.e2e.gateway.clients import security_settings
from tests.e2e.gateway.http_stack import TenantHttp, http_gateway_stack, wait_http
from tests.gateway_stack import GatewayStack

pytestmark = pytest.mark.e2e

STREAMED = 200  # records; were each held the full wait (3 s), the answer would take 10 minutes


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with http_gateway_stack(Path(tmp_path_factory.mktemp("http-new-topics"))) as running:
        wait_http(running)
        yield running


@pytest.fixture(scope="module")
def acme(stack: GatewayStack) -> TenantHttp:
    return TenantHttp(stack, stack.credentials["acme"])


def _record(text: str) -> dict[str, object]:
    return {"value": {"type": "STRING", "data": text}}


@pytest.mark.timeout(120)
def test_a_stream_to_a_missing_topic_answers_every_record_404(acme: TenantHttp) -> None:
    stream = b"".join(json.dumps(_record(str(i))).encode() + b"\n" for i in range(STREAMED))
    answer = acme.session.post(
        f"{acme.base}{acme.cluster}/topics/no-such-topic/records",
        data=iter([stream]),  # chunked: Confluent's streaming produce
        headers={"Content-Type": "application/json"},
        timeout=100,
    )
    assert answer.status_code == 200, answer.text
    codes = [json.loads(line)["error_code"] for line in answer.text.splitlines() if line.strip()]
    assert codes == [40401] * STREAMED


def test_a_topic_a_kafka_client_makes_after_a_404_is_found(
    stack: GatewayStack, acme: TenantHttp
) -> None:
    topic = "made-after-404"
    path = f"{acme.cluster}/topics/{topic}/records"
    refused = acme.post(path, _record("too early"))
    assert refused.status_code == 404 and refused.json()["error_code"] == 40401, refused.text
    settings = security_settings("confluent-kafka", stack.credentials["acme"], "SCRAM-SHA-256")
    admin = AdminClient({"bootstrap.servers": stack.bootstrap, **settings})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    produced = acme.post(path, _record("in time"))
    assert produced.status_code == 200, produced.text
