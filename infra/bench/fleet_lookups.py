"""What a tenant's metadata look-ups cost the gateway on a large fleet (issue 24, "Fleet view").

Owns one run: a broker holding `--topics` topics of `--partitions` partitions each under another
tenant's names, a gateway in front of it, and one tenant with one topic of its own, which times
over SASL/PLAIN through the gateway: Metadata for all topics (the tenant sees its one), Metadata
v12 naming 20 topic ids nobody has, Metadata v9 naming 16 topics that do not exist, and creating a
topic; each `--repetitions` times (median and max in ms). Before the gateway asked the brokers for
a request's own topics only, each of these read every topic of the fleet (~100 ms of the
gateway's loop at 17,000 partitions), once per id for the ids. Writes JSON (`--out`).

    .venv/bin/python -m infra.bench.fleet_lookups [--topics 1700] [--out results/fleet.json]

The machine's open-file limit bounds the fleet (one descriptor a partition). Runs on the main
thread (blocking clients and an asyncio loop for the raw connection).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import statistics
import struct
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.create_topics.v5.request import CreatableTopic, CreateTopicsRequest
from kio.schema.metadata.v9.request import MetadataRequest as MetadataRequestV9
from kio.schema.metadata.v9.request import MetadataRequestTopic as TopicV9
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i32Timedelta

from brokers.client.messages import decode_response
from brokers.wire.messages import encode_entity
from infra.bench.gateway import open_tenant
from infra.bench.gateway_logins import CLIENT_ID, SaslConnection
from infra.bench.report import write_json
from infra.gateway import start_gateway
from infra.stack import start_broker
from tenancy.store import TenantStore

_HEADER_V2 = struct.Struct(">hhih")  # then the client id and an empty tagged-field section
METADATA, CREATE_TOPICS = 3, 19
CREATE_BATCH = 200  # fleet topics per CreateTopics request


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=1700, help="the fleet's other topics")
    parser.add_argument("--partitions", type=int, default=10, help="partitions per fleet topic")
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("infra/bench/results/fleet_lookups.json"))
    return parser.parse_args(argv)


async def call(connection: SaslConnection, api_key: int, version: int, request: Any) -> bytes:
    """One flexible request (header v2); the answer's frame, read whole and not decoded (the
    client's decoding is not the gateway's cost)."""
    connection._correlation += 1
    header = _HEADER_V2.pack(api_key, version, connection._correlation, len(CLIENT_ID))
    frame = header + CLIENT_ID + b"\x00" + encode_entity(request)
    connection.writer.write(struct.pack(">i", len(frame)) + frame)
    (length,) = struct.unpack(">i", await connection.reader.readexactly(4))
    return await connection.reader.readexactly(length)


async def listed(connection: SaslConnection, request: Any) -> list[str]:
    """The topic names an all-topics Metadata v12 answer shows (checked once, untimed)."""
    frame = await call(connection, METADATA, 12, request)
    answer = decode_response(METADATA, 12, memoryview(frame), 5)  # correlation id, no tags
    return sorted(str(t.name) for t in answer.topics)


async def timed(make: Callable[[], Awaitable[object]], repetitions: int) -> dict[str, float]:
    samples = []
    for _ in range(repetitions):
        began = time.perf_counter()
        await make()
        samples.append((time.perf_counter() - began) * 1000)
    return {"median_ms": round(statistics.median(samples), 2), "max_ms": round(max(samples), 2)}


async def tenant_lookups(host: str, port: int, key: Any, repetitions: int) -> dict[str, Any]:
    connection = await SaslConnection.open(host, port)
    await connection.login_plain(key.key_id, key.secret)
    made = [0]

    def create() -> Awaitable[bytes]:
        made[0] += 1
        topic = CreatableTopic(
            name=TopicName(f"mine{made[0]}"),
            num_partitions=i32(1),
            replication_factor=i16(1),
            assignments=(),
            configs=(),
        )
        request = CreateTopicsRequest(
            topics=(topic,),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            validate_only=False,
        )
        return call(connection, CREATE_TOPICS, 5, request)

    await create()  # the tenant's own topic (and its first partition count)
    everything = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    ids = MetadataRequest(
        topics=tuple(MetadataRequestTopic(name=None, topic_id=uuid.uuid4()) for _ in range(20)),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    names = MetadataRequestV9(
        topics=tuple(TopicV9(name=TopicName(f"none{i}")) for i in range(16)),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    try:
        shown = await listed(connection, everything)
        if shown != ["mine1"]:
            raise RuntimeError(f"the tenant should see its one topic, saw {shown}")
        return {
            "metadata_all_topics": await timed(
                lambda: call(connection, METADATA, 12, everything), repetitions
            ),
            "metadata_20_unknown_ids": await timed(
                lambda: call(connection, METADATA, 12, ids), repetitions
            ),
            "metadata_16_unknown_names": await timed(
                lambda: call(connection, METADATA, 9, names), repetitions
            ),
            "create_topic": await timed(create, max(1, repetitions // 2)),
        }
    finally:
        connection.writer.close()


def make_fleet(bootstrap: str, topics: int, partitions: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    began = time.monotonic()
    for start in range(0, topics, CREATE_BATCH):
        batch = [
            NewTopic(f"zz_t{i}", partitions, 1)
            for i in range(start, min(topics, start + CREATE_BATCH))
        ]
        for future in admin.create_topics(batch).values():
            future.result()
    return time.monotonic() - began


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    with tempfile.TemporaryDirectory(prefix="pier-fleet-lookups-") as tmp:
        root = Path(tmp)
        db_url = f"sqlite:///{root / 'tenancy.db'}"
        with TenantStore.open(db_url) as store:
            store.upgrade()
            key, _account = open_tenant(store, "bench")
        broker = start_broker(root / "broker")
        gateway = None
        try:
            gateway = start_gateway(
                root / "gateway", broker.bootstrap, db_url, node_ids=[broker.node_id],
                properties={"workers": "1"},
            )  # fmt: skip
            seconds = make_fleet(broker.bootstrap, args.topics, args.partitions)
            rows = asyncio.run(tenant_lookups(gateway.host, gateway.port, key, args.repetitions))
        finally:
            if gateway is not None:
                gateway.stop()
            broker.stop()
    doc = {
        "date": datetime.date.today().isoformat(),
        "fleet_partitions": args.topics * args.partitions,
        "fleet_created_s": round(seconds, 1),
        "tenant_topics": 1,
        **rows,
    }
    print(write_json(doc, args.out))


if __name__ == "__main__":
    main()
