"""The usage-record contract: golden bytes both ways, and every rule `decode` enforces."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenancy import usage
from tenancy.usage import StorageSample, TrafficRecord, UsageRecordError

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "usage"

TRAFFIC = TrafficRecord(
    id="gw-1/9f3c2a/42",
    tenant="acme",
    principal="sa-0123456789",
    client_id="checkout",
    topic="orders",
    start_ms=1764072000000,
    end_ms=1764072005000,
    bytes_in=1048576,
    bytes_out=2097152,
    requests=17,
    throttle_ms=250,
    connection_ms=5000,
)
TRAFFIC_NO_TOPIC = TrafficRecord(
    id="gw-1/9f3c2a/43",
    tenant="acme",
    principal="sa-0123456789",
    client_id="",
    topic=None,
    start_ms=1764075595000,
    end_ms=1764075600000,
    requests=3,
    connection_ms=5000,
)
STORAGE = StorageSample(
    id="fleet/acme/orders/3/1764072060000",
    tenant="acme",
    topic="orders",
    partition=3,
    bytes=73400320,
    at_ms=1764072060000,
)
CASES = [
    ("traffic.json", TRAFFIC),
    ("traffic_no_topic.json", TRAFFIC_NO_TOPIC),
    ("storage.json", STORAGE),
]


@pytest.mark.parametrize(("name", "record"), CASES)
def test_encode_matches_golden_bytes(name: str, record: usage.UsageRecord) -> None:
    key, value = usage.encode(record)
    assert value == (GOLDEN / name).read_bytes()
    assert key == record.id.encode()


@pytest.mark.parametrize(("name", "record"), CASES)
def test_decode_golden_bytes(name: str, record: usage.UsageRecord) -> None:
    assert usage.decode(record.id.encode(), (GOLDEN / name).read_bytes()) == record


def test_version_is_the_first_field() -> None:
    _key, value = usage.encode(TRAFFIC)
    assert value.startswith(b'{"v":1,')


def test_ids() -> None:
    assert usage.traffic_id("gw-1", "9f3c2a", 42) == "gw-1/9f3c2a/42"
    assert usage.storage_id("fleet", "acme", "orders", 3, 60000) == "fleet/acme/orders/3/60000"
    with pytest.raises(UsageRecordError):
        usage.traffic_id("gw/1", "x", 1)
    with pytest.raises(UsageRecordError):
        usage.traffic_id("gw", "x", -1)


def test_partition_is_stable_per_tenant() -> None:
    assert usage.partition_for("acme") == usage.partition_for("acme")
    assert {usage.partition_for(f"t{i:03}") for i in range(200)} == set(range(12))
    assert usage.partition_for("acme", 1) == 0


def _mutated(**changes: object) -> bytes:
    fields = json.loads((GOLDEN / "traffic.json").read_bytes())
    fields.update(changes)
    return json.dumps(fields).encode()


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"v": 2}, "unknown version"),
        ({"kind": "bill"}, "unknown kind"),
        ({"bytes_in": -1}, "bytes_in"),
        ({"bytes_in": 1.5}, "bytes_in"),
        ({"requests": True}, "requests"),
        ({"tenant": "Acme"}, "tenant"),
        ({"tenant": "acme_x"}, "tenant"),
        ({"topic": "a/b"}, "topic"),
        ({"end_ms": 1764071999999}, "end_ms before start_ms"),
        ({"end_ms": 1764075600001}, "hour boundary"),
        ({"id": "no-slashes"}, "traffic id"),
        ({"principal": ""}, "principal"),
        ({"principal": "sa-1\u0000"}, "principal must not hold control"),
        ({"client_id": "c" * 256}, "client_id must be a string of at most 255"),
        ({"client_id": "nl\n"}, "client_id must not hold control"),
        ({"client_id": "del\u007f"}, "client_id must not hold control"),
        ({"topic": "nl\n"}, "topic"),
    ],
)
def test_decode_refuses(changes: dict[str, object], reason: str) -> None:
    value = _mutated(**changes)
    key = str(changes.get("id", "gw-1/9f3c2a/42")).encode()
    with pytest.raises(UsageRecordError, match=reason):
        usage.decode(key, value)


def test_decode_refuses_shape_problems() -> None:
    for value, reason in [
        (None, "null"),
        (b"\xff", "not UTF-8 JSON"),
        (b"[1]", "not a JSON object"),
        (b"x" * (usage.MAX_RECORD_BYTES + 1), "over"),
        (_mutated(extra=1), "unexpected"),
    ]:
        with pytest.raises(UsageRecordError, match=reason):
            usage.decode(None, value)
    fields = json.loads((GOLDEN / "traffic.json").read_bytes())
    del fields["bytes_out"]
    with pytest.raises(UsageRecordError, match="missing"):
        usage.decode(None, json.dumps(fields).encode())
    with pytest.raises(UsageRecordError, match="key does not match"):
        usage.decode(b"other", (GOLDEN / "traffic.json").read_bytes())


def test_window_ending_on_the_hour_belongs_to_that_hour() -> None:
    assert usage.decode(None, usage.encode(TRAFFIC_NO_TOPIC)[1]).end_ms % usage.HOUR_MS == 0


counts = st.integers(min_value=0, max_value=2**53)


@given(
    start=st.integers(min_value=0, max_value=2**45),
    length=st.integers(min_value=0, max_value=usage.HOUR_MS),
    bytes_in=counts,
    bytes_out=counts,
    client_id=st.text(max_size=40).map(usage.fitted_text),
)
def test_round_trip(start: int, length: int, bytes_in: int, bytes_out: int, client_id: str) -> None:
    end = min(start + length, usage.window_end_limit(start))
    record = TrafficRecord(
        id="g/i/1",
        tenant="acme",
        principal="sa-1",
        client_id=client_id,
        topic="t.x-1",
        start_ms=start,
        end_ms=end,
        bytes_in=bytes_in,
        bytes_out=bytes_out,
    )
    assert usage.decode(*usage.encode(record)) == record


def test_a_lone_surrogate_is_refused_by_validate_not_by_the_encoder() -> None:
    """Text with no UTF-8 encoding (an HTTP header's invalid bytes, decoded with surrogateescape)
    must be refused as a contract error, never reach `str.encode` and raise something else."""
    record = dataclasses.replace(TRAFFIC_NO_TOPIC, client_id="x\udcff")
    with pytest.raises(UsageRecordError, match="client_id"):
        usage.encode(record)


def test_encode_refuses_a_value_decode_would_refuse() -> None:
    record = dataclasses.replace(TRAFFIC, bytes_in=10**4000)
    with pytest.raises(UsageRecordError, match="over"):
        usage.encode(record)


@given(text=st.text(max_size=600))
def test_fitted_text_always_fits_the_contract(text: str) -> None:
    fitted = usage.fitted_text(text)
    assert len(fitted) <= usage.MAX_NAME
    if len(text) <= usage.MAX_NAME and text.isprintable():
        assert fitted == text  # printable text that fits is kept as sent
    principal = ("p" + fitted)[: usage.MAX_NAME]
    record = dataclasses.replace(TRAFFIC, client_id=fitted, principal=principal)
    assert usage.decode(*usage.encode(record)) == record
