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
but the socket system calls. `--codec lz4|zstd|gzip|snappy` compresses each batch as the Java
producer does (its records: `--size` random capital letters, ProducerPerformance's payload; zstd
as zstd-jni's stream writes it, without a content size); such batches past the inline limits are
validated on the produce worker thread, so the process's CPU time per request is reported too
(`process_us_per_request`: loop and workers; other threads of the process are idle). Used for
before/after on the produce path (`--pythonpath DIR` runs an earlier checkout's broker code:
docs/benchmarks.md). `--api offset_commit` measures a one-partition OffsetCommit (v9) instead,
`--api fetch` a one-partition Fetch (v17) answering one new `--size` record.

    .venv/bin/python -m infra.bench.produce_request_cost [--requests 4000] [--blocks 5]
        [--records 148] [--size 100] [--acks 1] [--version 12] [--idempotent]
        [--codec none|gzip|snappy|lz4|zstd] [--no-settle] [--pythonpath DIR] [--api produce|offset_commit|fetch]

Blocking; single-threaded (one asyncio loop); the directory is removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import random
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

OFFSET_COMMIT_KEY = 8
FETCH_KEY = 1


def produce_frame(
    version: int, acks: int, topic: str, batch: bytes, correlation_id: int, partitions: int = 1
) -> bytes:
    """A Produce request frame body (no size prefix): header v2 (v9+) or v1, then the body;
    `batch` for each of the topic's first `partitions` partitions."""
    from brokers.wire.entities import request_module
    from brokers.wire.messages import encode_entity

    module = request_module(0, version)
    data = tuple(module.PartitionProduceData(index=i, records=batch) for i in range(partitions))
    topic_data = module.TopicProduceData(name=topic, partition_data=data)
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


def request_frame(api_key: int, version: int, request: Any, correlation_id: int) -> bytes:
    """Any request's frame body: header v2 for flexible versions, else v1, then the body."""
    from brokers.wire.messages import encode_entity, is_flexible_request

    client = b"consumer-1"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client
    if is_flexible_request(api_key, version):
        header += b"\x00"  # no tagged fields
    return header + encode_entity(request)


@contextlib.contextmanager
def standalone_broker(partitions: int = 1) -> Iterator[Any]:
    """A standalone broker's parts (no listener) with topic `cost` of `partitions` partitions."""
    from brokers.app.standalone import build_standalone
    from brokers.common.config import BrokerConfig

    root = Path(tempfile.mkdtemp(prefix="produce-cost-"))
    broker = build_standalone(BrokerConfig(data_dir=root / "data", port=0, properties={}))
    broker.log_manager.startup()
    broker.replicas.startup()
    broker.topics.load()
    try:
        broker.topics.create_topic("cost", partitions, 1, {})
        yield broker
    finally:
        broker.log_manager.shutdown()
        shutil.rmtree(root, ignore_errors=True)


def _dispatcher(broker: Any) -> Any:
    from prometheus_client import CollectorRegistry

    from brokers.server.dispatcher import Dispatcher
    from brokers.server.metrics import ServerMetrics

    return Dispatcher(broker.routes, ServerMetrics(CollectorRegistry()))


def _settle(settle: bool) -> None:
    if settle:  # as `pier broker` does once started: start-up state frozen, rarer collections
        from brokers.server.loop_health import settle_heap

        settle_heap()


Blocks = list[tuple[float, float]]  # per block: (loop thread, whole process) CPU s per request


async def _blocks(one: Callable[[], Awaitable[float]], requests: int, blocks: int) -> Blocks:
    """CPU seconds per request of each block, the loop thread's and the process's, over the block
    less what `one` (a request) says was preparation (CPU seconds it returns: 0 for prebuilt
    frames)."""
    for _ in range(min(requests, 500)):  # warm-up: caches, first segment writes
        await one()
    found = []
    count = requests // blocks
    for _ in range(blocks):
        started, process, excluded = time.thread_time(), time.process_time(), 0.0
        for _ in range(count):
            excluded += await one()
        loop_s = (time.thread_time() - started - excluded) / count
        found.append((loop_s, (time.process_time() - process - excluded) / count))
    return found


def _summary(per_request: Blocks, **shape: Any) -> dict[str, Any]:
    us = [round(loop_s * 1e6, 1) for loop_s, _ in per_request]
    process_us = [round(process_s * 1e6, 1) for _, process_s in per_request]
    return {
        "cpu_us_per_request": statistics.median(us),
        "blocks_us": us,
        "process_us_per_request": statistics.median(process_us),
        "process_blocks_us": process_us,
        **shape,
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


def java_batch(codec: str, records: int, size: int, now: int, seed: int, **fields: Any) -> bytes:
    """One batch as the Java producer sends ProducerPerformance's records under `codec`: each
    value `size` random capital letters (its payload), compressed at the codec's default level
    (zstd as a stream, without a content size in the frame header, as zstd-jni writes it)."""
    import zstandard

    from brokers.records.batch import HEADER_SIZE, parse_header
    from brokers.records.builder import reseal, simple_batch
    from brokers.records.compression import CODEC_NAMES, ZSTD, compress

    rng = random.Random(seed)
    letters = bytes(range(65, 91))
    values = [bytes(rng.choices(letters, k=size)) for _ in range(records)]
    plain = simple_batch(values, timestamps=[now] * records, **fields)
    codec_id = {name: code for code, name in CODEC_NAMES.items()}[codec]
    if codec_id == 0:
        return plain
    header, body = parse_header(plain, 0), memoryview(plain)[HEADER_SIZE:]
    if codec_id == ZSTD:
        stream = zstandard.ZstdCompressor(level=3).compressobj()
        packed = stream.compress(body) + stream.flush()
    else:
        packed = compress(codec_id, body)
    return reseal(header, packed, compression=codec_id, max_timestamp=header.max_timestamp)


def measure(
    requests: int,
    blocks: int,
    records: int,
    size: int,
    acks: int,
    version: int,
    idempotent: bool = False,
    settle: bool = True,
    codec: str = "none",
    partitions: int = 1,
) -> Any:
    from brokers.records.builder import simple_batch
    from brokers.server.dispatcher import Peer

    with standalone_broker(partitions) as broker:
        dispatcher = _dispatcher(broker)
        peer = Peer("127.0.0.1", "cost-1")
        now = int(time.time() * 1000)
        # Idempotent: one batch per request sent, each with the next sequence (built up front).
        distinct = min(requests, 500) + (requests // blocks) * blocks if idempotent else 64
        frames = []
        for i in range(distinct):
            if codec == "none":  # the values this bench always sent uncompressed
                batch = simple_batch(
                    [b"x" * size] * records,
                    timestamps=[now] * records,
                    producer_id=1000 if idempotent else -1,
                    producer_epoch=0 if idempotent else -1,
                    base_sequence=i * records if idempotent else -1,
                )
            else:
                batch = java_batch(
                    codec,
                    records,
                    size,
                    now,
                    seed=i,
                    producer_id=1000 if idempotent else -1,
                    producer_epoch=0 if idempotent else -1,
                    base_sequence=i * records if idempotent else -1,
                )
            frame = produce_frame(version, acks, "cost", batch, i, partitions)
            frames.append(memoryview(frame))
        sent = 0
        _settle(settle)

        async def one() -> float:
            nonlocal sent
            reply = await dispatcher.dispatch(frames[sent % len(frames)], peer)
            sent += 1
            assert reply is not None
            return 0.0

        per_request = asyncio.run(_blocks(one, requests, blocks))
        for index in range(partitions):
            end = broker.replicas.get("cost", index).log.log_end_offset
            if end != sent * records:  # every request appended: none refused, none a duplicate
                raise SystemExit(
                    f"partition {index}: {end} records appended, {sent * records} sent"
                )
    return _summary(
        per_request,
        api="produce",
        records=records,
        size=size,
        acks=acks,
        version=version,
        idempotent=idempotent,
        codec=codec,
        partitions=partitions,
        batch_bytes=len(frames[0]),
        settled_heap=settle,
    )


def measure_offset_commit(requests: int, blocks: int, version: int, settle: bool = True) -> Any:
    """OffsetCommit of one partition by a consumer outside any generation (a simple commit: the
    coordinator's path without member checks), each request the next offset."""
    from brokers.server.dispatcher import Peer
    from brokers.wire.entities import make, request_module

    module = request_module(OFFSET_COMMIT_KEY, version)
    with standalone_broker() as broker:
        dispatcher = _dispatcher(broker)
        peer = Peer("127.0.0.1", "cost-1")
        sent = 0

        def frame(offset: int) -> memoryview:
            part = make(
                module,
                "OffsetCommitRequestPartition",
                partition_index=0,
                committed_offset=offset,
                committed_leader_epoch=0,
                committed_metadata="",
            )
            topic = make(module, "OffsetCommitRequestTopic", name="cost", partitions=(part,))
            request = make(
                module,
                "OffsetCommitRequest",
                group_id="bench",
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=(topic,),
            )
            return memoryview(request_frame(OFFSET_COMMIT_KEY, version, request, offset))

        async def one() -> float:
            nonlocal sent
            started = time.thread_time()
            request = frame(sent)
            preparation = time.thread_time() - started
            reply = await dispatcher.dispatch(request, peer)
            sent += 1
            assert reply is not None
            return preparation

        async def run() -> Blocks:
            broker.groups.start()
            await broker.groups.loaded()
            _settle(settle)
            found = await _blocks(one, requests, blocks)
            _, [committed] = broker.groups.coordinator.fetch_offsets("bench", [("cost", [0])])
            if committed.value is None or committed.value.offset != sent - 1:
                raise SystemExit(f"committed {committed.value}, expected {sent - 1}")
            await broker.groups.stop()
            return found

        per_request = asyncio.run(run())
    return _summary(per_request, api="offset_commit", version=version, settled_heap=settle)


def measure_fetch(requests: int, blocks: int, size: int, version: int, settle: bool = True) -> Any:
    """A Fetch of the one partition answering the one record appended before it (the append is
    not counted), as a consumer keeping up at a low rate sees. Sessionless, full fetches: Pier
    declines KIP-227 fetch sessions (brokers/handlers/fetch.py), so clients send these."""
    from brokers.records.builder import simple_batch
    from brokers.server.dispatcher import Peer
    from brokers.wire.entities import make, request_module

    module = request_module(FETCH_KEY, version)
    with standalone_broker() as broker:
        dispatcher = _dispatcher(broker)
        peer = Peer("127.0.0.1", "cost-1")
        topic_id = broker.metadata.topic("cost").topic_id
        partition = broker.replicas.get("cost", 0)

        def frame(offset: int) -> memoryview:
            part = make(
                module,
                "FetchPartition",
                partition=0,
                current_leader_epoch=-1,
                fetch_offset=offset,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=1 << 20,
            )
            topic = make(module, "FetchTopic", topic="cost", topic_id=topic_id, partitions=(part,))
            request = make(
                module,
                "FetchRequest",
                replica_id=-1,
                max_wait=datetime.timedelta(milliseconds=500),
                min_bytes=1,
                max_bytes=50 << 20,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,  # no session (FINAL_EPOCH)
                topics=(topic,),
                forgotten_topics_data=(),
                rack_id="",
            )
            return memoryview(request_frame(FETCH_KEY, version, request, offset))

        async def one() -> float:
            started = time.thread_time()
            offset = partition.log.log_end_offset
            partition.append_as_leader(simple_batch([b"x" * size]))
            request = frame(offset)
            preparation = time.thread_time() - started
            reply = await dispatcher.dispatch(request, peer)
            started = time.thread_time()
            first = reply.body.parts[0]
            _throttle, error = struct.unpack_from(">ih", bytes(first[:6]), 0)
            if error != 0 or reply.body.size < size:
                raise SystemExit(f"fetch answered error {error}, {reply.body.size} bytes")
            return preparation + time.thread_time() - started

        async def run() -> Blocks:
            _settle(settle)
            return await _blocks(one, requests, blocks)

        per_request = asyncio.run(run())
    return _summary(per_request, api="fetch", size=size, version=version, settled_heap=settle)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--records", type=int, default=148)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--acks", type=int, default=1, choices=(-1, 1))
    parser.add_argument("--api", default="produce", choices=("produce", "offset_commit", "fetch"))
    parser.add_argument("--version", type=int, help="12 for produce, 9 offset_commit, 17 fetch")
    parser.add_argument("--idempotent", action="store_true", help="one producer, sequences")
    parser.add_argument(
        "--partitions", type=int, default=1, help="partitions a request writes (a batch each)"
    )
    parser.add_argument(
        "--codec",
        default="none",
        choices=("none", "gzip", "snappy", "lz4", "zstd"),
        help="batches compressed as the Java producer sends them (random capital letters)",
    )
    parser.add_argument(
        "--no-settle", action="store_true", help="keep the collector's defaults (no settle_heap)"
    )
    parser.add_argument("--pythonpath", type=Path, help="import the broker from this checkout")
    args = parser.parse_args(argv)
    if args.pythonpath is not None:
        sys.path.insert(0, str(args.pythonpath))
        for name in [m for m in sys.modules if m == "brokers" or m.startswith("brokers.")]:
            del sys.modules[name]
    settle = not args.no_settle
    if args.api == "offset_commit":
        found = measure_offset_commit(args.requests, args.blocks, args.version or 9, settle)
    elif args.api == "fetch":
        found = measure_fetch(args.requests, args.blocks, args.size, args.version or 17, settle)
    else:
        version = args.version or 12
        found = measure(
            args.requests,
            args.blocks,
            args.records,
            args.size,
            args.acks,
            version,
            args.idempotent,
            settle,
            args.codec,
            args.partitions,
        )
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
