"""`__transaction_state` records byte for byte as Kafka writes them. The golden bytes were made by
Kafka 4.1.1's own generated classes (`MessageUtil.toVersionPrefixedBytes` over
`TransactionLogKey` / `TransactionLogValue`, run with the jars of infra/reference), so a change in
either direction breaks a test; malformed input only ever raises TxnRecordError."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokers.coordinator.transactions.errors import TxnRecordError
from brokers.coordinator.transactions.records import (
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    group_partitions,
)
from brokers.coordinator.transactions.state_topic import partition_for

pytestmark = pytest.mark.unit

KEY = bytes.fromhex("000000066d792d74786e")
V0_ONGOING = bytes.fromhex(
    "000000000000000003e800030000ea60010000000200125f5f636f6e73756d65725f6f6666736574730000"
    "00010000001100066f72646572730000000200000000000000020000018bcfe5687b0000018bcfe56800"
)
V1_ONGOING = bytes.fromhex(
    "000100000000000003e800030000ea600103135f5f636f6e73756d65725f6f66667365747302000000110007"
    "6f7264657273030000000000000002000000018bcfe5687b0000018bcfe5680000"
)
V0_EMPTY = bytes.fromhex(
    "000000000000000000070000000dbba000ffffffff0000018bcfe56800ffffffffffffffff"
)
V1_TAGGED = bytes.fromhex(
    "000100000000000007d000000000ea6004010000018bcfe569f40000018bcfe5680002000800000000000007"
    "cf02020002"
)
ONGOING = TransactionLogValue(
    producer_id=1000,
    producer_epoch=3,
    timeout_ms=60_000,
    status=1,
    partitions=(("__consumer_offsets", (17,)), ("orders", (0, 2))),
    last_update_ms=1_700_000_000_123,
    start_ms=1_700_000_000_000,
)


def test_key_matches_kafka() -> None:
    assert encode_key("my-txn") == KEY
    assert decode_key(KEY) == "my-txn"


def test_unknown_key_version_is_skipped_not_an_error() -> None:
    assert decode_key(b"\x00\x05\x00\x01x") is None


def test_value_v0_matches_kafka() -> None:
    assert encode_value(ONGOING) == V0_ONGOING
    assert decode_value(V0_ONGOING) == ONGOING


def test_empty_transaction_has_a_null_partition_list() -> None:
    empty = TransactionLogValue(7, 0, 900_000, 0, None, 1_700_000_000_000, -1)
    assert encode_value(empty) == V0_EMPTY
    assert decode_value(V0_EMPTY) == empty


def test_value_v1_flexible_matches_kafka_and_reads_its_tagged_fields() -> None:
    assert encode_value(ONGOING, version=1) == V1_ONGOING
    assert decode_value(V1_ONGOING) == ONGOING
    tagged = decode_value(V1_TAGGED)
    assert tagged == TransactionLogValue(
        producer_id=2000,
        producer_epoch=0,
        timeout_ms=60_000,
        status=4,
        partitions=(),
        last_update_ms=1_700_000_000_500,
        start_ms=1_700_000_000_000,
        previous_producer_id=1999,
        client_transaction_version=2,
    )
    assert encode_value(tagged, version=1) == V1_TAGGED


def test_tombstone() -> None:
    assert decode_value(None) is None


def test_partitions_grouped_by_topic_sorted() -> None:
    pairs = [("b", 2), ("a", 1), ("b", 0)]
    assert group_partitions(pairs) == (("a", (1,)), ("b", (0, 2)))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\x00\x09" + V0_ONGOING[2:],  # unknown version
        V0_ONGOING[:-1],  # truncated
        V0_ONGOING[:17] + b"\x7f\xff\xff\xff" + V0_ONGOING[21:],  # absurd array length
        V1_ONGOING[:20] + b"\xff\xff\xff\xff\xff\x01",  # varint too long
    ],
)
def test_malformed_values_raise_txn_record_error(data: bytes) -> None:
    with pytest.raises(TxnRecordError):
        decode_value(data)


@given(st.binary(max_size=80))
def test_decoding_arbitrary_bytes_never_raises_anything_else(data: bytes) -> None:
    for decode in (decode_key, decode_value):
        with contextlib.suppress(TxnRecordError):
            decode(data)


values = st.builds(
    TransactionLogValue,
    producer_id=st.integers(0, 2**63 - 1),
    producer_epoch=st.integers(0, 2**15 - 1),
    timeout_ms=st.integers(1, 2**31 - 1),
    status=st.integers(0, 7),
    partitions=st.none()
    | st.lists(
        st.tuples(st.text(min_size=1, max_size=20), st.tuples(st.integers(0, 1000))), max_size=4
    ).map(tuple),
    last_update_ms=st.integers(-1, 2**62),
    start_ms=st.integers(-1, 2**62),
)


@given(values, st.sampled_from([0, 1]))
def test_round_trip(value: TransactionLogValue, version: int) -> None:
    assert decode_value(encode_value(value, version)) == value


@pytest.mark.parametrize(
    ("transactional_id", "expected"),
    # Kafka: Utils.abs("my-txn".hashCode()) % 50 and friends, computed with Java.
    [("my-txn", 45), ("", 0), ("tx-e2e", 3)],
)
def test_partition_for_is_kafkas(transactional_id: str, expected: int) -> None:
    assert partition_for(transactional_id, 50) == expected
