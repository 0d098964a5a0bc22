"""Compression bombs beside a well-behaved producer: what one client's bombs cost everyone else.

Usage: `python infra/bench/bomb.py [--records N] [--bombs N] [--seconds S] [--output PATH]`.
Starts one broker (`infra.stack.start_broker`, default settings) in a temporary directory and
creates three one-partition topics: `bomb-compacted` (cleanup.policy=compact: every record's key
is checked), `bomb-recode` (compression.type=uncompressed: re-encoding; the result cannot fit
max.message.bytes) and `neighbour`. Then:
1. baseline: the neighbour alone for `--seconds` (one 100 B record every 5 ms, confluent-kafka,
   acks=1, linger.ms=0; latency = delivery report − send);
2. bombs: the neighbour goes on while a raw connection sends bombs to each bomb topic in turn, at
   least `--bombs` to each and for at least `--seconds`: one zstd batch of `--records`
   (1,000,000) tiny keyed records, ~0.7 MiB compressed, ~10 MiB decompressed. Per bomb topic:
   count, error codes, mean and max round trip;
3. the broker's peak RSS (VmHWM).
Prints one JSON document and writes it to `results/bomb.json` (or `--output`). The pieces
(`bomb_batch`, `Neighbour`, `produce_raw`) are reused by tests/e2e/test_compression_bomb.py.
Blocking; the neighbour runs on its own thread.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import socket
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records, i16, i32, i32Timedelta

from brokers.records.batch import BatchHeader
from brokers.records.builder import reseal
from brokers.records.compression import ZSTD, compress
from infra.bench.latency import percentile
from infra.probes import recv_exactly
from infra.stack import start_broker

RESULTS = Path(__file__).resolve().parent / "results"
TOPICS = {
    "bomb-compacted": {"cleanup.policy": "compact"},
    "bomb-recode": {"compression.type": "uncompressed"},
    "neighbour": {},
}
NEIGHBOUR_INTERVAL_S = 0.005
_SIZE = struct.Struct(">i")


def bomb_records(count: int) -> bytes:
    """`count` records keyed b"k" with empty values, offset deltas 0..count-1 (~10 B each)."""
    out = bytearray()
    for i in range(count):
        raw = i << 1  # zigzag of a non-negative offset delta
        delta = bytearray()
        while raw >= 0x80:
            delta.append((raw & 0x7F) | 0x80)
            raw >>= 7
        delta.append(raw)
        body = b"\x00\x00" + delta + b"\x02k\x00\x00"  # attrs, ts delta, delta, key, value, hdrs
        out.append(len(body) << 1)
        out += body
    return bytes(out)


def bomb_batch(count: int, now_ms: int, codec: int = ZSTD) -> bytes:
    """One v2 batch of `count` tiny records under `codec`, CreateTime `now_ms`, valid CRC."""
    header = BatchHeader(0, 0, -1, 2, 0, 0, count - 1, now_ms, now_ms, -1, -1, -1, count)
    return reseal(
        header, compress(codec, bomb_records(count)), compression=codec, max_timestamp=now_ms
    )


def produce_raw(
    sock: socket.socket, topic: str, batch: bytes, correlation_id: int
) -> tuple[int, int]:
    """Produce v9 (acks=1) of one batch to partition 0 over `sock`; (error code, base offset)."""
    data = PartitionProduceData(index=i32(0), records=Records(batch))
    request = ProduceRequest(
        acks=i16(1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
        topic_data=(TopicProduceData(name=TopicName(topic), partition_data=(data,)),),
    )
    header = RequestHeader(
        request_api_key=i16(0), request_api_version=i16(9), correlation_id=i32(correlation_id),
        client_id="pier-bench-bomb",
    )  # fmt: skip
    payload = io.BytesIO()
    entity_writer(RequestHeader)(payload, header)
    entity_writer(ProduceRequest)(payload, request)
    sock.sendall(_SIZE.pack(len(payload.getvalue())) + payload.getvalue())
    (size,) = _SIZE.unpack(recv_exactly(sock, 4))
    frame = recv_exactly(sock, size)
    response_header, offset = entity_reader(ProduceResponse.__header_schema__)(frame, 0)
    response, _ = entity_reader(ProduceResponse)(frame, offset)
    assert response_header.correlation_id == correlation_id
    partition = response.responses[0].partition_responses[0]
    return int(partition.error_code), int(partition.base_offset)


class Neighbour:
    """A well-behaved producer: one 100 B record every NEIGHBOUR_INTERVAL_S, acks=1, no linger;
    keeps each record's delivery latency (ms). Use as a context manager; `mark()` splits phases.
    Pacing sleeps are the workload (a steady rate), not a wait for state."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": 1,
                "linger.ms": 0,
                "message.timeout.ms": 60_000,
            }
        )
        self._topic = topic
        self.latencies_ms: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="neighbour", daemon=True)

    def __enter__(self) -> Neighbour:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(120)

    def mark(self) -> int:
        return len(self.latencies_ms)

    def _run(self) -> None:
        next_send = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_send:
                self._producer.produce(self._topic, b"n" * 100, on_delivery=self._reporter())
                next_send += NEIGHBOUR_INTERVAL_S
            self._producer.poll(max(0.0, next_send - time.monotonic()))
        self._producer.flush(60)

    def _reporter(self) -> Callable[[KafkaError | None, object], None]:
        sent = time.perf_counter()

        def done(error: KafkaError | None, _message: object) -> None:
            if error is not None:
                self.failures += 1
                return
            self.latencies_ms.append((time.perf_counter() - sent) * 1000)

        return done


def summary(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    if not ordered:
        return {"records": 0}
    return {
        "records": len(ordered),
        "p50_ms": round(percentile(ordered, 0.5), 2),
        "p99_ms": round(percentile(ordered, 0.99), 2),
        "max_ms": round(ordered[-1], 2),
    }


def create_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(name, 1, 1, config=config) for name, config in TOPICS.items()]
    for future in admin.create_topics(new, operation_timeout=30).values():
        future.result(timeout=30)


def bomb_phase(host: str, port: int, batch: bytes, bombs: int, seconds: float) -> list[Any]:
    """Bombs to each bomb topic in turn: at least `bombs` each and for at least `seconds`."""
    answers: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    with socket.create_connection((host, port), timeout=120) as sock:
        while len(answers) < 2 * bombs or time.monotonic() < deadline:
            topic = ("bomb-compacted", "bomb-recode")[len(answers) % 2]
            start = time.perf_counter()
            code, _ = produce_raw(sock, topic, batch, len(answers) + 1)
            took = time.perf_counter() - start
            answers.append({"topic": topic, "error_code": code, "seconds": round(took, 3)})
            print(f"bomb {len(answers)} -> {topic}: error {code} in {took:.2f}s", file=sys.stderr)
    return answers


def bomb_summary(answers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    by_topic: dict[str, Any] = {}
    for topic in ("bomb-compacted", "bomb-recode"):
        mine = [a for a in answers if a["topic"] == topic]
        by_topic[topic] = {
            "count": len(mine),
            "error_codes": sorted({a["error_code"] for a in mine}),
            "max_seconds": max(a["seconds"] for a in mine),
            "mean_seconds": round(sum(a["seconds"] for a in mine) / len(mine), 3),
        }
    return by_topic


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no VmHWM for pid {pid}")


def run(records: int, bombs: int, seconds: float) -> dict[str, Any]:
    """Baseline for `seconds`, then bombs for at least `seconds` (and `bombs` per topic)."""
    batch = bomb_batch(records, int(time.time() * 1000))
    with tempfile.TemporaryDirectory(prefix="pier-bench-bomb-") as scratch:
        broker = start_broker(Path(scratch) / "data")
        try:
            create_topics(broker.bootstrap)
            with Neighbour(broker.bootstrap, "neighbour") as neighbour:
                time.sleep(seconds)  # the baseline phase: the neighbour alone
                split = neighbour.mark()
                answers = bomb_phase(broker.host, broker.port, batch, bombs, seconds)
            peak = peak_rss_mib(broker.pid)
        finally:
            broker.stop()
    return {
        "benchmark": "bomb",
        "bomb": {"records": records, "compressed_bytes": len(batch), "codec": "zstd"},
        "neighbour_alone": summary(neighbour.latencies_ms[:split]),
        "neighbour_under_bombs": summary(neighbour.latencies_ms[split:]),
        "neighbour_failures": neighbour.failures,
        "bombs": bomb_summary(answers),
        "broker_peak_rss_mib": peak,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=1_000_000, help="records per bomb")
    parser.add_argument("--bombs", type=int, default=3, help="at least this many per bomb topic")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each phase (min)")
    parser.add_argument("--output", type=Path, default=RESULTS / "bomb.json")
    args = parser.parse_args(argv)
    doc = run(args.records, args.bombs, args.seconds)
    text = json.dumps(doc, indent=2)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
