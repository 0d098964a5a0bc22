"""Three real broker processes in ZooKeeper mode: membership, one controller, RF 3 topics seen from
every broker, leader failover after `kill -9`."""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

import pytest

from brokers.client.admin import Admin
from brokers.client.topics import NewTopic
from brokers.controller import requests as rq
from brokers.controller import zk_paths
from brokers.controller.channel import frame_request, read_response
from brokers.wire.errors import ErrorCode
from infra.stack import BrokerProcess, ZooKeeperProcess
from pier.cli import main
from tests.cluster_probes import SETTLE_S, TOPIC_SETTLING, metadata_of, start_registered, zk_read
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
SESSION = {"zookeeper.session.timeout.ms": "4000", "auto.leader.rebalance.enable": "false"}


def test_three_brokers_elect_a_controller_create_rf3_and_fail_over(
    chroot: str, broker_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    brokers = {n: broker_factory(node_id=n, zookeeper=chroot, config=SESSION) for n in (1, 2, 3)}

    def everyone_registered() -> bool:
        return all(sorted(metadata_of(b).brokers) == [1, 2, 3] for b in brokers.values())

    wait_until(everyone_registered, what="brokers 1, 2 and 3 registered", timeout=SETTLE_S)
    controllers = {metadata_of(b).controller_id for b in brokers.values()}
    assert len(controllers) == 1 and controllers <= {1, 2, 3}

    async def create() -> dict[str, Any]:
        async with Admin.for_bootstrap(brokers[1].bootstrap) as admin:
            return await admin.create_topics([NewTopic("orders", 3, 3)])

    assert asyncio.run(create()) == {"orders": None}

    def rf3_everywhere() -> bool:
        for broker in brokers.values():
            topic = metadata_of(broker).topic("orders")
            if len(topic.partitions) != 3:
                return False
            for p in topic.partitions.values():
                if sorted(p.replicas) != [1, 2, 3] or p.leader not in (1, 2, 3):
                    return False
        return True

    wait_until(
        rf3_everywhere,
        what="orders led, on three replicas, seen by every broker",
        timeout=SETTLE_S,
        retry_on=TOPIC_SETTLING,  # a broker not told of the new topic yet
    )
    before = metadata_of(brokers[1]).topic("orders").partitions[0]
    victim = before.leader
    brokers[victim].kill()
    survivor = brokers[next(n for n in brokers if n != victim)]

    def new_leader() -> Any:
        p = metadata_of(survivor).topic("orders").partitions[0]
        return p if p.leader not in (victim, -1) else None

    after = wait_until(new_leader, what=f"a leader other than {victim}", timeout=SETTLE_S)
    assert after
    assert after.leader in before.isr and after.leader != victim
    assert after.leader_epoch > before.leader_epoch
    data, _ = zk_read(chroot, "/brokers/topics/orders/partitions/0/state")
    state = zk_paths.decode_partition_state(data)
    assert state.leader == after.leader and victim not in state.isr

    def cluster_report() -> Any:
        # Every partition had the victim as a replica; the controller shrinks their ISRs one
        # write at a time, and the survivor's metadata follows: wait for the settled view.
        capsys.readouterr()
        assert main(["cluster", "--bootstrap", survivor.bootstrap, "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        gone = victim not in [b["id"] for b in report["brokers"]]
        settled = {r["partition"] for r in report["under_replicated"]} == {0, 1, 2}
        return report if gone and settled else None

    report = wait_until(cluster_report, what=f"a report without broker {victim}", timeout=SETTLE_S)
    assert report
    assert report["controller"] in (1, 2, 3) and report["offline"] == []


def test_a_controller_that_lost_its_session_is_ignored_after_the_new_election(
    zookeeper: ZooKeeperProcess, chroot: str, broker_factory: Any
) -> None:
    brokers = start_registered(broker_factory, chroot, (1, 2), SESSION)
    first = metadata_of(brokers[1]).controller_id
    epoch_before = int(zk_read(chroot, "/controller_epoch")[0])
    brokers[first].kill()  # its session ends; the other broker must take over with a new epoch
    other = brokers[next(n for n in brokers if n != first)]
    wait_until(
        lambda: metadata_of(other).controller_id not in (first, -1),
        what=f"a controller other than {first}",
        timeout=SETTLE_S,
    )
    wait_until(
        lambda: int(zk_read(chroot, "/controller_epoch")[0]) > epoch_before,
        what="a new controller epoch",
        timeout=SETTLE_S,
    )
    # The deposed controller's requests (its old epoch) are answered STALE_CONTROLLER_EPOCH and
    # change nothing.
    stale = rq.UpdateMetadataRequest(
        controller_id=first,
        controller_epoch=epoch_before,
        broker_epoch=-1,
        topic_states=(),
        live_brokers=(),
    )

    def refused() -> bool:
        return bool(send_raw(other, stale).error_code == ErrorCode.stale_controller_epoch)

    wait_until(refused, what="the deposed controller's request refused", timeout=SETTLE_S)
    assert sorted(metadata_of(other).brokers) == [n for n in brokers if n != first]


def send_raw(broker: BrokerProcess, request: Any) -> Any:
    async def exchange() -> Any:
        reader, writer = await asyncio.open_connection(broker.host, broker.port)
        try:
            writer.write(frame_request(request, 1, b"old-controller"))
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            return read_response(int(request.__api_key__), await reader.readexactly(size), 1)
        finally:
            writer.close()

    return asyncio.run(exchange())


def test_killing_the_controller_takes_its_replicas_out_of_every_isr(
    chroot: str, broker_factory: Any
) -> None:
    """The new controller must not only re-elect the dead one's leaderships but also drop its
    follower replicas from the ISRs it finds on takeover (Kafka's ReplicaStateMachine.startup)."""
    brokers = {n: broker_factory(node_id=n, zookeeper=chroot, config=SESSION) for n in (1, 2, 3)}
    wait_until(
        lambda: all(sorted(metadata_of(b).brokers) == [1, 2, 3] for b in brokers.values()),
        what="brokers 1, 2 and 3 registered",
        timeout=SETTLE_S,
    )

    async def create() -> dict[str, Any]:
        async with Admin.for_bootstrap(brokers[1].bootstrap) as admin:
            return await admin.create_topics([NewTopic("ledger", 6, 3)])

    assert asyncio.run(create()) == {"ledger": None}
    controller = metadata_of(brokers[1]).controller_id
    wait_until(
        lambda: len(metadata_of(brokers[controller]).topic("ledger").partitions) == 6,
        what="ledger's six partitions in the controller's metadata",
        timeout=SETTLE_S,
        retry_on=TOPIC_SETTLING,
    )
    brokers[controller].kill()
    survivor = brokers[next(n for n in brokers if n != controller)]

    def settled() -> bool:
        meta = metadata_of(survivor)
        if meta.controller_id in (controller, -1):
            return False
        for index in range(6):
            data, _ = zk_read(chroot, f"/brokers/topics/ledger/partitions/{index}/state")
            state = zk_paths.decode_partition_state(data)
            if controller in state.isr or state.leader in (controller, -1):
                return False
        return True

    wait_until(
        settled, what=f"controller {controller} out of every ISR and leadership", timeout=SETTLE_S
    )
