"""The broker's fixed CPU cost per Produce request, measured in-process, without sockets or clients.

Owns: driving a real standalone broker's `Dispatcher` (the routes, metrics and log the listener
serves; data in a temporary directory) with Produce frames as the Java producer sends them on
issue 25's 100 B row: one topic, one partition, one uncompressed batch of `--records` records of
`--size` bytes per request, Produce v`--version` (12: Kafka 4.1's producer without transactions),
acks=`--acks`; `--idempotent`: batches of one producer id with consecutive sequences (the Java
producer's default since Kafka 3.0), so the producer-state check and update run too. Once set up
it settles the heap as `pier broker` does (`loop_health.settle_heap`; `--no-settle` keeps the
collector's defaults, as this bench did before 2026-11-29). It reports the event-loop thread's
CPU time per request (`time.thread_time`, so other processes on the machine move it far less
than wall time), median and spread over blocks: decode, validation, offset assignment, the
segment write (a real `writev`), index entries, metrics and the response encoding — everything
but the socket system calls. Used for
before/after on the produce path (`--pythonpath DIR` runs an earlier checkout's broker code:
docs/benchmarks.md).

    .venv/bin/python -m infra.bench.produce_request_cost [--requests 4000] [--blocks 5]
        [--records 148] [--size 100] [--acks 1] [--version 12] [--idempotent]
        [--no-settle] [--pythonpath DIR]

Blocking; single-threaded (one asyncio loop); the directory is removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def produce_frame(version: int, acks: int, topic: str, batch: bytes, correlation_id: int) -> bytes:
    """A Produce request frame body (no size prefix): header v2 (v9+) or v1, then the body."""
    from brokers.wire.entities import request_module
    from brokers.wire.messages import encode_entity

    module = request_module(0, version)
    fields: dict[str, Any] = {"index": 0, "records": batch}
    data = module.PartitionProduceData(**fields)
    topic_data = module.TopicProduceData(name=topic, partition_data=(data,))
    import datetime

    request = module.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(topic_data,),
    )
    client = b"producer-1"
    header = struct.pack(">hhih", 0, version, correlation_id, len(client)) + client
    if version >= 9:
        header += b"\x00"  # no tagged fields
    return header + encode_entity(request)


def measure(
    requests: int,
    blocks: int,
    records: int,
    size: int,
    acks: int,
    version: int,
    idempotent: bool = False,
    settle: bool = True,
) -> Any:
    from prometheus_client import CollectorRegistry

    from brokers.app.standalone import build_standalone
    from brokers.common.config import BrokerConfig
    from brokers.records.builder import simple_batch
    from brokers.server.dispatcher import Dispatcher, Peer
    from brokers.server.metrics import ServerMetrics

    root = Path(tempfile.mkdtemp(prefix="produce-cost-"))
    broker = build_standalone(BrokerConfig(data_dir=root / "data", port=0, properties={}))
    broker.log_manager.startup()
    broker.replicas.startup()
    broker.topics.load()
    try:
        broker.topics.create_topic("cost", 1, 1, {})
        dispatcher = Dispatcher(broker.routes, ServerMetrics(CollectorRegistry()))
        peer = Peer("127.0.0.1", "cost-1")
        now = int(time.time() * 1000)
        warm_up = min(requests, 500)
        # Idempotent: one batch per request sent, each with the next sequence (built up front).
        distinct = warm_up + (requests // blocks) * blocks if idempotent else 64
        frames = []
        for i in range(distinct):
            batch = simple_batch(
                [b"x" * size] * records,
                timestamps=[now] * records,
                producer_id=1000 if idempotent else -1,
                producer_epoch=0 if idempotent else -1,
                base_sequence=i * records if idempotent else -1,
            )
            frames.append(memoryview(produce_frame(version, acks, "cost", batch, i)))
        sent = 0
        if settle:  # as `pier broker` does once started: start-up state frozen, rarer collections
            from brokers.server.loop_health import settle_heap

            settle_heap()

        async def run(count: int) -> float:
            nonlocal sent
            started = time.thread_time()
            for _ in range(count):
                reply = await dispatcher.dispatch(frames[sent % len(frames)], peer)
                sent += 1
                assert reply is not None
            return (time.thread_time() - started) / count

        async def all_blocks() -> list[float]:
            await run(warm_up)  # warm-up: caches, first segment writes
            return [await run(requests // blocks) for _ in range(blocks)]

        per_request = asyncio.run(all_blocks())
        end = broker.replicas.get("cost", 0).log.log_end_offset
        if end != sent * records:  # every request appended: none refused, none a duplicate
            raise SystemExit(f"{end} records appended, {sent * records} sent")
    finally:
        broker.log_manager.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    us = [round(s * 1e6, 1) for s in per_request]
    return {
        "cpu_us_per_request": statistics.median(us),
        "blocks_us": us,
        "records": records,
        "size": size,
        "acks": acks,
        "version": version,
        "idempotent": idempotent,
        "settled_heap": settle,
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--records", type=int, default=148)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--acks", type=int, default=1, choices=(-1, 1))
    parser.add_argument("--version", type=int, default=12, choices=range(3, 13))
    parser.add_argument("--idempotent", action="store_true", help="one producer, sequences")
    parser.add_argument(
        "--no-settle", action="store_true", help="keep the collector's defaults (no settle_heap)"
    )
    parser.add_argument("--pythonpath", type=Path, help="import the broker from this checkout")
    args = parser.parse_args(argv)
    if args.pythonpath is not None:
        sys.path.insert(0, str(args.pythonpath))
        for name in [m for m in sys.modules if m == "brokers" or m.startswith("brokers.")]:
            del sys.modules[name]
    found = measure(
        args.requests,
        args.blocks,
        args.records,
        args.size,
        args.acks,
        args.version,
        args.idempotent,
        not args.no_settle,
    )
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
