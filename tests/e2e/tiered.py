"""Helpers of the tiered-storage tests (KIP-405): a broker with the remote tier on, the topic
settings that make segments leave local disk at once, ListOffsets with the tiered specs (-4, -5)
over the raw wire, and reading a whole partition with confluent-kafka and kafka-python."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from kafka import KafkaConsumer
from kafka.structs import TopicPartition as KpTopicPartition
from kio.schema.list_offsets.v9 import request as list_offsets_req
from kio.schema.list_offsets.v9.response import ListOffsetsResponse

from infra import process as proc
from infra.broker import BrokerProcess
from infra.probes import free_port, http_ok
from tests.e2e.client_drivers import produce_with_backpressure
from tests.e2e.kafka_admin import read_partitions
from tests.e2e.raw_wire import RawConnection
from tests.e2e.request_fuzz import plain_entity

EARLIEST, EARLIEST_LOCAL, LATEST_TIERED, LATEST = -2, -4, -5, -1
SEGMENT_BYTES = 1 << 20  # Kafka 4.0's smallest segment.bytes
VALUE = b"v" * 1000


def tiered_broker_config(remote_dir: Path, **extra: str) -> dict[str, str]:
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": "200",
        "remote.log.metadata.topic.num.partitions": "1",
        "rsm.config.dir": str(remote_dir),
        "log.retention.check.interval.ms": "200",
        **extra,
    }


# Closed segments leave local disk as soon as they are copied (1 ms old is past local retention).
TIERED_TOPIC = {
    "remote.storage.enable": "true",
    "local.retention.ms": "1",
    "segment.bytes": str(SEGMENT_BYTES),
}


def produce(
    bootstrap: str, topic: str, count: int, *, first: int = 0, stamped_from: int = 0
) -> None:
    """`count` records numbered from `first` (value = number + padding), acks=all; with
    `stamped_from` (ms), record n has timestamp stamped_from + n seconds (else now)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for number in range(first, first + count):
        produce_with_backpressure(
            producer, topic=topic, partition=0, value=b"%08d" % number + VALUE,
            timestamp=stamped_from + number * 1000 if stamped_from else 0,
        )  # fmt: skip
    assert producer.flush(60) == 0


def list_offset(host: str, port: int, topic: str, spec: int) -> int:
    """ListOffsets v9 for partition 0 with `spec` (-1, -2, -4, -5); asserts no error."""

    def build(cls: Any, **fields: Any) -> Any:
        return dataclasses.replace(plain_entity(cls), **fields)

    partition = build(list_offsets_req.ListOffsetsPartition, partition_index=0, timestamp=spec)
    partition = dataclasses.replace(partition, current_leader_epoch=-1)
    request = build(
        list_offsets_req.ListOffsetsRequest,
        replica_id=-1,
        isolation_level=0,
        topics=(build(list_offsets_req.ListOffsetsTopic, name=topic, partitions=(partition,)),),
    )
    with RawConnection(host, port) as connection:
        response = connection.call(request, ListOffsetsResponse)
    answer = response.topics[0].partitions[0]
    assert answer.error_code == 0, f"ListOffsets {spec}: error {answer.error_code}"
    return int(answer.offset)


def numbers_confluent(bootstrap: str, topic: str, start: int = 0, **extra: Any) -> list[int]:
    """Every record's number, from `start`, with confluent-kafka (librdkafka)."""
    records = read_partitions(bootstrap, topic, {0: start}, timeout=60, **extra)
    return [int(r.value[:8]) for r in records if r.value is not None]


def numbers_kafka_python(bootstrap: str, topic: str, end: int) -> list[int]:
    """Every record's number from offset 0 up to `end`, with kafka-python."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=20_000
    )
    try:
        partition = KpTopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        found: list[int] = []
        for message in consumer:
            found.append(int(message.value[:8]))
            if message.offset + 1 >= end:
                break
        return found
    finally:
        consumer.close()


def remote_objects(remote_dir: Path, topic: str, suffix: str) -> list[Path]:
    return sorted((remote_dir / f"{topic}-0").glob(f"*.{suffix}"))


def local_segments(data_dir: Path, topic: str) -> list[int]:
    return sorted(int(p.stem) for p in (data_dir / f"{topic}-0").glob("*.log"))


def configs(**values: str) -> Mapping[str, str]:
    return {**TIERED_TOPIC, **values}


MOTO_READY_S = 60.0


@dataclasses.dataclass
class S3Server:
    """moto's S3-compatible server (`moto_server`, PyPI moto[server]) as a separate process."""

    host: str
    port: int
    process: subprocess.Popen[bytes]

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def client(self) -> Any:
        import boto3  # type: ignore[import-untyped]

        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name="us-east-1",
            aws_access_key_id="pier-test", aws_secret_access_key="pier-test-secret",
        )  # fmt: skip

    def keys(self, bucket: str, prefix: str) -> list[str]:
        answer = self.client().list_objects_v2(Bucket=bucket, Prefix=prefix)
        return sorted(item["Key"] for item in answer.get("Contents", []))

    def stop(self) -> None:
        proc.terminate(self.process, 10)


def start_s3_server(log_path: Path, host: str = "127.0.0.1", port: int | None = None) -> S3Server:
    """moto's server on `port` (a free one by default), empty: it keeps nothing across runs."""
    port = free_port(host) if port is None else port
    program = Path(sys.executable).with_name("moto_server")
    process = proc.spawn([str(program), "-H", host, "-p", str(port)], log_path)
    server = S3Server(host, port, process)
    try:
        proc.wait_ready(
            process, lambda: http_ok(host, port, "/moto-api/"), timeout=MOTO_READY_S,
            name="moto_server", log_path=log_path,
        )  # fmt: skip
    except BaseException:
        proc.kill(process)
        raise
    return server


def s3_broker_config(server: S3Server, bucket: str, **extra: str) -> dict[str, str]:
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": "200",
        "remote.log.metadata.topic.num.partitions": "1",
        "remote.log.storage.manager.class.name": "S3RemoteStorageManager",
        "rsm.config.s3.endpoint": server.endpoint,
        "rsm.config.s3.bucket": bucket,
        "rsm.config.s3.region": "us-east-1",
        "rsm.config.s3.access.key": "pier-test",
        "rsm.config.s3.secret.key": "pier-test-secret",
        "log.retention.check.interval.ms": "200",
        **extra,
    }


def metric(broker: BrokerProcess, name: str, topic: str) -> float:
    """A broker metric summed over its series of `topic` (Prometheus text format)."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in topic_series(broker, topic, name))


def topic_series(broker: BrokerProcess, topic: str, name: str = "") -> list[str]:
    """The broker's `kafka_server_brokertopicmetrics_<name>...` series lines of `topic`."""
    assert broker.metrics_port is not None
    url = f"http://{broker.host}:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    head = f"kafka_server_brokertopicmetrics_{name}"
    return [
        line
        for line in text.splitlines()
        if line.startswith(head) and not line.startswith("#") and f'topic="{topic}"' in line
    ]
