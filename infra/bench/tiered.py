"""Tiered storage (KIP-405): reading history from the remote tier vs from local disk, and broker
disk held to the local retention while the total grows.

One broker with `remote.log.storage.system.enable=true` and the local-directory store (or, with
`--store s3`, moto's S3-compatible server started here). Two one-partition topics get the same
records (1 KiB values, timestamps spread over the last 24 hours: "a day of history") in rounds:
`local-history` keeps everything on broker disk, `tiered-history` has `remote.storage.enable=true`
and `local.retention.ms=1`, so every closed segment leaves broker disk once copied. After each
round the benchmark records the tiered topic's bytes on broker disk and in the remote store.
Then both topics are read from offset 0 with confluent-kafka (assign), alternately, twice each:
MB/s and the broker's CPU seconds per GB read. Prints one JSON document (also
`infra/bench/results/tiered.json`), with the machine's load average before and after.

    .venv/bin/python infra/bench/tiered.py [--quick] [--store local|s3] [--mib 256]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from brokers.client import ClientConfig
from brokers.client.admin import Admin
from brokers.client.metadata import TopicPartition as ClientTopicPartition
from infra.bench.report import write_json
from infra.probes import free_port, http_ok
from infra.process import kill, spawn, terminate, wait_ready
from infra.stack import BrokerProcess, start_broker

RESULTS = Path(__file__).resolve().parent / "results"
VALUE_BYTES = 1024
SEGMENT_BYTES = 16 << 20
DAY_MS = 86_400_000
ROUNDS = 4
EARLIEST_LOCAL = -4


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def dir_bytes(path: Path, suffix: str = ".log") -> int:
    return (
        sum(p.stat().st_size for p in path.rglob(f"*{suffix}") if p.is_file())
        if path.exists()
        else 0
    )


def produce(bootstrap: str, topics: Sequence[str], first: int, count: int, total: int) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20, "acks": "1"}
    )
    start = int(time.time() * 1000) - DAY_MS
    padding = os.urandom(VALUE_BYTES // 2).hex().encode()[: VALUE_BYTES - 8]
    for number in range(first, first + count):
        value = b"%08d" % number + padding
        timestamp = start + number * DAY_MS // total
        for topic in topics:
            while True:
                try:
                    producer.produce(topic, value, partition=0, timestamp=timestamp)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0


def list_offsets_earliest_local(broker: BrokerProcess, topic: str) -> int:
    """ListOffsets -4 (earliest local, KIP-405) with the project's client."""

    async def ask() -> int:
        async with Admin.for_bootstrap(broker.bootstrap, ClientConfig()) as admin:
            tp = ClientTopicPartition(topic, 0)
            return (await admin.list_offsets({tp: EARLIEST_LOCAL}))[tp].offset

    return asyncio.run(ask())


def wait_tiered(broker: BrokerProcess, topic: str, data_dir: Path, timeout: float = 600) -> None:
    """Until every closed segment left broker disk (the local log starts at the active one)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        bases = sorted(int(p.stem) for p in (data_dir / f"{topic}-0").glob("*.log"))
        if len(bases) == 1 and list_offsets_earliest_local(broker, topic) == bases[0]:
            return
        time.sleep(0.5)
    raise TimeoutError(f"{topic}: closed segments still local after {timeout}s")


def read_all(broker: BrokerProcess, topic: str, end: int) -> dict[str, float]:
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "bench-tiered",
        "enable.auto.commit": False, "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 16_777_216,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    cpu_before, started = cpu_seconds(broker.pid), time.monotonic()
    records = size = 0
    position = 0
    try:
        while position < end:
            for message in consumer.consume(10_000, 1.0):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(str(error))
                records += 1
                size += len(message.value() or b"")
                position = (message.offset() or 0) + 1
    finally:
        consumer.close()
    seconds = time.monotonic() - started
    cpu = cpu_seconds(broker.pid) - cpu_before
    return {
        "records": records, "seconds": round(seconds, 2), "mb_per_s": round(size / seconds / 1e6, 1),
        "broker_cpu_s_per_gb": round(cpu / (size / 1e9), 2),
    }  # fmt: skip


def start_s3(root: Path) -> tuple[Any, dict[str, str]]:
    port = free_port("127.0.0.1")
    log = root / "moto.log"
    process = spawn([str(Path(sys.executable).with_name("moto_server")), "-p", str(port)], log)
    try:
        wait_ready(
            process, lambda: http_ok("127.0.0.1", port, "/moto-api/"), timeout=60,
            name="moto_server", log_path=log,
        )  # fmt: skip
    except BaseException:
        kill(process)
        raise
    return process, {
        "remote.log.storage.manager.class.name": "S3RemoteStorageManager",
        "rsm.config.s3.endpoint": f"http://127.0.0.1:{port}",
        "rsm.config.s3.bucket": "pier-bench", "rsm.config.s3.access.key": "bench",
        "rsm.config.s3.secret.key": "bench-secret",
    }  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="32 MiB instead of --mib")
    parser.add_argument("--mib", type=int, default=256, help="MiB of record values per topic")
    parser.add_argument("--store", choices=("local", "s3"), default="local")
    parser.add_argument("--output", type=Path, default=RESULTS / "tiered.json")
    args = parser.parse_args(argv)
    total = (32 if args.quick else args.mib) * (1 << 20) // VALUE_BYTES
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="pier-bench-tiered-") as tmp:
        root = Path(tmp)
        s3_process, store_config = (None, {}) if args.store == "local" else start_s3(root)
        remote = root / "remote"
        config = {
            "remote.log.storage.system.enable": "true", "rsm.config.dir": str(remote),
            "remote.log.manager.task.interval.ms": "500", "log.retention.check.interval.ms": "500",
            "remote.log.metadata.topic.num.partitions": "1", **store_config,
        }  # fmt: skip
        broker = start_broker(root / "data", config=config)
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            common = {"segment.bytes": str(SEGMENT_BYTES), "retention.ms": "-1"}
            tiered_config = {**common, "remote.storage.enable": "true", "local.retention.ms": "1"}
            futures = admin.create_topics([
                NewTopic("local-history", 1, 1, config=common),
                NewTopic("tiered-history", 1, 1, config=tiered_config),
            ])  # fmt: skip
            for future in futures.values():
                future.result(30)
            disk: list[dict[str, int]] = []
            per_round = total // ROUNDS
            for index in range(ROUNDS):
                produce(
                    broker.bootstrap, ["local-history", "tiered-history"], index * per_round,
                    per_round, total,
                )  # fmt: skip
                wait_tiered(broker, "tiered-history", broker.data_dir)
                disk.append({
                    "records": (index + 1) * per_round,
                    "tiered_topic_broker_disk_mib": dir_bytes(
                        broker.data_dir / "tiered-history-0") >> 20,
                    "tiered_topic_remote_mib": dir_bytes(remote / "tiered-history-0") >> 20
                    if args.store == "local" else -1,
                    "local_topic_broker_disk_mib": dir_bytes(
                        broker.data_dir / "local-history-0") >> 20,
                })  # fmt: skip
                print(f"round {index + 1}: {disk[-1]}", file=sys.stderr)
            end = ROUNDS * per_round
            reads: dict[str, list[dict[str, float]]] = {"local": [], "remote": []}
            for _ in range(2):
                reads["local"].append(read_all(broker, "local-history", end))
                reads["remote"].append(read_all(broker, "tiered-history", end))
                print(f"reads: {reads}", file=sys.stderr)
        finally:
            broker.stop()
            if s3_process is not None:
                terminate(s3_process, 10)
    best = {k: max(v, key=lambda r: r["mb_per_s"]) for k, v in reads.items()}
    doc = {
        "benchmark": "tiered", "store": args.store, "mib_per_topic": total * VALUE_BYTES >> 20,
        "segment_bytes": SEGMENT_BYTES, "reads": reads,
        "remote_to_local_mb_per_s": round(best["remote"]["mb_per_s"] / best["local"]["mb_per_s"], 2),
        "remote_to_local_cpu_per_gb": round(
            best["remote"]["broker_cpu_s_per_gb"] / best["local"]["broker_cpu_s_per_gb"], 2
        ),
        "disk_by_round": disk,
        "environment": {
            "cpus": os.cpu_count(), "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
        },
    }  # fmt: skip
    print(write_json(doc, args.output))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
