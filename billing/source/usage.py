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

Pier's brokers report `__`-prefixed topics as internal and Spark's Admin-based offset reader skips
internal topics, so the reader assigns the partitions explicitly and resolves offsets through a
consumer (`spark.sql.streaming.kafka.useDeprecatedOffsetFetching`). Driver side (builds plans).
"""

from __future__ import annotations

import json
from typing import Final

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

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
_STRINGS: Final = ("id", "kind", "tenant", "topic", "principal", "client_id")
_INTEGERS: Final = ("v", "start_ms", "end_ms", *COUNTERS, "partition", "bytes", "at_ms")
_TENANT: Final = r"\A[a-z][a-z0-9-]{2,15}\z"  # tenancy.ids.TENANT_ID (\z: no final newline)
_TOPIC: Final = r"\A[A-Za-z0-9._-]{1,249}\z"
_UNPRINTABLE: Final = r"[\x00-\x1f\x7f]"


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


def usage_rows(records: DataFrame) -> DataFrame:
    """Kafka records (key, value, partition, offset) → one row of `COLUMNS` each."""
    fields = sorted(set(TRAFFIC_FIELDS) | set(STORAGE_FIELDS))
    parsed = records.select(
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("key").alias("_key"),
        F.col("value").alias("_value"),
        F.try_parse_json(F.col("value").cast("string")).alias("_v"),
    )
    typed = parsed.select(
        "*",
        F.schema_of_variant("_v").alias("_t"),
        *(F.schema_of_variant(_field(name)).alias(f"_t_{name}") for name in fields),
        *(F.try_variant_get("_v", f"$.{n}", "string").alias(f"_s_{n}") for n in _STRINGS),
        *(F.try_variant_get("_v", f"$.{n}", "bigint").alias(f"_i_{n}") for n in _INTEGERS),
    )
    checked = typed.withColumn("rejected", _rejection())
    valid = F.col("rejected").isNull()
    traffic = valid & (F.col("_s_kind") == "traffic")
    storage = valid & (F.col("_s_kind") == "storage")
    out = [F.col("kafka_partition"), F.col("kafka_offset"), _id(valid).alias("id")]
    for name, kind in COLUMNS[3:-1]:
        source = f"_s_{name}" if name in _STRINGS else f"_i_{name}"
        when = valid if name in ("kind", "tenant", "topic") else _kind_of(name, traffic, storage)
        out.append(F.when(when, F.col(source).cast(kind.lower())).alias(name))
    return checked.select(*out, F.col("rejected"))


def _field(name: str) -> Column:
    return F.variant_get("_v", f"$.{name}", "variant")


def _kind_of(name: str, traffic: Column, storage: Column) -> Column:
    return traffic if name in TRAFFIC_FIELDS else storage


def _id(valid: Column) -> Column:
    key_text = F.when(
        F.col("_key").isNotNull() & F.is_valid_utf8("_key"), F.col("_key").cast("string")
    )
    return F.when(valid, F.col("_s_id")).otherwise(key_text)


def _is_string(name: str) -> Column:
    return F.col(f"_t_{name}") == "STRING"


def _is_count(name: str, most: int = 2**63 - 1) -> Column:
    return (
        (F.col(f"_t_{name}") == "BIGINT")
        & (F.col(f"_i_{name}") >= 0)
        & (F.col(f"_i_{name}") <= most)
    )


def _text_ok(name: str, low: int, high: int) -> Column:
    length = F.char_length(F.col(f"_s_{name}"))
    return _is_string(name) & (length >= low) & (length <= high)


def _printable(name: str) -> Column:
    return ~F.col(f"_s_{name}").rlike(_UNPRINTABLE)


def _topic_ok() -> Column:
    return _is_string("topic") & F.col("_s_topic").rlike(_TOPIC)


def _slashes(column: str) -> Column:
    return F.size(F.split(F.col(column), "/", -1)) - 1


def _rejection() -> Column:
    """The first contract rule the record breaks (null: none), in `tenancy.usage.decode`'s order."""
    size = F.octet_length("_value")
    kind = F.col("_s_kind")
    rules: list[tuple[Column, Column]] = [
        (F.col("_value").isNull(), F.lit("value is null")),
        (
            size > MAX_RECORD_BYTES,
            F.concat(
                F.lit("value of "), size.cast("string"), F.lit(f" bytes over {MAX_RECORD_BYTES}")
            ),
        ),
        (~F.is_valid_utf8("_value"), F.lit("value is not UTF-8 JSON: UnicodeDecodeError")),
        (F.col("_v").isNull(), F.lit("value is not UTF-8 JSON: JSONDecodeError")),
        (~F.col("_t").startswith("OBJECT<"), F.lit("value is not a JSON object")),
        (
            (F.col("_t_v") != "BIGINT") | F.col("_t_v").isNull() | (F.col("_i_v") != VERSION),
            F.concat(F.lit("unknown version "), F.coalesce(F.to_json(_field("v")), F.lit("None"))),
        ),
        (
            ~F.coalesce(_is_string("kind") & kind.isin("traffic", "storage"), F.lit(False)),
            F.concat(F.lit("unknown kind "), F.coalesce(F.to_json(_field("kind")), F.lit("None"))),
        ),
        (~_fields_match(), _fields_message()),
        (
            ~_text_ok("id", 1, MAX_NAME * 2),
            F.lit(f"id must be a non-empty string of at most {MAX_NAME * 2} characters"),
        ),
        (
            ~(_is_string("tenant") & F.col("_s_tenant").rlike(_TENANT)),
            F.lit("tenant must match [a-z][a-z0-9-]{2,15}"),
        ),
        *_traffic_rules(kind == "traffic"),
        *_storage_rules(kind == "storage"),
        (
            F.col("_key").isNotNull() & (F.col("_key") != F.encode(F.col("_s_id"), "UTF-8")),
            F.lit("key does not match the record id"),
        ),
    ]
    verdict = F.when(F.coalesce(rules[0][0], F.lit(True)), rules[0][1])
    for broken, reason in rules[1:]:
        verdict = verdict.when(F.coalesce(broken, F.lit(True)), reason)
    return verdict


def _fields_match() -> Column:
    keys = F.array_sort(F.json_object_keys(F.col("_value").cast("string")))
    traffic = F.array(*(F.lit(n) for n in sorted(TRAFFIC_FIELDS)))
    storage = F.array(*(F.lit(n) for n in sorted(STORAGE_FIELDS)))
    return F.when(F.col("_s_kind") == "traffic", keys == traffic).otherwise(keys == storage)


def _fields_message() -> Column:
    keys = F.json_object_keys(F.col("_value").cast("string"))
    expected = F.when(
        F.col("_s_kind") == "traffic", F.array(*(F.lit(n) for n in sorted(TRAFFIC_FIELDS)))
    ).otherwise(F.array(*(F.lit(n) for n in sorted(STORAGE_FIELDS))))

    def listed(names: Column) -> Column:  # Python's repr of a sorted list of str
        quoted = F.transform(F.array_sort(names), lambda n: F.concat(F.lit("'"), n, F.lit("'")))
        return F.concat(F.lit("["), F.array_join(quoted, ", "), F.lit("]"))

    return F.concat(
        F.col("_s_kind"),
        F.lit(" record fields: missing "),
        listed(F.array_except(expected, keys)),
        F.lit(", unexpected "),
        listed(F.array_except(keys, expected)),
    )


def _traffic_rules(traffic: Column) -> list[tuple[Column, Column]]:
    start, end = F.col("_i_start_ms"), F.col("_i_end_ms")
    rules = [
        (
            ~_text_ok("principal", 1, MAX_NAME),
            f"principal must be a non-empty string of at most {MAX_NAME} characters",
        ),
        (~_printable("principal"), "principal must not hold control characters, DEL or lone surrogates"),
        (~_text_ok("client_id", 0, MAX_NAME), f"client_id must be a string of at most {MAX_NAME} characters"),
        (~_printable("client_id"), "client_id must not hold control characters, DEL or lone surrogates"),
        (~((F.col("_t_topic") == "VOID") | _topic_ok()), "topic must be 1-249 characters of [A-Za-z0-9._-]"),
        (_slashes("_s_id") != 2, "traffic id must be <gateway id>/<incarnation>/<sequence>"),
        *((~_is_count(n), f"{n} must be a non-negative integer") for n in ("start_ms", "end_ms", *COUNTERS)),
        (end < start, "end_ms before start_ms"),
        (end > F.try_add(start - start % HOUR_MS, F.lit(HOUR_MS)), "window crosses an hour boundary"),
    ]  # fmt: skip
    return [(traffic & broken, F.lit(reason)) for broken, reason in rules]


def _storage_rules(storage: Column) -> list[tuple[Column, Column]]:
    suffix = F.concat_ws("/", F.lit(""), *(F.col(f"_s_{n}") for n in ("tenant", "topic")),
                         F.col("_i_partition").cast("string"), F.col("_i_at_ms").cast("string"))  # fmt: skip
    rules = [
        (~_topic_ok(), "topic must be 1-249 characters of [A-Za-z0-9._-]"),
        (~_is_count("partition", 2**31 - 1), "partition must be a non-negative integer"),
        *((~_is_count(n), f"{n} must be a non-negative integer") for n in ("bytes", "at_ms")),
        (
            ~F.col("_s_id").endswith(suffix) | (_slashes("_s_id") != 4),
            "storage id must be <sampler id>/<tenant>/<topic>/<partition>/<at_ms>",
        ),
    ]  # fmt: skip
    return [(storage & broken, F.lit(reason)) for broken, reason in rules]
