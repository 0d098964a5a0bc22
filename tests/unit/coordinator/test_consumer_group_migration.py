"""The consumer protocol bytes of mixed groups (`brokers.coordinator.consumer_group_migration`):
subscriptions as the Java consumer sends them (v3: null user data, owned partitions, generation,
rack) and as librdkafka does (v0, empty user data), assignments written and read back."""

from __future__ import annotations

import struct

import pytest

from brokers.coordinator.consumer_group_migration import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
)


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def test_a_java_v3_subscription_with_null_user_data() -> None:
    data = (
        struct.pack(">hi", 3, 1) + _string("t")
        + struct.pack(">i", -1)  # null user data
        + struct.pack(">i", 1) + _string("t") + struct.pack(">iii", 2, 0, 3)  # owned
        + struct.pack(">i", 7) + _string("rack-a")  # generation, rack
    )  # fmt: skip
    subscription = decode_subscription(data)
    assert subscription.topics == {"t"}
    assert subscription.owned == {"t": {0, 3}}


def test_a_v0_subscription_with_empty_user_data() -> None:
    data = struct.pack(">hi", 0, 2) + _string("a") + _string("b") + struct.pack(">i", 0)
    assert decode_subscription(data).topics == {"a", "b"}
    assert decode_subscription(data).owned == {}


@pytest.mark.parametrize("data", [b"", b"\x00", struct.pack(">hi", 0, 5) + _string("a")])
def test_short_bytes_do_not_parse(data: bytes) -> None:
    with pytest.raises(ValueError, match="consumer protocol"):
        decode_subscription(data)


def test_assignments_round_trip() -> None:
    partitions = {"a": {0, 2}, "b": {1}}
    assert decode_assignment(encode_assignment(partitions)) == partitions
    assert decode_assignment(b"") == {}
