"""The Java usage scan (`billing.source.scan`, the fast path of `billing.source.usage`) against
its reference, `FAST_RECORD` then `from_json`, and against the exact rules: on generated records
(canonical ones, and ones with keys reordered, whitespace, escapes, unicode and broken UTF-8, huge
numbers, fields missing or added, bytes changed) the scan takes exactly the records the
reference takes, with the same fields, and every record ends as the exact path's row (the same
fields, or the same rejection reason). No broker: the records are a DataFrame of the Kafka
source's columns."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from billing.source.usage import COLUMNS, fast_stage, usage_rows
from tenancy.usage import HOUR_MS

pytestmark = pytest.mark.integration

_SCHEMA = "key BINARY, value BINARY, partition INT, offset BIGINT"
_PLAIN = "abcxyz0129-_:. "
_ODD = 'é€\U0001f600"\\\x01\x1f\x7f\x85/\u2028\ufffd'
_BAD_UTF8 = [b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\xff", b"\x80"]
_NUMBERS = [0, 1, 9, 10, 7 * HOUR_MS, 10**18 - 1, 10**18, 2**63 - 1, 2**63, 10**30]
_NOT_COUNTS = [-1, 1.5, 1e3, "7", None, True, [1], {}]


def _text(low: int, high: int) -> st.SearchStrategy[str]:
    plain = st.text(alphabet=_PLAIN, min_size=low, max_size=min(high, 12))
    odd = st.text(alphabet=_PLAIN + _ODD, min_size=low, max_size=min(high, 12))
    edges = st.sampled_from(["x" * high, "x" * (high + 1), "é" * high, "\U0001f600" * high])
    return st.one_of(plain, plain, odd, edges)


_COUNT = st.one_of(st.sampled_from(_NUMBERS), st.integers(0, 10**13), st.integers(0, 10**13))


@st.composite
def _traffic(draw: st.DrawFn) -> dict[str, Any]:
    start = draw(st.sampled_from([0, 7 * HOUR_MS, 7 * HOUR_MS + 1234, 8 * HOUR_MS - 1]))
    end = start + draw(st.sampled_from([0, 5000, HOUR_MS - start % HOUR_MS, -1, HOUR_MS]))
    segments = draw(st.lists(_text(0, 40), min_size=2, max_size=4))
    return {
        "v": 1,
        "id": "/".join(segments) if draw(st.booleans()) else f"gw/inc/{draw(_COUNT)}",
        "kind": "traffic",
        "tenant": draw(st.sampled_from(["acme", "t0001", "abc", "a" * 16, "a" * 17, "Acme", "ab"])),
        "topic": draw(st.sampled_from([None, "orders", "o" * 249, "o" * 250, "a.b_c-D9", "a b"])),
        "principal": draw(_text(1, 255)),
        "client_id": draw(_text(0, 255)),
        "start_ms": start,
        "end_ms": end,
        **{n: draw(_COUNT) for n in ("bytes_in", "bytes_out", "requests", "throttle_ms", "connection_ms")},
    }  # fmt: skip


@st.composite
def _storage(draw: st.DrawFn) -> dict[str, Any]:
    tenant = draw(st.sampled_from(["acme", "t0001"]))
    topic = draw(st.sampled_from(["orders", "o" * 249]))
    partition = draw(st.sampled_from([0, 7, 999_999_999, 10**9, 2**31 - 1]))
    at_ms = draw(st.sampled_from([0, 60_000, 10**18 - 1, 10**18]))
    sampler = draw(st.sampled_from(["s1", "", "é", "s\x7f", "s/x", 's"']))
    id_tenant = draw(st.sampled_from([tenant, tenant, "globex"]))
    return {
        "v": 1,
        "id": f"{sampler}/{id_tenant}/{topic}/{partition}/{at_ms}",
        "kind": "storage",
        "tenant": tenant,
        "topic": topic,
        "partition": partition,
        "bytes": draw(_COUNT),
        "at_ms": at_ms,
    }


@st.composite
def _record(draw: st.DrawFn) -> tuple[bytes | None, bytes]:
    """(key, value): a record, then maybe one change to its fields and one to its encoding."""
    fields = draw(st.one_of(_traffic(), _traffic(), _storage()))
    change = draw(st.integers(0, 9))
    name = draw(st.sampled_from(sorted(fields)))
    if change == 9:
        del fields[name]
    elif change == 8:
        fields[name] = draw(st.sampled_from([*_NOT_COUNTS, "x", 2]))
    elif change == 7:
        fields["extra"] = 1
    elif change == 6:
        fields = dict(draw(st.permutations(list(fields.items()))))
    encoding = draw(st.integers(0, 9))
    separators = (", ", ": ") if encoding == 9 else (",", ":")
    text = json.dumps(fields, ensure_ascii=encoding == 8, separators=separators)
    value = text.encode("utf-8", "surrogatepass")
    if encoding == 7:  # broken UTF-8 inside a string
        at = value.find(
            b'"', value.find(b'"principal"' if b'"principal"' in value else b'"id"') + 12
        )
        value = value[:at] + draw(st.sampled_from(_BAD_UTF8)) + value[at:]
    elif encoding == 6:
        value = (
            draw(st.sampled_from([b" ", b"\n", b""]))
            + value
            + draw(st.sampled_from([b" ", b"\x00"]))
        )
    elif encoding == 5:
        at = draw(st.integers(0, len(value) - 1))
        value = value[:at] + bytes([draw(st.integers(0, 255))]) + value[at + 1 :]
    identity = str(fields.get("id", "")).encode("utf-8", "surrogatepass")
    key = draw(st.sampled_from([None, None, identity, identity + b"x", b""]))
    return key, value  # fmt: skip


_SETTINGS = settings(  # a Spark job per example: few examples of many records, no shrinking
    max_examples=4,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
_QUIET = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")  # large repr


_ANCHORS: list[tuple[bytes | None, bytes]] = [  # in every example: each verdict at least once
    (
        b"gw/inc/7",
        b'{"v":1,"id":"gw/inc/7","kind":"traffic","tenant":"acme","topic":null,"principal":'
        b'"User:alice","client_id":"","start_ms":7200000,"end_ms":7260000,"bytes_in":10,'
        b'"bytes_out":20,"requests":3,"throttle_ms":0,"connection_ms":5}',
    ),
    (
        None,
        b'{"v":1,"id":"s1/acme/orders/0/60000","kind":"storage","tenant":"acme","topic":"orders",'
        b'"partition":0,"bytes":4096,"at_ms":60000}',
    ),
    (None, b'{"v":1,"id":"s1/acme/orders/0/60000","kind":"storage","tenant":"acme"}'),
]


def _frame(spark: Any, records: list[tuple[bytes | None, bytes]]) -> Any:
    rows = [(key, value, i % 3, i) for i, (key, value) in enumerate(records)]
    return spark.createDataFrame(rows, _SCHEMA)


def _by_offset(frame: Any) -> list[Any]:
    return sorted(frame.collect(), key=lambda r: r.kafka_offset)


@_QUIET
@_SETTINGS
@given(records=st.lists(_record(), min_size=300, max_size=300))
def test_the_scan_takes_what_from_json_takes_with_the_same_fields(
    spark: Any, records: list[tuple[bytes | None, bytes]]
) -> None:
    records = [*_ANCHORS, *records]
    frame = _frame(spark, records).cache()
    try:
        scanned = _by_offset(fast_stage(frame))
        reference = _by_offset(fast_stage(frame, scan=False))
    finally:
        frame.unpersist()
    fields = [name for name, _ in COLUMNS[2:-1]]
    for got, want in zip(scanned, reference, strict=True):
        record = records[got.kafka_offset]
        assert got._fast == want._fast, (record, got, want)
        assert (got._key, got._value) == (want._key, want._value), record
        if got._fast:
            assert [got[n] for n in fields] == [want[n] for n in fields], (record, got, want)
    assert [r._fast for r in scanned[: len(_ANCHORS)]] == [True, True, False]


@pytest.mark.slow  # the exact path's plan is large; test_fast_path.py compares it non-slow
@_QUIET
@_SETTINGS
@given(records=st.lists(_record(), min_size=80, max_size=80))
def test_every_record_ends_as_the_exact_path_has_it(
    spark: Any, records: list[tuple[bytes | None, bytes]]
) -> None:
    records = [*_ANCHORS, *records]
    frame = _frame(spark, records).cache()
    try:
        fast = _by_offset(usage_rows(frame))
        exact = _by_offset(usage_rows(frame, fast_path=False))
    finally:
        frame.unpersist()
    assert len(fast) == len(records)
    for got, want in zip(fast, exact, strict=True):
        assert got == want, (records[got.kafka_offset], got, want)


def test_the_scan_refuses_what_unicode_calls_ill_formed(spark: Any) -> None:
    canonical = (
        '{"v":1,"id":"gw/inc/7","kind":"traffic","tenant":"acme","topic":null,"principal":'
        '"P","client_id":"\U0001f600é","start_ms":7200000,"end_ms":7260000,"bytes_in":10,'
        '"bytes_out":20,"requests":3,"throttle_ms":0,"connection_ms":5}'
    ).encode()
    broken = [canonical.replace(b'"P"', b'"' + bad + b'"') for bad in _BAD_UTF8]
    frame = _frame(
        spark, [(None, canonical), (b"gw/inc/7", canonical), *((None, b) for b in broken)]
    )
    got = _by_offset(fast_stage(frame).select("kafka_offset", "_fast", "client_id"))
    assert [r._fast for r in got] == [True, True] + [False] * len(broken)
    assert got[0].client_id == "\U0001f600é"
