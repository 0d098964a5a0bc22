"""Tenant HTTP API benchmark: HTTP produce and consume next to the Kafka path, in the same run.

Usage: `python -m infra.bench.http_api [--quick] [--records N] [--out DIR]` from the repository root.
Starts one broker (`infra.stack.start_broker`), a SQLite tenant store with one tenant `bench` (no
quotas) and `pier gateway` with its HTTP API (`http.port`) in a temporary directory. Then, on
topics of one partition, with 100-byte values:
1. HTTP single produce: one JSON record per request (BINARY value), `CONCURRENCY` requests in
   flight over keep-alive connections (aiohttp), records/s; then the same with a lean client
   (`produce_single_raw_client_records_s`: pre-encoded requests on `CONCURRENCY` keep-alive
   connections, one in flight on each, as wrk sends them), whose own Python costs a third of
   aiohttp's client, so the figure is the gateway's rather than the client's;
2. HTTP streaming produce: the same records as one chunked request of JSON lines (encoded
   before the clock starts), records/s;
3. HTTP consume: a v2 consumer instance (binary format) assigned the partition, long polls of up
   to 1 MiB until every record is read, records/s;
4. the Kafka path through the same gateway (confluent-kafka, SASL/PLAIN): produce (batched,
   lz4 off) and consume of the same count, records/s;
5. single-record produce latency, one request at a time: HTTP (one POST) and Kafka (produce +
   flush), p50/p99/p99.9 in ms.
Each HTTP produce phase also reports the CPU time the gateway and the broker spent on it per
record (`cpu_us_per_record`, from /proc: user + system of the process): on a shared machine a
rate depends on the neighbours, CPU per record much less (compare those across runs). Prints one
JSON document and writes `<out>/http.json`. Every process started is stopped on exit.
Runs on the main thread (asyncio for the HTTP client).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
from confluent_kafka import Consumer, Producer, TopicPartition

from infra.gateway import GatewayProcess, start_gateway
from infra.probes import free_port
from infra.stack import BrokerProcess, start_broker
from tenancy.domain import DEFAULT_ENTITY, QuotaEntity
from tenancy.quota_chain import QUOTA_NAMES
from tenancy.store import TenantStore

OPERATOR = "bench-http"
VALUE_BYTES = 100
CONCURRENCY = 16
RESULTS = Path(__file__).parent / "results"


def prepare(db_url: str) -> tuple[str, str]:
    with TenantStore.open(db_url) as store:
        store.upgrade()
        store.create_tenant(  # open: the bench's key may use its topics without ACLs
            display_name="bench",
            plan="free",
            tenant_id="bench",
            authorization="open",
            actor=OPERATOR,
        )
        no_quotas = dict.fromkeys(QUOTA_NAMES, None)
        store.set_quotas("bench", QuotaEntity(DEFAULT_ENTITY, None), no_quotas, actor=OPERATOR)
        account = store.create_service_account("bench", name="bench", actor=OPERATOR)
        key, secret = store.create_api_key("bench", service_account_id=account.id, actor=OPERATOR)
        return key.key_id, str(secret)


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (its threads included), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU per record of the named processes over one phase."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.results: dict[str, dict[str, float]] = {}

    def start(self) -> dict[str, float]:
        return {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def stop(self, phase: str, started: dict[str, float], records: int) -> None:
        self.results[phase] = {
            name: round((cpu_seconds(pid) - started[name]) * 1e6 / records, 1)
            for name, pid in self.pids.items()
        }


def record_json(i: int) -> bytes:
    value = base64.b64encode(i.to_bytes(8, "big") + b"v" * (VALUE_BYTES - 8)).decode()
    return json.dumps({"partition_id": 0, "value": {"type": "BINARY", "data": value}}).encode()


class Http:
    def __init__(self, base: str, key: str, secret: str) -> None:
        self.base = base
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=CONCURRENCY * 2),
            headers={
                "User-Agent": "pier-bench-http",
                "Authorization": "Basic " + base64.b64encode(f"{key}:{secret}".encode()).decode(),
            },
        )
        self.cluster = ""

    async def start(self) -> None:
        async with self.session.get(self.base + "/v3/clusters") as answer:
            self.cluster = (await answer.json())["data"][0]["cluster_id"]

    def records_url(self, topic: str) -> str:
        return f"{self.base}/v3/clusters/{self.cluster}/topics/{topic}/records"

    async def create_topic(self, topic: str) -> None:
        body = {"topic_name": topic, "partitions_count": 1}
        async with self.session.post(
            f"{self.base}/v3/clusters/{self.cluster}/topics", json=body
        ) as answer:
            assert answer.status == 201, await answer.text()

    async def produce_one(self, topic: str, body: bytes) -> None:
        headers = {"Content-Type": "application/json"}
        async with self.session.post(self.records_url(topic), data=body, headers=headers) as answer:
            if answer.status != 200:
                raise RuntimeError(f"produce answered {answer.status}: {await answer.text()}")
            await answer.read()


async def http_single(http: Http, topic: str, count: int) -> float:
    bodies = [record_json(i) for i in range(count)]
    queue = iter(bodies)

    async def worker() -> None:
        for body in queue:
            await http.produce_one(topic, body)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return count / (time.perf_counter() - started)


class _KeptAlive(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection sending pre-encoded requests one at a time (as wrk
    does): the bench's client side of `http_single_raw`, ≈ 40 µs of Python per request where
    aiohttp's client takes ≈ 130, so the gateway, not the client, is what is measured."""

    def __init__(self, requests: Iterator[bytes], done: asyncio.Future[None]) -> None:
        self._requests = requests
        self._done = done
        self._buffer = b""
        self._transport: asyncio.Transport | None = None
        self.answered = 0
        self.failed: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._send()

    def _send(self) -> None:
        assert self._transport is not None
        request = next(self._requests, None)
        if request is None:
            self._transport.close()
        else:
            self._transport.write(request)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while (end := self._buffer.find(b"\r\n\r\n")) >= 0:
            head = self._buffer[:end].lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15 :].split(b"\r\n", 1)[0]) if at >= 0 else 0
            if len(self._buffer) < end + 4 + length:
                return
            if not head.startswith(b"http/1.1 200"):
                self.failed.append(self._buffer[: end + 4 + length])
            self._buffer = self._buffer[end + 4 + length :]
            self.answered += 1
            self._send()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._done.done():
            self._done.set_result(None)


async def http_single_raw(http: Http, port: int, topic: str, count: int) -> float:
    """`http_single` with `_KeptAlive` connections instead of aiohttp's client."""
    path = http.records_url(topic).removeprefix(http.base)
    authorization = http.session.headers["Authorization"]
    prepared = [
        (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: pier-bench-http\r\n"
            f"Authorization: {authorization}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        + body
        for body in (record_json(i) for i in range(count))
    ]
    loop = asyncio.get_running_loop()
    shared = iter(prepared)
    connections: list[tuple[_KeptAlive, asyncio.Future[None]]] = []
    started = time.perf_counter()
    for _ in range(CONCURRENCY):
        done: asyncio.Future[None] = loop.create_future()
        _, protocol = await loop.create_connection(
            functools.partial(_KeptAlive, shared, done), "127.0.0.1", port
        )
        connections.append((protocol, done))
    await asyncio.gather(*(done for _, done in connections))
    elapsed = time.perf_counter() - started
    failed = [answer for protocol, _ in connections for answer in protocol.failed]
    answered = sum(protocol.answered for protocol, _ in connections)
    if failed or answered != count:
        raise RuntimeError(f"raw single: {answered} of {count} answered, {failed[:1]!r}")
    return count / elapsed


async def http_stream(http: Http, topic: str, count: int) -> float:
    records = [record_json(i) + b"\n" for i in range(count)]  # built before the clock starts
    pieces = [b"".join(records[i : i + 500]) for i in range(0, count, 500)]

    async def lines() -> Any:
        for piece in pieces:
            yield piece

    started = time.perf_counter()
    async with http.session.post(
        http.records_url(topic), data=lines(), headers={"Content-Type": "application/json"}
    ) as answer:
        text = await answer.text()
    elapsed = time.perf_counter() - started
    ok = text.count('"error_code":200')
    if ok != count:
        raise RuntimeError(f"stream: {ok} of {count} records produced: {text[-300:]}")
    return count / elapsed


async def http_consume(http: Http, topic: str, count: int) -> float:
    v2 = {"Content-Type": "application/vnd.kafka.v2+json"}
    async with http.session.post(
        f"{http.base}/consumers/bench-http-{topic}",
        json={"format": "binary", "auto.offset.reset": "earliest"},
        headers=v2,
    ) as answer:
        base = (await answer.json())["base_uri"]
    assignment = {"partitions": [{"topic": topic, "partition": 0}]}
    async with http.session.post(base + "/assignments", json=assignment, headers=v2) as answer:
        assert answer.status == 204
    read = 0
    accept = {"Accept": "application/vnd.kafka.binary.v2+json"}
    started = time.perf_counter()
    while read < count:
        async with http.session.get(
            base + "/records?timeout=1000&max_bytes=1048576", headers=accept
        ) as answer:
            read += len(await answer.json())
    elapsed = time.perf_counter() - started
    async with http.session.delete(base):
        pass
    return count / elapsed


async def http_latency(http: Http, topic: str, count: int) -> list[float]:
    samples = []
    for i in range(count):
        body = record_json(i)
        started = time.perf_counter()
        await http.produce_one(topic, body)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def kafka_settings(gateway: GatewayProcess, key: str, secret: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": gateway.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": key,
        "sasl.password": secret,
    }


def kafka_produce(settings: dict[str, Any], topic: str, count: int) -> float:
    producer = Producer({**settings, "linger.ms": 5, "acks": "all"})
    value = b"v" * VALUE_BYTES
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(60) == 0
    return count / (time.perf_counter() - started)


def kafka_consume(settings: dict[str, Any], topic: str, count: int) -> float:
    consumer = Consumer(
        {**settings, "group.id": f"bench-kafka-{topic}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    read = 0
    started = time.perf_counter()
    try:
        while read < count:
            read += sum(1 for m in consumer.consume(1000, 1.0) if m.error() is None)
        return count / (time.perf_counter() - started)
    finally:
        consumer.close()


def kafka_latency(settings: dict[str, Any], topic: str, count: int) -> list[float]:
    producer = Producer({**settings, "linger.ms": 0, "acks": "all"})
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        producer.produce(topic, b"v" * VALUE_BYTES, partition=0)
        assert producer.flush(30) == 0
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {
        "p50_ms": at(0.50),
        "p99_ms": at(0.99),
        "p999_ms": at(0.999),
        "mean_ms": round(statistics.fmean(ordered), 3),
    }


async def http_phases(
    base: str, key: str, secret: str, count: int, latency_count: int, cpu: CpuMeter
) -> dict[str, Any]:
    port = int(base.rsplit(":", 1)[1])
    http = Http(base, key, secret)
    try:
        await http.start()
        for topic in ("http-single", "http-stream", "http-latency"):
            await http.create_topic(topic)
        await http_single(http, "http-latency", 200)  # warm-up
        before = cpu.start()
        single = await http_single(http, "http-single", count)
        cpu.stop("produce_single", before, count)
        before = cpu.start()
        single_raw = await http_single_raw(http, port, "http-single", count)
        cpu.stop("produce_single_raw", before, count)
        before = cpu.start()
        stream = await http_stream(http, "http-stream", count)
        cpu.stop("produce_stream", before, count)
        consume = await http_consume(http, "http-stream", count)
        latency = await http_latency(http, "http-latency", latency_count)
        return {
            "produce_single_records_s": round(single),
            "produce_single_raw_client_records_s": round(single_raw),
            "produce_stream_records_s": round(stream),
            "consume_records_s": round(consume),
            "single_record_produce_latency": percentiles(latency),
            "cpu_us_per_record": cpu.results,
        }
    finally:
        await http.session.close()


def kafka_phases(
    gateway: GatewayProcess, key: str, secret: str, count: int, latency_count: int
) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    settings = kafka_settings(gateway, key, secret)
    admin = AdminClient(settings)
    for future in admin.create_topics(
        [NewTopic(t, 1, 1) for t in ("kafka-bulk", "kafka-latency")]
    ).values():
        future.result(30)
    time.sleep(1.0)  # leaders settle (bench only; tests poll)
    kafka_produce(settings, "kafka-latency", 200)  # warm-up
    produce = kafka_produce(settings, "kafka-bulk", count)
    consume = kafka_consume(settings, "kafka-bulk", count)
    latency = kafka_latency(settings, "kafka-latency", latency_count)
    return {
        "produce_records_s": round(produce),
        "consume_records_s": round(consume),
        "single_record_produce_latency": percentiles(latency),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="5,000 records, 300 latency samples")
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    count = args.records or (5_000 if args.quick else 30_000)
    latency_count = 300 if args.quick else 2_000
    broker: BrokerProcess | None = None
    gateway: GatewayProcess | None = None
    with tempfile.TemporaryDirectory(prefix="pier-bench-http-") as tmp:
        root = Path(tmp)
        db_url = f"sqlite:///{root / 'tenancy.db'}"
        key, secret = prepare(db_url)
        http_port = free_port()
        try:
            broker = start_broker(root / "broker" / "data")
            gateway = start_gateway(
                root / "gateway",
                broker.bootstrap,
                db_url,
                node_ids=[broker.node_id],
                properties={"http.port": str(http_port)},
            )
            base = f"http://127.0.0.1:{http_port}"
            cpu = CpuMeter({"gateway": gateway.pid, "broker": broker.pid})
            http = asyncio.run(http_phases(base, key, secret, count, latency_count, cpu))
            kafka = kafka_phases(gateway, key, secret, count, latency_count)
        finally:
            for process in (gateway, broker):
                if process is not None:
                    process.stop()
    doc = {
        "benchmark": "http",
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "records": count,
        "value_bytes": VALUE_BYTES,
        "http_concurrency": CONCURRENCY,
        "http": http,
        "kafka": kafka,
        "ratios": {
            "http_single_vs_kafka_produce": round(
                http["produce_single_records_s"] / kafka["produce_records_s"], 4
            ),
            "http_stream_vs_kafka_produce": round(
                http["produce_stream_records_s"] / kafka["produce_records_s"], 4
            ),
            "http_vs_kafka_consume": round(
                http["consume_records_s"] / kafka["consume_records_s"], 4
            ),
        },
    }
    text = json.dumps(doc, indent=2)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "http.json").write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
