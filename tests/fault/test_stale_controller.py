"""A controller cut off from ZooKeeper that keeps sending (issue 4 acceptance).

Three brokers; each reaches ZooKeeper through its own proxy and is reached by the others through
its inter-broker proxy. The controller C has a request in flight to broker B (B's link holds C's
open connection, so the request is stuck on the wire) when C's ZooKeeper link is cut. ZooKeeper
expires C's session; another broker N wins `/controller` with a higher controller epoch and
pushes its state to B over a fresh connection. C notices nothing (its session is only found
expired when it reconnects) and its channel is still waiting for B's answer. When B's link heals,
C's old request arrives after the new election: B answers STALE_CONTROLLER_EPOCH (11) and applies
nothing, as Kafka's `KafkaApis` does. A LeaderAndIsr captured from C earlier, replayed to the
other brokers, is refused the same way. When C's ZooKeeper link heals, C re-registers with a new
broker epoch, stays a follower of the new controller, rejoins every ISR, and the cluster serves
produce and consume; then every replica holds identical batches.
"""

from __future__ import annotations

import asyncio
import dataclasses
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from brokers.controller import requests as rq
from brokers.controller.channel import frame_request, read_response
from brokers.controller.state import LeaderAndIsr
from brokers.wire.errors import ErrorCode
from brokers.wire.primitives import read_uvarint
from infra.fault_proxy import Direction
from infra.stack import BrokerProcess
from tests.cluster_probes import SETTLE_S, TOPIC_SETTLING, ZNODE_MISSING
from tests.fault.harness import FaultCluster
from tests.fault.replicas import assert_replicas_identical
from tests.polling import wait_until

pytestmark = [pytest.mark.fault, pytest.mark.timeout(300)]
TOPIC, TRIGGER = "ledger", "trigger"
PARTITIONS = 3
TOPIC_CONFIG = {"min.insync.replicas": "2"}
_REQUEST_HEADER = struct.Struct(">hhih")
_SIZE = struct.Struct(">i")


@dataclass
class ControlExchange:
    """One controller request seen on a link, with the answer once it came back."""

    connection: int
    client_id: str
    api_key: int
    correlation_id: int
    request: Any
    response: Any = None


class ControlRecorder:
    """A proxy tap that decodes the controller requests (keys 4–6) crossing a link, and their
    responses. Called on the proxy thread; read from the test's thread under a lock."""

    def __init__(self) -> None:
        self.exchanges: list[ControlExchange] = []
        self._buffers: dict[tuple[int, Direction], bytes] = {}
        self._lock = threading.Lock()

    def __call__(self, connection: int, direction: Direction, data: bytes) -> None:
        key = (connection, direction)
        buffer = self._buffers.get(key, b"") + data
        while len(buffer) >= 4 and len(buffer) >= 4 + _SIZE.unpack_from(buffer)[0]:
            size = _SIZE.unpack_from(buffer)[0]
            frame, buffer = buffer[4 : 4 + size], buffer[4 + size :]
            with self._lock:
                if direction == "up":
                    self._request(connection, frame)
                else:
                    self._response(connection, frame)
        self._buffers[key] = buffer

    def _request(self, connection: int, frame: bytes) -> None:
        api_key, _version, correlation, length = _REQUEST_HEADER.unpack_from(frame)
        if api_key not in (rq.LEADER_AND_ISR, rq.STOP_REPLICA, rq.UPDATE_METADATA):
            return
        client_id = frame[10 : 10 + length].decode()
        _tags, body = read_uvarint(memoryview(frame), 10 + length)  # header v2: no tags sent
        request = rq.decode(rq.REQUESTS[api_key], frame, body)
        self.exchanges.append(ControlExchange(connection, client_id, api_key, correlation, request))

    def _response(self, connection: int, frame: bytes) -> None:
        (correlation,) = _SIZE.unpack_from(frame)
        for exchange in self.exchanges:
            if (exchange.connection, exchange.correlation_id) == (connection, correlation):
                exchange.response = read_response(exchange.api_key, frame, correlation)

    def since(self, mark: int, client_id: str) -> list[ControlExchange]:
        with self._lock:
            return [e for e in self.exchanges[mark:] if e.client_id == client_id]

    def mark(self) -> int:
        with self._lock:
            return len(self.exchanges)


def send_raw(broker: BrokerProcess, request: Any) -> Any:
    """One control request to a broker's client endpoint, as a deposed controller would send it."""

    async def exchange() -> Any:
        reader, writer = await asyncio.open_connection(broker.host, broker.port)
        try:
            writer.write(frame_request(request, 1, b"replayed-controller"))
            (size,) = _SIZE.unpack(await reader.readexactly(4))
            return read_response(int(request.__api_key__), await reader.readexactly(size), 1)
        finally:
            writer.close()
            await writer.wait_closed()

    return asyncio.run(exchange())


@pytest.fixture
def cluster(fault_cluster: FaultCluster) -> Iterator[FaultCluster]:
    fault_cluster.start(1)
    wait_until(  # the first broker is the controller
        lambda: fault_cluster.controller() == 1,
        what="broker 1 elected controller",
        timeout=SETTLE_S,
        retry_on=ZNODE_MISSING,  # /controller not written yet
    )
    for node_id in (2, 3):
        fault_cluster.start(node_id)
    wait_until(
        lambda: all(sorted(fault_cluster.metadata(n).brokers) == [1, 2, 3] for n in (1, 2, 3)),
        what="every broker sees brokers 1, 2 and 3",
        timeout=SETTLE_S,
    )
    yield fault_cluster


PARTITIONS_OF = {TOPIC: PARTITIONS, TRIGGER: 1}


def states(cluster: FaultCluster) -> dict[tuple[str, int], LeaderAndIsr]:
    return {(t, p): cluster.state(t, p) for t, count in PARTITIONS_OF.items() for p in range(count)}


def leadership(cluster: FaultCluster) -> dict[tuple[str, int], tuple[int, int]]:
    """What a controller's LeaderAndIsr decides: leader and leader epoch per partition (ISRs
    also move by the leaders' own shrinks and expansions, so they are not compared)."""
    return {key: (s.leader, s.leader_epoch) for key, s in states(cluster).items()}


def view_of(cluster: FaultCluster, node_id: int) -> dict[tuple[str, int], tuple[int, int]]:
    """The same, as broker `node_id` serves it to clients."""
    metadata = cluster.metadata(node_id)
    return {
        (t, p): (
            metadata.topic(t).partitions[p].leader,
            metadata.topic(t).partitions[p].leader_epoch,
        )
        for t, count in PARTITIONS_OF.items()
        for p in range(count)
    }


def test_requests_of_a_controller_cut_off_from_zookeeper_are_refused_after_the_election(
    cluster: FaultCluster,
) -> None:
    old, target, third = 1, 2, 3
    old_client = f"pier-controller-{old}"
    recorder = ControlRecorder()
    cluster.brokers[target].link.tap(recorder)
    cluster.create_topic(TOPIC, PARTITIONS, TOPIC_CONFIG)
    wait_until(
        lambda: cluster.fully_replicated(TOPIC, PARTITIONS),
        what=f"{TOPIC} led with every broker in every ISR",
        timeout=SETTLE_S,
        retry_on=ZNODE_MISSING,  # partition states not written yet
    )
    for p in range(PARTITIONS):
        cluster.produce_eventually(TOPIC, p, b"before", via=third)
    old_epoch, old_broker_epoch = cluster.controller_epoch(), cluster.broker_epoch(old)
    captured = next(
        e.request for e in recorder.since(0, old_client) if e.api_key == rq.LEADER_AND_ISR
    )
    assert captured.controller_epoch == old_epoch

    # C's next request to B gets stuck on B's link; then C loses ZooKeeper.
    cluster.brokers[target].link.hold()
    held = recorder.mark()
    cluster.create_topic(TRIGGER, 1, {})
    wait_until(
        lambda: recorder.since(held, old_client),
        what=f"a request of controller {old} held on broker {target}'s link",
        timeout=SETTLE_S,
    )
    cluster.brokers[old].zk_link.cut()

    new = wait_until(
        lambda: (c := cluster.controller()) != old and c,
        what=f"a controller other than {old}",
        timeout=SETTLE_S,
        retry_on=ZNODE_MISSING,  # no /controller between the expiry and the election
    )
    assert cluster.controller_epoch() > old_epoch
    wait_until(  # B obeys the new epoch
        lambda: cluster.metadata(target).controller_id == new,
        what=f"broker {target} names controller {new}",
        timeout=SETTLE_S,
    )

    def settled() -> bool:  # C's leaderships moved, C out of every ISR
        return all(s.leader not in (old, -1) and old not in s.isr for s in states(cluster).values())

    wait_until(settled, what=f"leaderships and ISRs moved off {old}", timeout=SETTLE_S)
    wait_until(
        lambda: all(view_of(cluster, n) == leadership(cluster) for n in (target, third)),
        what="brokers' metadata agrees with ZooKeeper's leaderships",
        timeout=SETTLE_S,
        retry_on=TOPIC_SETTLING,  # a broker may not know the trigger topic yet
    )
    before_heal = leadership(cluster)

    cluster.brokers[target].link.heal()  # C's stuck request reaches B after the election
    stale = wait_until(
        lambda: [e for e in recorder.since(held, old_client) if e.response],
        what=f"answers to controller {old}'s held requests",
        timeout=SETTLE_S,
    )
    for exchange in stale:
        assert exchange.request.controller_epoch == old_epoch
        assert exchange.response.error_code == ErrorCode.stale_controller_epoch, exchange
    for node_id in (target, third):  # a replayed LeaderAndIsr of C changes nothing either
        # Addressed to the broker's current epoch, so only the controller epoch is stale.
        replayed = dataclasses.replace(captured, broker_epoch=cluster.broker_epoch(node_id))
        response = send_raw(cluster.brokers[node_id].process, replayed)
        assert response.error_code == ErrorCode.stale_controller_epoch
    assert leadership(cluster) == before_heal
    for node_id in (target, third):
        assert view_of(cluster, node_id) == before_heal

    # C comes back: new session, new broker epoch, not the controller, a follower that catches up.
    cluster.brokers[old].zk_link.heal()
    wait_until(
        lambda: cluster.broker_epoch(old) > old_broker_epoch,
        what=f"broker {old} registered again with a new broker epoch",
        timeout=SETTLE_S,
    )
    assert cluster.controller() == new
    wait_until(
        lambda: cluster.metadata(old).controller_id == new,
        what=f"broker {old} names controller {new}",
        timeout=SETTLE_S,
    )
    wait_until(
        lambda: cluster.fully_replicated(TOPIC, PARTITIONS),
        what=f"broker {old} back in every ISR",
        timeout=SETTLE_S,
    )
    for p in range(PARTITIONS):
        value = f"after-{p}".encode()
        offset = cluster.produce_eventually(TOPIC, p, value, via=old)
        assert cluster.consume(old, TOPIC, p, offset) == [value]
    expect = [(TOPIC, p) for p in range(PARTITIONS)]
    assert_replicas_identical(cluster.data_dirs, expect=expect)  # every topic, internal too
