"""The inter-broker endpoint (Kafka's split of client and inter-broker listeners): the broker
property, the registration JSON, the controller's channel address and LeaderAndIsr `live_leaders`,
and the broker's metadata cache serving clients PLAINTEXT and brokers REPLICATION."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from brokers.common.config import BrokerConfig, BrokerConfigError
from brokers.controller import requests as rq
from brokers.controller import zk_paths
from brokers.controller.context import ControllerContext
from brokers.controller.partition_state_machine import initialize_partitions
from brokers.controller.request_batch import requests_for
from brokers.controller.state import BrokerEndpoint, ReplicaAssignment
from brokers.controller.zk_paths import BrokerRegistration
from brokers.handlers.update_metadata import apply
from brokers.replication.metadata_cache import MetadataCache

pytestmark = pytest.mark.unit


def config(**properties: str) -> BrokerConfig:
    return BrokerConfig(Path("/nonexistent"), properties=properties)


def test_the_property_is_parsed_and_checked_at_start_up() -> None:
    assert config().inter_broker_address is None
    address = config(**{"inter.broker.advertised.address": "10.0.0.5:19092"})
    assert address.inter_broker_address == ("10.0.0.5", 19092)
    for bad in ("nohost", "h:port", ":9092", "h:0", "h:70000"):
        with pytest.raises(BrokerConfigError, match=r"inter\.broker\.advertised\.address"):
            config(**{"inter.broker.advertised.address": bad}).validate()


def test_replica_lag_time_max_ms_is_read_from_the_properties() -> None:
    assert config().replica_lag_time_max_ms == 30_000
    assert config(**{"replica.lag.time.max.ms": "2000"}).replica_lag_time_max_ms == 2000


def registration(broker: int, inter_broker: bool) -> BrokerRegistration:
    endpoints = [BrokerEndpoint("PLAINTEXT", f"client{broker}", 9000 + broker)]
    if inter_broker:
        endpoints.append(BrokerEndpoint("REPLICATION", f"proxy{broker}", 19000 + broker))
    return BrokerRegistration(broker, tuple(endpoints), None, 0, epoch=100 + broker)


def test_registration_lists_both_listeners_as_kafka_does() -> None:
    body = json.loads(zk_paths.encode_broker(registration(1, True)))
    assert body["endpoints"] == ["PLAINTEXT://client1:9001", "REPLICATION://proxy1:19001"]
    assert body["listener_security_protocol_map"] == {
        "PLAINTEXT": "PLAINTEXT",
        "REPLICATION": "PLAINTEXT",
    }
    assert (body["host"], body["port"]) == ("client1", 9001)  # old readers get the client one
    decoded = zk_paths.decode_broker(1, zk_paths.encode_broker(registration(1, True)))
    assert decoded.inter_broker == BrokerEndpoint("REPLICATION", "proxy1", 19001)
    assert registration(2, False).inter_broker == BrokerEndpoint("PLAINTEXT", "client2", 9002)


def test_the_controller_sends_followers_to_the_leaders_inter_broker_endpoint() -> None:
    ctx = ControllerContext(epoch=3)
    ctx.live_brokers = {1: registration(1, True), 2: registration(2, False)}
    ctx.add_topic(
        "t", uuid.UUID(int=7), {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 1))}
    )
    decision = initialize_partitions(ctx, ctx.assignments)
    ctx.apply(decision.changes)
    out = requests_for(ctx, 1, decision)
    lai = next(r for b, r in out if b == 2 and isinstance(r, rq.LeaderAndIsrRequest))
    leaders = {leader.broker_id: (leader.host_name, leader.port) for leader in lai.live_leaders}
    assert leaders == {1: ("proxy1", 19001), 2: ("client2", 9002)}
    um = next(r for _, r in out if isinstance(r, rq.UpdateMetadataRequest))
    listeners = {b.id: [e.listener for e in b.endpoints] for b in um.live_brokers}
    assert listeners == {1: ["PLAINTEXT", "REPLICATION"], 2: ["PLAINTEXT"]}


def update(*brokers: rq.UpdateMetadataBroker) -> rq.UpdateMetadataRequest:
    return rq.UpdateMetadataRequest(
        controller_id=1, controller_epoch=1, topic_states=(), live_brokers=brokers
    )


def endpoint(listener: str, host: str, port: int) -> rq.UpdateMetadataEndpoint:
    return rq.UpdateMetadataEndpoint(port=port, host=host, listener=listener)


def test_clients_get_plaintext_and_brokers_get_replication_from_update_metadata() -> None:
    cache = MetadataCache(cluster_id="c", controller_id=-1)
    apply(
        update(
            # REPLICATION listed first: the client endpoint is still PLAINTEXT.
            rq.UpdateMetadataBroker(
                id=1,
                endpoints=(
                    endpoint("REPLICATION", "proxy1", 19001),
                    endpoint("PLAINTEXT", "c1", 1),
                ),
                rack="r1",
            ),
            rq.UpdateMetadataBroker(id=2, endpoints=(endpoint("PLAINTEXT", "c2", 2),)),
        ),
        cache,
    )
    assert (cache.brokers[1].host, cache.brokers[1].port, cache.brokers[1].rack) == ("c1", 1, "r1")
    assert (cache.brokers[2].host, cache.brokers[2].port) == ("c2", 2)
    one, two = cache.inter_broker_endpoint(1), cache.inter_broker_endpoint(2)
    assert one is not None and (one.host, one.port) == ("proxy1", 19001)
    assert two is not None and (two.host, two.port) == ("c2", 2)  # falls back to the client one
    assert cache.inter_broker_endpoint(3) is None
    apply(update(rq.UpdateMetadataBroker(id=2, endpoints=(endpoint("PLAINTEXT", "c2", 2),))), cache)
    assert cache.inter_broker == {} and sorted(cache.brokers) == [2]
