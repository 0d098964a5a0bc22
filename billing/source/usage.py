"""Reading `__usage` with Spark's Kafka source and checking it against the usage contract, in the JVM.

Owns: `read_usage` (one offset range of the topic as a DataFrame of Kafka records, through
`spark-sql-kafka-0-10`: the executors' JVMs fetch and decode the batches; no Python touches a
record) and `usage_rows` (those records as the typed rows of `COLUMNS`: the value parsed with
`try_parse_json` into a VARIANT, each rule of `tenancy.usage` a column expression). A record that
breaks the contract is not dropped: its row's `rejected` column holds the first rule it breaks, in
the order and, mostly, the words of `tenancy.usage.decode` (the golden files and
tests/integration/billing/test_source.py hold the two to the same verdicts); its `id` is its key
when that is UTF-8, every usage column null. Differences from the Python decoder, all on records
no writer makes: a counter must fit a BIGINT (a partition an INT); `v` must be the integer 1 (not 1.0 or true); a JSON
object with a repeated key, or a string with a lone-surrogate escape, is "not UTF-8 JSON"; a kind
that is not a string is shown as JSON (`"x"`, not Python's `'x'`).

The reader assigns the partitions explicitly and resolves offsets through a consumer
(`spark.sql.streaming.kafka.useDeprecatedOffsetFetching`): Spark's Admin-based offset reader skips
internal topics, and Pier brokers before this version reported every `__`-prefixed topic, so
`__usage` too, as internal (now only Kafka's own internal topics are). Driver side (builds plans;
`fast_stage` registers the usage scan's UDF in the records' session).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Final

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from billing.source import scan as _scan
from tenancy.usage import HOUR_MS, MAX_NAME, MAX_RECORD_BYTES, VERSION

COLUMNS: Final = (
    ("kafka_partition", "INT"),
    ("kafka_offset", "BIGINT"),
    ("id", "STRING"),
    ("kind", "STRING"),
    ("tenant", "STRING"),
    ("principal", "STRING"),
    ("client_id", "STRING"),
    ("topic", "STRING"),
    ("start_ms", "BIGINT"),
    ("end_ms", "BIGINT"),
    ("bytes_in", "BIGINT"),
    ("bytes_out", "BIGINT"),
    ("requests", "BIGINT"),
    ("throttle_ms", "BIGINT"),
    ("connection_ms", "BIGINT"),
    ("partition", "INT"),
    ("bytes", "BIGINT"),
    ("at_ms", "BIGINT"),
    ("rejected", "STRING"),
)
COUNTERS: Final = ("bytes_in", "bytes_out", "requests", "throttle_ms", "connection_ms")
TRAFFIC_FIELDS: Final = (
    "v", "id", "kind", "tenant", "topic", "principal", "client_id", "start_ms", "end_ms", *COUNTERS,
)  # fmt: skip
STORAGE_FIELDS: Final = ("v", "id", "kind", "tenant", "topic", "partition", "bytes", "at_ms")
Derive = Callable[[DataFrame], DataFrame]  # columns a caller adds to each row (keeping the rest)
_STRINGS: Final = ("id", "kind", "tenant", "topic", "principal", "client_id")
_TENANT: Final = r"\A[a-z][a-z0-9-]{2,15}\z"  # tenancy.ids.TENANT_ID (\z: no final newline)
_TOPIC: Final = r"\A[A-Za-z0-9._-]{1,249}\z"
_UNPRINTABLE: Final = r"[\x00-\x1f\x7f]"
_NOT_JSON: Final = r"[\x00-\x08\x0b\x0c\x0e-\x1f]"  # raw anywhere (try_parse_json lets a NUL by)


def read_usage(
    spark: SparkSession, bootstrap: str, topic: str, start: dict[int, int], end: dict[int, int]
) -> DataFrame:
    """The Kafka records of `topic` at offsets [start, end) of each partition of `end` (columns
    key, value, partition, offset, ...). A range whose start is gone (retention) fails the read."""
    spark.conf.set("spark.sql.streaming.kafka.useDeprecatedOffsetFetching", "true")
    partitions = sorted(end)
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("assign", json.dumps({topic: partitions}))
        .option("startingOffsets", _offsets(topic, {p: start.get(p, end[p]) for p in partitions}))
        .option("endingOffsets", _offsets(topic, end))
        .option("failOnDataLoss", "true")
        .load()
    )


def _offsets(topic: str, offsets: dict[int, int]) -> str:
    return json.dumps({topic: {str(p): offsets[p] for p in sorted(offsets)}})


def usage_rows(records: DataFrame, *, fast_path: bool = True) -> DataFrame:
    """Kafka records (key, value, partition, offset) → one row of `COLUMNS` each.

    Two paths, one verdict: a record whose value matches `FAST_RECORD` (one pass of one regular
    expression: the canonical encoding `tenancy.usage.encode` writes, every field in order,
    strings without escapes or control characters, counters of at most 18 digits, the storage
    id's suffix equal to its fields), whose window is in order within one hour and whose key, if
    any, is its id, is valid on the fast path, and its fields are read with it (both by the Java
    usage scan, `billing.source.scan`, in one pass over the bytes; `fast_stage(scan=False)` is
    the same with the regular expression and `from_json`); any other
    record (dozens of times dearer: writers should stay canonical) goes through the exact VARIANT
    path, which finds the first rule it breaks (or accepts it: valid JSON need not be
    canonical). The fast path accepts a subset of the valid records, so the rows are the same with
    `fast_path=False` (every record on the exact path; tests compare the two). The two paths are
    two stages (`fast_stage`, then `exact_rows` of the rows it refused, unioned by `both_paths`):
    a caller that reads the records once persists `fast_stage`'s frame."""
    if not fast_path:
        return exact_rows(_raw(records))
    return both_paths(fast_stage(records))


STAGE_EXTRA: Final = ("_fast", "_key", "_value")  # `fast_stage`'s columns beyond COLUMNS


def _raw(records: DataFrame) -> DataFrame:
    return records.select(
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("key").alias("_key"),
        F.col("value").alias("_value"),
    )


def fast_stage(records: DataFrame, *, scan: bool = True) -> DataFrame:
    """Every record fast-checked by one small projection: `COLUMNS` (meaningful on the rows
    `_fast` accepts; `rejected` null), `_fast` (never null) and the record's `_key` and `_value`
    kept only on the rows it refused (null on the others, so persisting this frame holds little
    beyond the fields). Only the fast check and the typed fields are in this stage's generated
    code, which stays small enough for the JVM to compile; the exact rules run in `exact_rows`,
    on the refused rows alone.

    The check is the Java scan (`billing.source.scan`: one pass over the bytes, the fields with
    it); `scan=False` runs its reference instead, `FAST_RECORD` then `from_json` (the same
    verdicts and fields, dearer: tests/integration/billing/test_usage_scan.py compares them)."""
    raw = _raw(records)
    if scan:
        _scan.register(records.sparkSession)
        found = F.call_function(_scan.FUNCTION, F.col("_key"), F.col("_value"))
        flagged = raw.withColumn("_j", found).withColumn("_fast", F.col("_j").isNotNull())
    else:
        typed = raw.withColumn("_text", F.col("_value").cast("string"))
        typed = typed.withColumn("_j", F.from_json("_text", _TYPED_SCHEMA))
        flagged = typed.withColumn("_fast", _fast_valid(F.col("_j")))
    fields = [F.col(f"_j.{name}").cast(kind.lower()).alias(name) for name, kind in COLUMNS[2:-1]]
    refused = ~F.col("_fast")
    return flagged.select(
        "kafka_partition",
        "kafka_offset",
        *fields,
        F.lit(None).cast("string").alias("rejected"),
        "_fast",
        F.when(refused, F.col("_key")).alias("_key"),
        F.when(refused, F.col("_value")).alias("_value"),
    )


def exact_rows(raw: DataFrame) -> DataFrame:
    """Rows of (kafka_partition, kafka_offset, _key, _value) → `COLUMNS`, every rule checked on
    the VARIANT of the value (the dear path: give it only the records the fast path refused)."""
    text = raw.withColumn("_text", F.col("_value").cast("string"))
    slow = _Variant(F.try_parse_json(F.col("_text")))
    checked = text.withColumn("rejected", _rejection(slow))
    valid = F.col("rejected").isNull()
    key_text = F.when(
        F.col("_key").isNotNull() & F.is_valid_utf8("_key"), F.col("_key").cast("string")
    )
    out = [
        F.col("kafka_partition"),
        F.col("kafka_offset"),
        F.when(valid, slow.s("id")).otherwise(key_text).alias("id"),
    ]
    for name, kind in COLUMNS[3:-1]:
        variant = slow.s(name) if name in _STRINGS else slow.i(name)
        out.append(F.when(valid, variant).cast(kind.lower()).alias(name))
    return checked.select(*out, F.col("rejected"))


def both_paths(stage: DataFrame, derive: Derive | None = None) -> DataFrame:
    """`stage` (`fast_stage`'s frame, perhaps persisted, perhaps with columns `derive` added) →
    one row each: the rows `_fast` accepted as they are, unioned with `exact_rows` of the others,
    through `derive` too; the columns are `derive`'s (`COLUMNS` without one)."""
    refused = stage.where(~F.col("_fast")).select(
        "kafka_partition", "kafka_offset", *STAGE_EXTRA[1:]
    )
    exact = exact_rows(refused)
    exact = derive(exact) if derive is not None else exact
    fast = stage.where(F.col("_fast")).select(*exact.columns)
    return fast.unionByName(exact)


_TYPED_SCHEMA: Final = ", ".join(
    f"{name} {'STRING' if name in _STRINGS else 'BIGINT'}"
    for name in dict.fromkeys((*TRAFFIC_FIELDS, *STORAGE_FIELDS))
)


def _fast_record() -> str:
    """The fast path's regular expression (Java syntax). Conservative: whatever it accepts, the
    exact rules accept too (checked field by field in tests/integration/billing/test_fast_path.py)."""
    # no `"` or backslash (no escapes) and no control character; a bound counts code points
    # (java.util.regex matches a class per code point), as the rules count characters
    printable = r"[^\"\\\x00-\x1f\x7f]"  # and no DEL: a principal's or client id's rule
    segment = r"[^\"\\/\x00-\x1f]"  # an id's part: no `/`
    count = r"(?:0|[1-9][0-9]{0,17})"  # fits a BIGINT, non-negative
    tenant = r"[a-z][a-z0-9-]{2,15}"
    topic = r"[A-Za-z0-9._-]{1,249}"
    head = rf'\A\{{"v":{VERSION},"id":"(?=[^"]{{1,{MAX_NAME * 2}}}")'
    traffic = (
        rf'{segment}*+/{segment}*+/{segment}*+","kind":"traffic","tenant":"{tenant}",'
        rf'"topic":(?:null|"{topic}"),"principal":"{printable}{{1,{MAX_NAME}}}+",'
        rf'"client_id":"{printable}{{0,{MAX_NAME}}}+",'
        + ",".join(f'"{name}":{count}' for name in ("start_ms", "end_ms", *COUNTERS))
    )
    storage = (
        rf'{segment}*+/({tenant})/({topic})/(0|[1-9][0-9]{{0,8}})/({count})",'
        rf'"kind":"storage","tenant":"\1","topic":"\2","partition":\3,"bytes":{count},"at_ms":\4'
    )
    return rf"{head}(?:{traffic}|{storage})\}}\z"


FAST_RECORD: Final = _fast_record()


def _fast_valid(j: Column) -> Column:
    """True for a record the fast path accepts (see `usage_rows`), never null."""
    start, end = j.getField("start_ms"), j.getField("end_ms")
    window = (j.getField("kind") == "storage") | (
        (end >= start) & (end <= start - start % HOUR_MS + HOUR_MS)
    )
    key = F.col("_key").isNull() | (F.col("_key") == F.encode(j.getField("id"), "UTF-8"))
    size_ok = F.octet_length("_value") <= MAX_RECORD_BYTES
    ok = size_ok & F.is_valid_utf8("_value") & F.col("_text").rlike(FAST_RECORD)
    return F.coalesce(ok & window & key, F.lit(False))


class _Access:
    """How the rules read a record's fields (`_Variant`: from the VARIANT of any JSON)."""

    def s(self, name: str) -> Column:
        raise NotImplementedError

    def i(self, name: str) -> Column:
        raise NotImplementedError

    def is_string(self, name: str) -> Column:
        raise NotImplementedError

    def is_null(self, name: str) -> Column:
        raise NotImplementedError

    def is_integer(self, name: str) -> Column:
        raise NotImplementedError


class _Variant(_Access):
    def __init__(self, v: Column) -> None:
        self.v = v

    def field(self, name: str) -> Column:
        return F.variant_get(self.v, f"$.{name}", "variant")

    def type(self, name: str) -> Column:
        return F.schema_of_variant(self.field(name))

    def s(self, name: str) -> Column:
        return F.try_variant_get(self.v, f"$.{name}", "string")

    def i(self, name: str) -> Column:
        return F.try_variant_get(self.v, f"$.{name}", "bigint")

    def is_string(self, name: str) -> Column:
        return self.type(name) == "STRING"

    def is_null(self, name: str) -> Column:
        return self.type(name) == "VOID"

    def is_integer(self, name: str) -> Column:
        return self.type(name) == "BIGINT"


def _is_count(f: _Access, name: str, most: int = 2**63 - 1) -> Column:
    return f.is_integer(name) & (f.i(name) >= 0) & (f.i(name) <= most)


def _text_ok(f: _Access, name: str, low: int, high: int) -> Column:
    length = F.char_length(f.s(name))
    return f.is_string(name) & (length >= low) & (length <= high)


def _topic_ok(f: _Access) -> Column:
    return f.is_string("topic") & f.s("topic").rlike(_TOPIC)


def _slashes(text: Column) -> Column:
    return F.size(F.split(text, "/", -1)) - 1


def _rejection(f: _Variant) -> Column:
    """The first contract rule the record breaks (null: none), in `tenancy.usage.decode`'s order."""
    size = F.octet_length("_value")
    rules: list[tuple[Column, Column]] = [
        (F.col("_value").isNull(), F.lit("value is null")),
        (
            size > MAX_RECORD_BYTES,
            F.concat(
                F.lit("value of "), size.cast("string"), F.lit(f" bytes over {MAX_RECORD_BYTES}")
            ),
        ),
        (~F.is_valid_utf8("_value"), F.lit("value is not UTF-8 JSON: UnicodeDecodeError")),
        (
            f.v.isNull() | F.col("_text").rlike(_NOT_JSON),
            F.lit("value is not UTF-8 JSON: JSONDecodeError"),
        ),
        (~F.schema_of_variant(f.v).startswith("OBJECT<"), F.lit("value is not a JSON object")),
        (
            ~f.is_integer("v") | (f.i("v") != VERSION),
            F.concat(F.lit("unknown version "), F.coalesce(F.to_json(f.field("v")), F.lit("None"))),
        ),
        (
            ~(f.is_string("kind") & f.s("kind").isin("traffic", "storage")),
            F.concat(F.lit("unknown kind "), F.coalesce(F.to_json(f.field("kind")), F.lit("None"))),
        ),
        (~_fields_match(f), _fields_message(f)),
        *((broken, F.lit(reason)) for broken, reason in _value_rules(f)),
    ]
    verdict = F.when(F.coalesce(rules[0][0], F.lit(True)), rules[0][1])
    for broken, reason in rules[1:]:
        verdict = verdict.when(F.coalesce(broken, F.lit(True)), reason)
    return verdict


def _value_rules(f: _Access) -> list[tuple[Column, str]]:
    """The rules after the shape (version, kind, field names): `tenancy.usage.validate`'s, then
    the key's."""
    kind = f.s("kind")
    return [
        (~_text_ok(f, "id", 1, MAX_NAME * 2), f"id must be a non-empty string of at most {MAX_NAME * 2} characters"),
        (~(f.is_string("tenant") & f.s("tenant").rlike(_TENANT)), "tenant must match [a-z][a-z0-9-]{2,15}"),
        *_traffic_rules(f, kind == "traffic"),
        *_storage_rules(f, kind == "storage"),
        (F.col("_key").isNotNull() & (F.col("_key") != F.encode(f.s("id"), "UTF-8")), "key does not match the record id"),
    ]  # fmt: skip


def _fields_match(f: _Variant) -> Column:
    keys = F.sort_array(F.json_object_keys(F.col("_text")))
    traffic = F.array(*(F.lit(n) for n in sorted(TRAFFIC_FIELDS)))
    storage = F.array(*(F.lit(n) for n in sorted(STORAGE_FIELDS)))
    return F.when(f.s("kind") == "traffic", keys == traffic).otherwise(keys == storage)


def _fields_message(f: _Variant) -> Column:
    keys = F.json_object_keys(F.col("_text"))
    kind = f.s("kind")
    expected = F.when(
        kind == "traffic", F.array(*(F.lit(n) for n in sorted(TRAFFIC_FIELDS)))
    ).otherwise(F.array(*(F.lit(n) for n in sorted(STORAGE_FIELDS))))

    def listed(names: Column) -> Column:  # Python's repr of a sorted list of str
        quoted = F.concat(F.lit("'"), F.array_join(F.sort_array(names), "', '"), F.lit("'"))
        return F.concat(F.lit("["), F.when(F.size(names) > 0, quoted).otherwise(""), F.lit("]"))

    return F.concat(
        kind,
        F.lit(" record fields: missing "),
        listed(F.array_except(expected, keys)),
        F.lit(", unexpected "),
        listed(F.array_except(keys, expected)),
    )


def _traffic_rules(f: _Access, traffic: Column) -> list[tuple[Column, str]]:
    start, end = f.i("start_ms"), f.i("end_ms")
    rules = [
        (
            ~_text_ok(f, "principal", 1, MAX_NAME),
            f"principal must be a non-empty string of at most {MAX_NAME} characters",
        ),
        (f.s("principal").rlike(_UNPRINTABLE), "principal must not hold control characters, DEL or lone surrogates"),
        (~_text_ok(f, "client_id", 0, MAX_NAME), f"client_id must be a string of at most {MAX_NAME} characters"),
        (f.s("client_id").rlike(_UNPRINTABLE), "client_id must not hold control characters, DEL or lone surrogates"),
        (~(f.is_null("topic") | _topic_ok(f)), "topic must be 1-249 characters of [A-Za-z0-9._-]"),
        (_slashes(f.s("id")) != 2, "traffic id must be <gateway id>/<incarnation>/<sequence>"),
        *((~_is_count(f, n), f"{n} must be a non-negative integer") for n in ("start_ms", "end_ms", *COUNTERS)),
        (end < start, "end_ms before start_ms"),
        (end > F.try_add(start - start % HOUR_MS, F.lit(HOUR_MS)), "window crosses an hour boundary"),
    ]  # fmt: skip
    return [(traffic & broken, reason) for broken, reason in rules]


def _storage_rules(f: _Access, storage: Column) -> list[tuple[Column, str]]:
    suffix = F.concat_ws("/", F.lit(""), f.s("tenant"), f.s("topic"),
                         f.i("partition").cast("string"), f.i("at_ms").cast("string"))  # fmt: skip
    rules = [
        (~_topic_ok(f), "topic must be 1-249 characters of [A-Za-z0-9._-]"),
        (~_is_count(f, "partition", 2**31 - 1), "partition must be a non-negative integer"),
        *((~_is_count(f, n), f"{n} must be a non-negative integer") for n in ("bytes", "at_ms")),
        (
            ~f.s("id").endswith(suffix) | (_slashes(f.s("id")) != 4),
            "storage id must be <sampler id>/<tenant>/<topic>/<partition>/<at_ms>",
        ),
    ]  # fmt: skip
    return [(storage & broken, reason) for broken, reason in rules]
