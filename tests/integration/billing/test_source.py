"""`__usage` through Spark's Kafka source against a real broker: typed rows, offset ranges, and a
verdict for every way a record can break the usage contract, equal to `tenancy.usage.decode`'s."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import pytest

from billing.source.kafka import partitions_of, resolve
from billing.source.offsets import LATEST, OffsetSpec
from billing.source.usage import read_usage, usage_rows
from brokers.client import Cluster
from infra.stack import BrokerProcess
from tenancy.usage import UsageRecordError, decode
from tests.integration.billing.usage_gen import storage, traffic, write

pytestmark = pytest.mark.integration


def _ends(bootstrap: str) -> dict[int, int]:
    async def go() -> dict[int, int]:
        async with Cluster(bootstrap) as cluster:
            partitions = await partitions_of(cluster, "__usage")
            return await resolve(cluster, "__usage", OffsetSpec(LATEST), partitions)

    return asyncio.run(go())


def _load(spark: Any, bootstrap: str, start: dict[int, int] | None = None) -> list[Any]:
    end = _ends(bootstrap)
    start = start if start is not None else dict.fromkeys(end, 0)
    rows = usage_rows(read_usage(spark, bootstrap, "__usage", start, end)).collect()
    return sorted(rows, key=lambda r: (r.kafka_partition, r.kafka_offset))


def test_rows_are_typed_and_malformed_records_are_rejected_rows(
    spark: Any, usage_broker: BrokerProcess
) -> None:
    rng = random.Random(1)
    records: list[Any] = [
        *traffic(rng, ["acme", "globex"], 40),
        *storage("acme", "orders", 0, [(1000, 5)]),
    ]
    write(usage_broker.bootstrap, [*records, (b"bad/1/1", b"{not json"), (None, b'{"v":2}')])
    rows = _load(spark, usage_broker.bootstrap)
    assert len(rows) == len(records) + 2
    rejected = [r for r in rows if r.rejected is not None]
    assert [(r.id, r.rejected) for r in rejected] == [
        ("bad/1/1", "value is not UTF-8 JSON: JSONDecodeError"),
        (None, "unknown version 2"),
    ]
    by_id = {r.id: r for r in rows if r.rejected is None}
    for record in records:
        row = by_id[record.id]
        assert row.kind == record.kind and row.tenant == record.tenant
        for name in ("principal", "client_id", "topic", "start_ms", "end_ms", "bytes_in",
                     "bytes_out", "requests", "throttle_ms", "connection_ms", "partition",
                     "bytes", "at_ms"):  # fmt: skip
            assert getattr(row, name) == getattr(record, name, None), name
    offsets = {(r.kafka_partition, r.kafka_offset) for r in rows}
    assert len(offsets) == len(rows)


def test_starting_offsets_bound_the_range(spark: Any, usage_broker: BrokerProcess) -> None:
    records = traffic(random.Random(2), ["acme"], 20)  # one tenant: one partition
    write(usage_broker.bootstrap, records)
    partition = _load(spark, usage_broker.bootstrap)[0].kafka_partition
    start = dict.fromkeys(_ends(usage_broker.bootstrap), 0) | {partition: 5}
    rows = _load(spark, usage_broker.bootstrap, start)
    assert [r.kafka_offset for r in rows] == list(range(5, 20))
    assert [r.id for r in rows] == [r.id for r in records[5:]]
    assert _load(spark, usage_broker.bootstrap, {}) == []  # no start: nothing to read


_TRAFFIC = {
    "v": 1, "id": "gw/inc/7", "kind": "traffic", "tenant": "acme", "topic": "orders",
    "principal": "sa-1", "client_id": "app", "start_ms": 7_200_000, "end_ms": 7_260_000,
    "bytes_in": 10, "bytes_out": 20, "requests": 3, "throttle_ms": 0, "connection_ms": 5,
}  # fmt: skip
_STORAGE = {
    "v": 1, "id": "s1/acme/orders/0/60000", "kind": "storage", "tenant": "acme",
    "topic": "orders", "partition": 0, "bytes": 4096, "at_ms": 60_000,
}  # fmt: skip


def _broken() -> list[tuple[bytes | None, bytes | None]]:
    """A valid record of each kind, then one record per way of breaking the contract."""

    def value(base: dict[str, Any], **changes: Any) -> tuple[bytes | None, bytes | None]:
        fields = {k: v for k, v in {**base, **changes}.items() if v is not _GONE}
        # compact and in order, as `tenancy.usage.encode` writes: the JVM's fast path sees it
        return None, json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode()

    t, s = _TRAFFIC, _STORAGE
    return [
        value(t), value(s), value(t, topic=None), (b"gw/inc/7", value(t)[1]),
        (None, json.dumps(dict(reversed(t.items()))).encode()),  # valid JSON, not canonical
        (None, None), (None, b"x" * 5000), (None, b"\xff\xfe"), (None, b"{nope"), (None, b"[1]"),
        value(t, v=2), value(t, v=_GONE), value(t, v="1"), value(t, kind=5), value(t, kind=_GONE),
        value(t, requests=_GONE), value(t, extra=1), value(s, principal="p"),
        value(t, id=""), value(t, id="a/b/" + "c" * 600), value(t, id=7),
        value(t, tenant="A1"), value(t, tenant="acme\n"), value(t, tenant=None),
        value(t, principal=""), value(t, principal="a\x01"), value(t, principal=3),
        value(t, client_id="c" * 256), value(t, client_id="\x7f"), value(t, client_id=""),
        value(t, topic="bad topic"), value(t, topic=""), value(t, id="gw/7"),
        value(t, start_ms=-1), value(t, bytes_in=1.5), value(t, bytes_in="5"),
        value(t, bytes_out=True), value(t, throttle_ms=None),
        value(t, end_ms=7_100_000), value(t, end_ms=10_800_000), value(t, end_ms=10_800_001),
        value(s, topic=None), value(s, partition=-1), value(s, bytes="x"), value(s, at_ms=1.0),
        value(s, id="s1/globex/orders/0/60000"), value(s, id="x/s1/acme/orders/0/60000"),
        (b"other/id/1", value(t)[1]), (b"\xff", value(t)[1]),
        value(t, bytes_in=2**64),  # valid to Python; a counter must fit a BIGINT in the JVM
    ]  # fmt: skip


_GONE = object()
_KNOWN_DIFFERENCES = {  # tenancy.usage.decode's reason → the JVM's (see billing.source.usage)
    "unknown version '1'": 'unknown version "1"',
}


def _python_verdict(key: bytes | None, value: bytes | None) -> str | None:
    try:
        decode(key, value)
    except UsageRecordError as exc:
        return _KNOWN_DIFFERENCES.get(exc.reason, exc.reason)
    return None


def test_every_broken_rule_is_the_contracts_verdict(
    spark: Any, usage_broker: BrokerProcess
) -> None:
    cases = _broken()
    write(usage_broker.bootstrap, cases)  # raw pairs all go to partition 0, in order
    rows = [r for r in _load(spark, usage_broker.bootstrap) if r.kafka_partition == 0]
    assert len(rows) == len(cases)
    verdicts = [(r.kafka_offset, r.rejected) for r in rows]
    expected = [(i, _python_verdict(k, v)) for i, (k, v) in enumerate(cases)]
    expected[-1] = (len(cases) - 1, "bytes_in must be a non-negative integer")
    assert verdicts == expected
    assert [r.rejected for r in rows[:5]] == [None] * 5  # the valid ones
    assert rows[4].id == "gw/inc/7" and rows[4].bytes_in == 10  # read off the slow path
    assert rows[-3].id == "other/id/1" and rows[-2].id is None  # a key that is not UTF-8
