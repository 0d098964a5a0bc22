"""HTTP single-record produce through the idempotent, pipelined batcher (issue 24, item 4).

Many clients produce one record per request to one partition at once: every record is answered
once, each client's offsets increase in the order its answers came, the partition holds exactly
the records answered (no loss, no duplicate) at the offsets answered, and the stored batches carry
one producer id with gap-free sequences and hold several records (concurrent requests share a
batch). The slow variant restarts the broker in the middle of the run: the same must hold.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import aiohttp
import pytest
from confluent_kafka import Consumer, TopicPartition

from brokers.client import TopicPartition as FleetPartition
from gateway.kafka.namespace import TenantNamespace
from tests.e2e.gateway.broker_log import batch_headers
from tests.e2e.gateway.http_stack import TenantHttp, http_gateway_stack, http_url, wait_http
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
CLIENTS = 16
ACME = TenantNamespace("acme")
Answer = tuple[str, int]  # (value, offset)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with http_gateway_stack(Path(tmp_path_factory.mktemp("http-pipeline"))) as running:
        wait_http(running)
        yield running


@pytest.fixture(scope="module")
def acme(stack: GatewayStack) -> TenantHttp:
    return TenantHttp(stack, stack.credentials["acme"])


async def produce_all(
    stack: GatewayStack,
    acme: TenantHttp,
    topic: str,
    per_client: int,
    on_answer: Callable[[int], None] = lambda _count: None,
) -> list[list[Answer]]:
    """`CLIENTS` clients, each producing `per_client` records one request at a time; each
    client's (value, offset) in the order its answers came."""
    url = f"{http_url(stack)}{acme.cluster}/topics/{topic}/records"
    auth = aiohttp.BasicAuth(acme.creds.key_id, acme.creds.secret)
    answered = [0]

    async def client(session: aiohttp.ClientSession, number: int) -> list[Answer]:
        answers = []
        for i in range(per_client):
            value = f"c{number}-{i}"
            body = {"partition_id": 0, "value": {"type": "STRING", "data": value}}
            async with session.post(url, json=body) as response:
                text = await response.text()
                assert response.status == 200, text
                answers.append((value, int((await response.json())["offset"])))
            answered[0] += 1
            on_answer(answered[0])
        return answers

    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(auth=auth, timeout=timeout) as session:
        return list(await asyncio.gather(*(client(session, n) for n in range(CLIENTS))))


def stored_values(stack: GatewayStack, topic: str, count: int) -> dict[int, str]:
    """Offset -> value of every record in partition 0, read with confluent-kafka straight from
    the broker (what is stored, whatever the gateway's own connections went through)."""
    assert stack.broker is not None
    consumer = Consumer(
        {
            "bootstrap.servers": stack.broker.bootstrap,
            "group.id": f"read-{topic}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(ACME.fleet(topic), 0, 0)])
    found: dict[int, str] = {}
    try:

        def read(wait_s: float) -> int:
            for message in consumer.consume(500, wait_s):
                assert message.error() is None, message.error()
                offset, value = message.offset(), message.value()
                assert offset is not None and value is not None
                assert offset not in found, f"offset {offset} read twice"
                found[offset] = value.decode()
            return len(found)

        wait_until(lambda: read(0.5) >= count, what=f"{count} records read")
        read(1.0)  # nothing beyond what was answered: a duplicate would sit after the last one
    finally:
        consumer.close()
    return found


def check_run(stack: GatewayStack, topic: str, answers: list[list[Answer]]) -> None:
    total = sum(len(a) for a in answers)
    for per_client in answers:
        offsets = [offset for _, offset in per_client]
        assert offsets == sorted(set(offsets)), f"offsets not increasing in ack order: {offsets}"
    by_offset = {offset: value for per_client in answers for value, offset in per_client}
    assert sorted(by_offset) == list(range(total)), "offsets answered are not 0..n-1, each once"
    assert stored_values(stack, topic, total) == by_offset  # each record once, where answered
    assert stack.broker is not None
    headers = batch_headers(stack.broker.bootstrap, FleetPartition(ACME.fleet(topic), 0))
    assert sum(h.records_count for h in headers) == total
    assert all(h.producer_id >= 0 for h in headers), "a batch without a producer id"
    for before, after in itertools.pairwise(headers):
        if after.producer_id == before.producer_id:
            assert after.base_sequence == before.base_sequence + before.records_count
    assert max(h.records_count for h in headers) > 1, "concurrent requests never shared a batch"


def test_concurrent_single_record_produces_are_answered_once_in_order(
    stack: GatewayStack, acme: TenantHttp
) -> None:
    acme.create_topic("pipeline")
    answers = asyncio.run(produce_all(stack, acme, "pipeline", per_client=30))
    check_run(stack, "pipeline", answers)


@pytest.mark.slow
def test_a_broker_restart_mid_run_loses_and_duplicates_nothing(
    stack: GatewayStack, acme: TenantHttp
) -> None:
    acme.create_topic("pipeline-restart")
    broker = stack.broker
    assert broker is not None
    answered = [0]
    outcome: list[list[list[Answer]] | BaseException] = []

    def on_answer(count: int) -> None:
        answered[0] = count

    def clients() -> None:
        try:
            run = produce_all(stack, acme, "pipeline-restart", 40, on_answer)
            outcome.append(asyncio.run(run))
        except BaseException as exc:
            outcome.append(exc)

    # The clients run on a thread; the broker restarts from this one (a broker started from a
    # thread that ends is stopped with it).
    producing = threading.Thread(target=clients, name="http-clients")
    producing.start()
    try:
        wait_until(lambda: answered[0] >= 150 or outcome, what="150 records answered")
        assert not outcome, "the clients ended before the restart"
        broker.restart()  # mid-run, with every client still producing
    finally:
        producing.join(180)
    assert not producing.is_alive()
    (answers,) = outcome
    if isinstance(answers, BaseException):
        raise answers
    check_run(stack, "pipeline-restart", answers)


def test_a_record_the_broker_refuses_fails_alone_in_a_pipelined_stream(
    stack: GatewayStack, acme: TenantHttp
) -> None:
    """Records over the topic's max.message.bytes sit among others in a stream: their batch is
    refused, the batches in flight behind it are refused out of sequence, and recovery answers
    each big record with an error and every other one once, in order, under the same producer."""
    topic = "pipeline-refused"
    created = acme.post(
        acme.cluster + "/topics",
        {
            "topic_name": topic,
            "partitions_count": 1,
            "configs": [{"name": "max.message.bytes", "value": "2000"}],
        },
    )
    assert created.status_code == 201, created.text
    big = {100, 200}
    lines = [
        json.dumps(
            {
                "partition_id": 0,
                "value": {"type": "STRING", "data": ("x" * 4000) if i in big else f"r{i}"},
            }
        ).encode()
        + b"\n"
        for i in range(300)
    ]
    pieces = [b"".join(lines[i : i + 25]) for i in range(0, len(lines), 25)]
    answer = acme.session.post(
        f"{acme.base}{acme.cluster}/topics/{topic}/records",
        data=iter(pieces),
        headers={"Content-Type": "application/json"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    results = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
    assert len(results) == 300
    assert [i for i, r in enumerate(results) if r["error_code"] != 200] == sorted(big)
    ok = [(i, r["offset"]) for i, r in enumerate(results) if r["error_code"] == 200]
    assert [offset for _, offset in ok] == list(range(298)), "offsets not 0..297 in order"
    stored = stored_values(stack, topic, 298)
    assert stored == {offset: f"r{i}" for i, offset in ok}
    assert stack.broker is not None
    headers = batch_headers(stack.broker.bootstrap, FleetPartition(ACME.fleet(topic), 0))
    assert len({h.producer_id for h in headers}) == 1, "a refused record reset the producer id"
    for before, after in itertools.pairwise(headers):
        assert after.base_sequence == before.base_sequence + before.records_count


def test_a_plain_stream_over_partitions_is_answered_where_each_record_landed(
    stack: GatewayStack, acme: TenantHttp
) -> None:
    """Value-only records (the columns path, `stream_columns`), some with a partition and most
    left to the partitioner, over three partitions and cut across chunks: each answer names the
    partition and offset where that record is stored, in the records' order."""
    topic = "plain-columns"
    acme.create_topic(topic, 3)
    records = [
        {"value": {"type": "BINARY", "data": base64.b64encode(f"v{i}".encode()).decode()}}
        | ({"partition_id": 2} if i % 7 == 0 else {})
        for i in range(600)
    ]
    stream = b"".join(json.dumps(record).encode() + b"\n" for record in records)
    answer = acme.session.post(
        f"{acme.base}{acme.cluster}/topics/{topic}/records",
        data=iter([stream[i : i + 9000] for i in range(0, len(stream), 9000)]),
        headers={"Content-Type": "application/json"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    results = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
    assert [r["error_code"] for r in results] == [200] * 600
    assert all(r["partition_id"] == 2 for r in results[::7])
    assert {r["partition_id"] for r in results} == {0, 1, 2}
    assert all(
        r["value"] == {"type": "BINARY", "size": len(f"v{i}")} for i, r in enumerate(results)
    )
    answered = {(r["partition_id"], r["offset"]): f"v{i}" for i, r in enumerate(results)}
    assert len(answered) == 600, "two records answered at one place"
    assert stored_everywhere(stack, topic, 3, 600) == answered


def stored_everywhere(
    stack: GatewayStack, topic: str, partitions: int, count: int
) -> dict[tuple[int, int], str]:
    """Every record of the tenant topic's partitions, by (partition, offset)."""
    assert stack.broker is not None
    consumer = Consumer(
        {
            "bootstrap.servers": stack.broker.bootstrap,
            "group.id": f"read-all-{topic}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(ACME.fleet(topic), p, 0) for p in range(partitions)])
    found: dict[tuple[int, int], str] = {}
    try:

        def read() -> int:
            for message in consumer.consume(500, 0.5):
                assert message.error() is None, message.error()
                partition, offset, value = message.partition(), message.offset(), message.value()
                assert partition is not None and offset is not None and value is not None
                found[(partition, offset)] = value.decode()
            return len(found)

        wait_until(lambda: read() >= count, what=f"{count} records read")
    finally:
        consumer.close()
    return found
