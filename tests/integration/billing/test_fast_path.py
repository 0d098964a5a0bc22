"""The JVM's fast path for canonical usage records (`billing.source.usage.FAST_RECORD`) against
the exact VARIANT path: on thousands of random records, valid and broken near every limit, the
rows (verdicts, ids and fields) are the same either way, and the fast path takes the common
records. No broker: the records are a DataFrame of the Kafka source's columns."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from pyspark.sql import functions as F

from billing.rollup import frames
from billing.source.usage import COUNTERS, FAST_RECORD, usage_rows
from tenancy.usage import HOUR_MS, UsageRecordError, decode
from tests.integration.billing.test_source import _broken

pytestmark = pytest.mark.integration

_SCHEMA = "key BINARY, value BINARY, partition INT, offset BIGINT"
_CHARS = 'abcXYZ09 :-_./@é"\\\x01\x7f\x85\u2603\U0001f600'  # plain, and what is not


def _text(rng: random.Random, low: int, high: int) -> str:
    """Mostly plain text of a length within [low, high]; now and then a limit or odd characters."""
    length = rng.choice([low, high, rng.randint(low, min(high, 40))] + [rng.randint(1, 12)] * 5)
    pool = _CHARS if rng.random() < 0.2 else "abcxyz0129-_:"
    return "".join(rng.choice(pool) for _ in range(max(length, 0)))


_NUMBERS = [0, 1, 10**18 - 1, 10**18, 2**63 - 1]
_BROKEN_NUMBERS = [2**63, -1, 1.5, "7", None, True]


def _traffic(rng: random.Random) -> dict[str, Any]:
    start = rng.choice([0, 7 * HOUR_MS, 7 * HOUR_MS + rng.randrange(HOUR_MS - 6000)])
    end = start + rng.choice([0, 5000, HOUR_MS - start % HOUR_MS])
    return {
        "v": 1,
        "id": "/".join(_text(rng, 0, 150) for _ in range(3)),
        "kind": "traffic",
        "tenant": rng.choice(["acme", "t0001", "abc", "a" * 16, "acme-1"]),
        "topic": rng.choice([None, "orders", "o" * 249, "a.b_c-D9"]),
        "principal": _text(rng, 1, 255),
        "client_id": _text(rng, 0, 255),
        "start_ms": start,
        "end_ms": end,
        **{n: rng.choice([*_NUMBERS, *[rng.randrange(10**12)] * 20]) for n in COUNTERS},
    }


def _storage(rng: random.Random) -> dict[str, Any]:
    tenant = rng.choice(["acme", "t0001"])
    topic = rng.choice(["orders", "o" * 249])
    partition = rng.choice([0, 7, 999_999_999, 10**9, 2**31 - 1])
    at_ms = rng.choice([0, 60_000, 10**18 - 1, 10**18, 2**63 - 1])
    return {
        "v": 1,
        "id": rng.choice(["s1", "", "é", "s 1"]) + f"/{tenant}/{topic}/{partition}/{at_ms}",
        "kind": "storage",
        "tenant": tenant,
        "topic": topic,
        "partition": partition,
        "bytes": rng.choice(_NUMBERS),
        "at_ms": at_ms,
    }


def _break(rng: random.Random, fields: dict[str, Any]) -> None:
    """One change, most of them across one rule's limit."""
    name = rng.choice(list(fields))
    kind = rng.randrange(9)
    if kind == 0:
        del fields[name]
    elif kind == 1:
        fields[name] = rng.choice([*_BROKEN_NUMBERS, "x", [1], {}])
    elif kind == 2 and isinstance(fields[name], int) and not isinstance(fields[name], bool):
        fields[name] = rng.choice(_BROKEN_NUMBERS[:2])
    elif kind == 3:
        fields[rng.choice(["tenant", "topic"])] = rng.choice(["a" * 17, "Acme", "ab", "", "a b"])
    elif kind == 4 and fields["kind"] == "traffic":
        fields["end_ms"] = fields["start_ms"] + rng.choice([-1, HOUR_MS + 1])
    elif kind == 5 and fields["kind"] == "traffic":
        fields[rng.choice(["principal", "client_id"])] = "p" * 256
    elif kind == 6:
        fields["id"] = rng.choice(["", "a/b", "a/b/c/d", "x" * 511, "/".join(["y" * 170] * 3)])
    elif kind == 7 and fields["kind"] == "storage":
        fields["id"] = fields["id"].replace("/acme/", "/globex/").replace("/0/", "/00/")
    else:
        fields["v"] = rng.choice([2, 1.0, "1"])


def _record(rng: random.Random, offset: int) -> tuple[bytes | None, bytes | None, int, int]:
    fields = _traffic(rng) if rng.random() < 0.7 else _storage(rng)
    if rng.random() < 0.4:
        _break(rng, fields)
    ascii_only = rng.random() < 0.05  # escapes: valid JSON, not the fast path's
    value = json.dumps(fields, ensure_ascii=ascii_only, separators=(",", ":")).encode()
    if rng.random() < 0.03:
        value = value.replace(b",", b", ", 1)
    if rng.random() < 0.02:
        value += rng.choice([b"\n", b" ", b"\x00"])
    key = rng.choice([None, None, str(fields.get("id")).encode(), b"other"])
    return key, value, offset % 3, offset


def test_the_fast_and_the_exact_path_give_the_same_rows(spark: Any) -> None:
    rng = random.Random(23)
    records = [_record(rng, i) for i in range(2000)]
    records += [(k, v, 0, 2000 + i) for i, (k, v) in enumerate(_broken())]
    frame = spark.createDataFrame(records, _SCHEMA).cache()
    fast = sorted(usage_rows(frame).collect(), key=lambda r: r.kafka_offset)
    exact = sorted(usage_rows(frame, fast_path=False).collect(), key=lambda r: r.kafka_offset)
    assert len(fast) == len(records)
    for a, b in zip(fast, exact, strict=True):
        assert a == b, (records[a.kafka_offset], a, b)
    taken = frame.where(F.col("value").cast("string").rlike(FAST_RECORD)).count()
    valid = sum(1 for r in exact if r.rejected is None)
    assert taken > 200 and valid - taken > 100, (valid, taken)  # both paths see valid records
    for (key, value, _, _), row in zip(records, exact, strict=True):
        if row.rejected is None:  # the exact path's valid rows are valid to Python too
            try:
                decode(key, value)
            except UsageRecordError as exc:
                pytest.fail(f"{value!r}: JVM accepted, Python says {exc.reason}")
    frame.unpersist()


def test_canonical_records_take_the_fast_path(spark: Any) -> None:
    traffic = (
        '{"v":1,"id":"gw/inc/7","kind":"traffic","tenant":"acme","topic":null,"principal":'
        '"User:alice","client_id":"","start_ms":7200000,"end_ms":7260000,"bytes_in":10,'
        '"bytes_out":20,"requests":3,"throttle_ms":0,"connection_ms":5}'
    )
    storage = (
        '{"v":1,"id":"s1/acme/orders/0/60000","kind":"storage","tenant":"acme","topic":"orders",'
        '"partition":0,"bytes":4096,"at_ms":60000}'
    )
    wrong_suffix = storage.replace('"partition":0', '"partition":1')
    frame = spark.createDataFrame([(traffic,), (storage,), (wrong_suffix,)], "text STRING")
    matched = [r[0] for r in frame.select(F.col("text").rlike(FAST_RECORD)).collect()]
    assert matched == [True, True, False]


def test_the_runs_cached_stage_keeps_the_exact_rules_out_of_the_common_record(spark: Any) -> None:
    """What a run does (`frames.checked`, its stage persisted): the same rows as the exact path on
    a batch where many records are refused, and the stage every record goes through holds none of
    the exact rules: its generated methods stay under the 8,000 bytes the JVM JIT-compiles."""
    rng = random.Random(5)
    records = [_record(rng, i) for i in range(600)]
    frame = spark.createDataFrame(records, _SCHEMA)
    stage, rows = frames.checked(frame)
    assert max(_method_sizes(spark, stage)) < 8000  # JIT-compiled (38 KB with the exact rules)
    stage.persist()
    try:
        names = frames.LEAN_COLUMNS
        got = sorted(rows.select(*names).collect(), key=lambda r: r.kafka_offset)
        every = usage_rows(frame, fast_path=False).select(*names).collect()
        exact = sorted(every, key=lambda r: r.kafka_offset)
        assert got == exact
        refused = stage.where(~F.col("_fast")).count()
        assert 50 < refused < len(records) - 50, refused  # both stages had rows
        assert max(_method_sizes(spark, rows)) > 8000  # the exact rules: on refused rows only
    finally:
        stage.unpersist()


def _method_sizes(spark: Any, frame: Any) -> list[int]:
    """The largest generated method (bytes of bytecode) of each whole-stage-codegen subtree."""
    debug = getattr(spark._jvm.org.apache.spark.sql.execution.debug, "package$")
    plan = frame._jdf.queryExecution().executedPlan()
    found = getattr(debug, "MODULE$").codegenStringSeq(plan).iterator()
    sizes = []
    while found.hasNext():
        sizes.append(int(found.next()._3().maxMethodCodeSize()))
    assert sizes, "no generated code"
    return sizes
