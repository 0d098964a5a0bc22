"""Znode codecs: Kafka's exact JSON, round trips, and bad bytes raising ZNodeFormatError."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.controller import zk_paths as zk
from brokers.controller.errors import ZNodeFormatError
from brokers.controller.state import BrokerEndpoint, LeaderAndIsr, ReplicaAssignment, TopicPartition

pytestmark = pytest.mark.unit


def test_paths_follow_kafka_zookeeper_layout() -> None:
    tp = TopicPartition("orders", 3)
    assert zk.broker_path(7) == "/brokers/ids/7"
    assert zk.topic_path("orders") == "/brokers/topics/orders"
    assert zk.partition_state_path(tp) == "/brokers/topics/orders/partitions/3/state"
    assert zk.topic_config_path("orders") == "/config/topics/orders"
    assert zk.delete_topic_path("orders") == "/admin/delete_topics/orders"


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "x" * 250, "sp ace", "ü"])
def test_illegal_topic_names_never_become_paths(name: str) -> None:
    with pytest.raises(ZNodeFormatError):
        zk.topic_path(name)


def test_broker_registration_is_kafka_v5_json() -> None:
    reg = zk.BrokerRegistration(
        1, (BrokerEndpoint("PLAINTEXT", "h1", 9092),), "r1", 1_700_000_000_123
    )
    body = json.loads(zk.encode_broker(reg))
    assert body == {
        "version": 5,
        "host": "h1",
        "port": 9092,
        "endpoints": ["PLAINTEXT://h1:9092"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "rack": "r1",
        "jmx_port": -1,
        "timestamp": "1700000000123",
        "features": {},
    }
    assert b" " not in zk.encode_broker(reg)
    decoded = zk.decode_broker(1, zk.encode_broker(reg), epoch=42)
    assert decoded == zk.BrokerRegistration(
        1, reg.endpoints, "r1", reg.timestamp_ms, features={}, epoch=42
    )
    assert (decoded.host, decoded.port) == ("h1", 9092)


def test_broker_without_rack_omits_the_key_and_decodes_ipv6() -> None:
    reg = zk.BrokerRegistration(2, (BrokerEndpoint("PLAINTEXT", "[::1]", 1),), None, 5)
    assert "rack" not in json.loads(zk.encode_broker(reg))
    assert zk.decode_broker(2, zk.encode_broker(reg)).endpoints[0].host == "[::1]"


def test_controller_znode_and_epoch() -> None:
    reg = zk.ControllerRegistration(3, 99)
    assert json.loads(zk.encode_controller(reg)) == {
        "version": 2,
        "brokerid": 3,
        "timestamp": "99",
        "kraftControllerEpoch": -1,
    }
    assert zk.decode_controller(zk.encode_controller(reg)) == reg
    # Older Kafka wrote version 1 without kraftControllerEpoch.
    assert zk.decode_controller(b'{"version":1,"brokerid":4,"timestamp":"1"}').broker_id == 4
    assert zk.encode_epoch(12) == b"12"
    assert zk.decode_epoch(b"12") == 12


def test_topic_assignment_json_and_round_trip() -> None:
    topic_id = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assignment = zk.TopicAssignment(
        topic_id,
        {
            0: ReplicaAssignment((1, 2, 3)),
            1: ReplicaAssignment((2, 3, 4), adding=(4,), removing=(1,)),
        },
    )
    body = json.loads(zk.encode_topic(assignment))
    assert body["version"] == 3
    assert body["partitions"] == {"0": [1, 2, 3], "1": [2, 3, 4]}
    assert body["adding_replicas"] == {"1": [4]}
    assert body["removing_replicas"] == {"1": [1]}
    assert len(body["topic_id"]) == 22 and "=" not in body["topic_id"]
    assert zk.decode_topic(zk.encode_topic(assignment)) == assignment


def test_topic_id_uses_kafka_base64_form() -> None:
    # Kafka's Uuid.toString of the all-zero-but-last-byte id.
    topic_id = uuid.UUID(int=1)
    assert zk.topic_id_to_str(topic_id) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert zk.topic_id_from_str("AAAAAAAAAAAAAAAAAAAAAQ") == topic_id


def test_partition_state_json() -> None:
    state = LeaderAndIsr(2, 5, (2, 3), 7, zk_version=4)
    assert json.loads(zk.encode_partition_state(state)) == {
        "controller_epoch": 7,
        "leader": 2,
        "version": 1,
        "leader_epoch": 5,
        "isr": [2, 3],
    }
    assert zk.decode_partition_state(zk.encode_partition_state(state), 4) == state


def test_config_isr_change_producer_block_cluster_id() -> None:
    config = {"retention.ms": "1000", "unclean.leader.election.enable": "true"}
    assert json.loads(zk.encode_topic_config(config)) == {"version": 1, "config": config}
    assert zk.decode_topic_config(zk.encode_topic_config(config)) == config
    tps = [TopicPartition("a", 0), TopicPartition("b", 9)]
    assert json.loads(zk.encode_isr_change(tps)) == {
        "version": 1,
        "partitions": [{"topic": "a", "partition": 0}, {"topic": "b", "partition": 9}],
    }
    assert zk.decode_isr_change(zk.encode_isr_change(tps)) == tps
    block = zk.ProducerIdBlock(1, 1000, 1999)
    assert json.loads(zk.encode_producer_id_block(block)) == {
        "version": 1,
        "broker": 1,
        "block_start": "1000",
        "block_end": "1999",
    }
    assert zk.decode_producer_id_block(zk.encode_producer_id_block(block)) == block
    assert json.loads(zk.encode_cluster_id("abc")) == {"version": "1", "id": "abc"}
    assert zk.decode_cluster_id(zk.encode_cluster_id("abc")) == "abc"


GARBAGE = [None, b"", b"\xff\xfe", b"[]", b"{", b"12 34", b'"text"']
DECODERS: list[Callable[[bytes | None], object]] = [
    zk.decode_partition_state,
    lambda d: zk.decode_broker(1, d),
    zk.decode_topic,
    zk.decode_producer_id_block,
    zk.decode_controller,
    zk.decode_epoch,
    zk.decode_isr_change,
    zk.decode_cluster_id,
    zk.decode_topic_config,
]


@pytest.mark.parametrize("data", GARBAGE)
def test_garbage_raises_the_domain_error_in_every_decoder(data: bytes | None) -> None:
    for decode in DECODERS:
        with pytest.raises(ZNodeFormatError):
            decode(data)


@pytest.mark.parametrize(
    ("decode", "data"),
    [
        (
            zk.decode_partition_state,
            b'{"leader":true,"leader_epoch":1,"isr":[1],"controller_epoch":1}',
        ),
        (
            zk.decode_partition_state,
            b'{"leader":1,"leader_epoch":1,"isr":"1","controller_epoch":1}',
        ),
        (zk.decode_partition_state, b'{"leader":1,"leader_epoch":1,"isr":[1]}'),
        (
            lambda d: zk.decode_broker(1, d),
            b'{"version":5,"endpoints":["nope"],"timestamp":"1","jmx_port":-1}',
        ),
        (
            lambda d: zk.decode_broker(1, d),
            b'{"version":5,"endpoints":[],"timestamp":1,"jmx_port":-1}',
        ),
        (
            lambda d: zk.decode_broker(1, d),
            b'{"version":1,"endpoints":[],"timestamp":"1","jmx_port":-1}',
        ),
        (zk.decode_topic, b'{"version":3,"partitions":{"x":[1]}}'),
        (zk.decode_topic, b'{"version":3,"partitions":{"0":[1.5]}}'),
        (zk.decode_topic, b'{"version":3,"partitions":{"0":[1]},"topic_id":"short"}'),
        (zk.decode_producer_id_block, b'{"broker":1,"block_start":"9","block_end":"3"}'),
        (zk.decode_producer_id_block, b'{"broker":1,"block_start":"1e3","block_end":"3"}'),
        (zk.decode_epoch, b"1.5"),
        (zk.decode_topic_config, b'{"version":1,"config":{"a":1}}'),
        (zk.decode_isr_change, b'{"version":1,"partitions":[{"topic":"a"}]}'),
    ],
)
def test_malformed_fields_raise_the_domain_error(
    decode: Callable[[bytes], object], data: bytes
) -> None:
    with pytest.raises(ZNodeFormatError):
        decode(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80) | st.text(max_size=60).map(str.encode))
def test_decoders_never_crash(data: bytes) -> None:
    for decode in DECODERS:
        with contextlib.suppress(ZNodeFormatError):
            decode(data)


ids = st.lists(st.integers(0, 2**31 - 1), max_size=5).map(tuple)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.integers(0, 10_000), ids, max_size=8), st.uuids() | st.none())
def test_topic_round_trip_property(
    partitions: dict[int, tuple[int, ...]], topic_id: uuid.UUID | None
) -> None:
    assignment = zk.TopicAssignment(
        topic_id, {p: ReplicaAssignment(r) for p, r in partitions.items()}
    )
    assert zk.decode_topic(zk.encode_topic(assignment)) == assignment


def test_equal_assignments_and_states_are_one_shared_instance() -> None:
    """Issue 25: 10,000 partitions over three brokers have a handful of distinct replica lists
    and states; the controller's context holds one instance of each, not a copy per partition."""
    topic = zk.decode_topic(
        json.dumps({"version": 2, "partitions": {"0": [1], "1": [2], "2": [1]}}).encode()
    )
    assert topic.partitions[0] is topic.partitions[2] and topic.partitions[0].replicas == (1,)
    state = json.dumps(
        {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1]}
    )
    a, b = (
        zk.decode_partition_state(state.encode(), 0),
        zk.decode_partition_state(state.encode(), 0),
    )
    assert a is b and a.isr is topic.partitions[0].replicas
    assert zk.decode_partition_state(state.encode(), 1) is not a  # another znode version


def test_a_topic_added_to_the_context_hands_back_its_stored_keys() -> None:
    from brokers.controller.context import ControllerContext

    ctx = ControllerContext()
    keys = ctx.add_topic(
        "t", uuid.uuid4(), {1: ReplicaAssignment((2,)), 0: ReplicaAssignment((1,))}
    )
    assert keys == [TopicPartition("t", 0), TopicPartition("t", 1)]
    stored = {tp: tp for tp in ctx.assignments}
    assert all(stored[k] is k for k in keys)
