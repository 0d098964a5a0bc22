"""Topic config changes in ZooKeeper mode: an alter sent to one broker reaches every broker's
DescribeConfigs and logs through `/config/changes` (three real brokers); the notification
listener handles changes in order and purges old ones (real ZooKeeper, manual clock); and a
standalone topic with one replica refuses acks=all under `min.insync.replicas=2`."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.static.primitive import i8

from brokers.client import TopicPartition
from brokers.common.clock import ManualClock
from brokers.controller.errors import ZooKeeperUnavailableError
from brokers.controller.zk_client import ZkClient
from brokers.wire.errors import ErrorCode
from brokers.zk import config_changes
from brokers.zk.config_changes import (
    CHANGE_PREFIX,
    CONFIG_CHANGES,
    MAX_ROUND_GAP_S,
    ROUND_GAP_FACTOR,
    ConfigChangeListener,
    encode_change,
    notify_topic_change,
    round_gap_s,
)
from infra.stack import BrokerProcess
from tests.cluster_probes import BROKER_UNREACHABLE, SETTLE_S, TOPIC_SETTLING, metadata_of
from tests.integration.inproc import raw_call, running_broker
from tests.integration.replication.cluster_helpers import produce
from tests.polling import wait_until, wait_until_async
from tests.unit.log.partition_helpers import make_batch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
SESSION = {
    "zookeeper.session.timeout.ms": "4000",
    "auto.leader.rebalance.enable": "false",
    "replica.lag.time.max.ms": "2000",
}
TOPIC = "tuned"
TOPIC_TYPE = 2
SET, DELETE = 0, 1


def described(broker: BrokerProcess, topic: str) -> dict[str, tuple[str | None, int]]:
    """DescribeConfigs answered by this very broker: name -> (value, source)."""
    configs = described_once_known(broker, topic)
    assert configs is not None, f"broker {broker.node_id} does not know {topic}"
    return configs


def described_once_known(
    broker: BrokerProcess, topic: str
) -> dict[str, tuple[str | None, int]] | None:
    """`described`, or None while the broker has not learnt of the topic yet."""
    resource = DescribeConfigsResource(
        resource_type=i8(TOPIC_TYPE), resource_name=topic, configuration_keys=None
    )
    request = DescribeConfigsRequest(
        resources=(resource,), include_synonyms=False, include_documentation=False
    )
    (result,) = raw_call(broker.bootstrap, request).results
    if result.error_code == ErrorCode.unknown_topic_or_partition:
        return None
    assert result.error_code == 0, result.error_message
    return {c.name: (c.value, int(c.config_source)) for c in result.configs}


def alter_on(broker: BrokerProcess, changes: dict[str, str], validate_only: bool) -> int:
    """IncrementalAlterConfigs SET, sent to this very broker; the resource's error code."""
    configs = tuple(
        AlterableConfig(name=n, config_operation=i8(SET), value=v) for n, v in changes.items()
    )
    resource = AlterConfigsResource(
        resource_type=i8(TOPIC_TYPE), resource_name=TOPIC, configs=configs
    )
    request = IncrementalAlterConfigsRequest(resources=(resource,), validate_only=validate_only)
    (response,) = raw_call(broker.bootstrap, request).responses
    return int(response.error_code)


def acks_all_error(broker: BrokerProcess, partition: int) -> ErrorCode:
    answer = produce(
        broker.port, TopicPartition(TOPIC, partition), make_batch(1), acks=-1, timeout_s=15
    )
    return ErrorCode(answer.error_code)


def acks_all_refused(broker: BrokerProcess, partition: int) -> ErrorCode | None:
    return acks_all_error(broker, partition) or None


def acks_all_accepted(broker: BrokerProcess, partition: int) -> bool:
    return acks_all_error(broker, partition) == ErrorCode.none


def min_insync_is(broker: BrokerProcess, value: str) -> bool:
    topic_source = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    return described(broker, TOPIC)["min.insync.replicas"] == (value, topic_source)


def wait_registered(brokers: dict[int, BrokerProcess]) -> None:
    wait_until(
        lambda: all(sorted(metadata_of(b).brokers) == [1, 2, 3] for b in brokers.values()),
        what="brokers 1, 2 and 3 registered",
        timeout=SETTLE_S,
    )


def test_alter_through_one_broker_reaches_every_broker(chroot: str, broker_factory: Any) -> None:
    brokers = {n: broker_factory(node_id=n, zookeeper=chroot, config=SESSION) for n in (1, 2, 3)}
    wait_registered(brokers)
    admin = AdminClient({"bootstrap.servers": brokers[2].bootstrap})
    new = NewTopic(
        TOPIC, num_partitions=3, replication_factor=3, config={"retention.ms": "86400000"}
    )
    admin.create_topics([new])[TOPIC].result(30)

    def leaders() -> dict[int, int] | None:
        topic = metadata_of(brokers[1]).topic(TOPIC)
        found = {p: m.leader for p, m in topic.partitions.items() if len(m.isr) == 3}
        return found if sorted(found) == [0, 1, 2] else None

    leader_of = wait_until(
        leaders,
        what=f"every partition of {TOPIC} led with three replicas in sync",
        timeout=SETTLE_S,
        retry_on=TOPIC_SETTLING,  # broker 1 not told of the new topic yet
    )
    assert leader_of
    assert sorted(leader_of.values()) == [1, 2, 3]  # each broker leads one partition
    # A creation override is described by every broker, not only the one that created it.
    for broker in brokers.values():
        configs = wait_until(
            functools.partial(described_once_known, broker, TOPIC),
            what=f"{TOPIC}'s configs described by broker {broker.node_id}",
            timeout=SETTLE_S,
        )
        assert configs
        assert configs["retention.ms"] == ("86400000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        assert configs["min.insync.replicas"][1] == ConfigSource.DEFAULT_CONFIG.value

    # validate_only changes nothing.
    assert alter_on(brokers[2], {"min.insync.replicas": "4"}, validate_only=True) == 0
    default = ConfigSource.DEFAULT_CONFIG.value
    assert described(brokers[1], TOPIC)["min.insync.replicas"] == ("1", default)
    # Raise min.insync.replicas above the ISR (3) through broker 2 only.
    changes = {"retention.ms": "3600000", "min.insync.replicas": "4"}
    assert alter_on(brokers[2], changes, validate_only=False) == 0
    topic_source = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    for broker in brokers.values():
        wait_until(
            functools.partial(min_insync_is, broker, "4"),
            what=f"min.insync.replicas=4 on broker {broker.node_id}",
            timeout=SETTLE_S,
        )
        configs = described(broker, TOPIC)
        assert configs["retention.ms"] == ("3600000", topic_source)  # incremental: kept
        assert configs["segment.bytes"][1] == ConfigSource.DEFAULT_CONFIG.value
    # Every leader (one per broker) applied it to its log: acks=all is refused.
    for partition, leader in leader_of.items():
        code = wait_until(
            functools.partial(acks_all_refused, brokers[leader], partition),
            what=f"acks=all refused by leader {leader} of partition {partition}",
            timeout=SETTLE_S,
        )
        assert code == ErrorCode.not_enough_replicas

    # confluent-kafka's AdminClient: DELETE the override; acks=all works again everywhere.
    resource = ConfigResource(
        "topic",
        TOPIC,
        incremental_configs=[
            ConfigEntry("min.insync.replicas", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)
    (future,) = admin.describe_configs([ConfigResource("topic", TOPIC)]).values()
    entry = future.result(30)["min.insync.replicas"]
    assert (entry.value, entry.source) == ("1", ConfigSource.DEFAULT_CONFIG.value)
    for partition, leader in leader_of.items():
        wait_until(
            functools.partial(acks_all_accepted, brokers[leader], partition),
            what=f"acks=all accepted by leader {leader} of partition {partition}",
            timeout=SETTLE_S,
        )
    assert described(brokers[3], TOPIC)["retention.ms"][0] == "3600000"


def test_enabling_unclean_election_on_a_topic_elects_its_offline_partition(
    chroot: str, broker_factory: Any
) -> None:
    """Kafka's TopicUncleanLeaderElectionEnable: the partition's only ISR member is dead and
    the other replica is out of sync; setting the topic's unclean.leader.election.enable through
    a non-controller broker makes the controller elect that replica at once."""
    brokers = {n: broker_factory(node_id=n, zookeeper=chroot, config=SESSION) for n in (1, 2, 3)}
    wait_registered(brokers)
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, 2)])[TOPIC].result(30)
    controller = metadata_of(brokers[1]).controller_id
    watcher = brokers[controller]

    def partition_without_controller() -> Any:
        found = metadata_of(watcher).topic(TOPIC).partitions.values()
        return next((p for p in found if controller not in p.replicas and len(p.isr) == 2), None)

    first = wait_until(  # the controller stays up throughout
        partition_without_controller,
        what=f"a partition of {TOPIC} in sync on two brokers other than the controller",
        timeout=SETTLE_S,
        retry_on=TOPIC_SETTLING,  # the controller's metadata may not list the topic yet
    )
    index, leader = first.partition, first.leader
    lagging = next(r for r in first.replicas if r != leader)
    brokers[lagging].kill()
    wait_until(
        lambda: list(metadata_of(watcher).topic(TOPIC).partitions[index].isr) == [leader],
        what=f"ISR of partition {index} shrunk to its leader {leader}",
        timeout=SETTLE_S,
    )
    brokers[leader].kill()
    brokers[lagging].restart()

    def settled() -> bool:
        live = metadata_of(watcher).brokers
        return lagging in live and leader not in live

    wait_until(settled, what=f"broker {lagging} back and {leader} gone", timeout=SETTLE_S)
    # The controller handled both changes; the clean rule finds no live ISR member.
    assert metadata_of(watcher).topics[TOPIC].partitions[index].leader == -1

    wait_until(  # the restarted broker has been told of the topic before it is asked to alter it
        lambda: metadata_of(brokers[lagging]).topic(TOPIC),
        what=f"{TOPIC} known to the restarted broker {lagging}",
        timeout=SETTLE_S,
        retry_on=TOPIC_SETTLING + BROKER_UNREACHABLE,
    )
    assert alter_on(brokers[lagging], {"unclean.leader.election.enable": "true"}, False) == 0
    elected = wait_until(
        lambda: (p := metadata_of(watcher).topic(TOPIC).partitions[index]).leader == lagging and p,
        what=f"the out-of-sync replica {lagging} elected",
        timeout=SETTLE_S,
    )
    assert elected and list(elected.isr) == [lagging]


def test_listener_handles_changes_in_order_and_purges_old_ones(chroot: str) -> None:
    async def scenario() -> None:
        zk = ZkClient(chroot)
        await zk.start()
        clock = ManualClock()
        seen: list[str] = []

        async def on_topic(topic: str) -> None:
            seen.append(topic)

        try:
            await zk.ensure_path(CONFIG_CHANGES)
            await notify_topic_change(zk, "history")  # present at start: not handled
            listener = ConfigChangeListener(zk, clock, on_topic, expiration_ms=1_000)
            await listener.start()
            first = await notify_topic_change(zk, "a")
            await zk.create(f"{CONFIG_CHANGES}/{CHANGE_PREFIX}", b"{garbage", sequence=True)
            await zk.create(
                f"{CONFIG_CHANGES}/{CHANGE_PREFIX}", encode_change("clients", "x"), sequence=True
            )
            await notify_topic_change(zk, "b")

            async def handled_a_b() -> bool:
                return seen == ["a", "b"]

            async def handled_a_b_c() -> bool:
                return seen == ["a", "b", "c"]

            await wait_until_async(handled_a_b, what="changes a and b handled, in order")
            clock.advance(1_000)
            last = await notify_topic_change(zk, "c")  # wakes the listener, which purges
            await wait_until_async(handled_a_b_c, what="change c handled")
            remaining = await zk.children(CONFIG_CHANGES)
            assert remaining == [last.rsplit("/", 1)[1]]
            assert first.rsplit("/", 1)[1] not in remaining
            await listener.stop()
        finally:
            await zk.close()

    asyncio.run(scenario())


def test_a_round_of_notices_re_reads_each_topic_once_in_first_notified_order(chroot: str) -> None:
    """A tenant changing one topic's config again and again costs each broker one re-read of it
    per round of notices, not one per notice."""

    async def scenario() -> None:
        zk = ZkClient(chroot)
        await zk.start()
        seen: list[str] = []

        async def on_topic(topic: str) -> None:
            seen.append(topic)

        try:
            await zk.ensure_path(CONFIG_CHANGES)
            listener = ConfigChangeListener(zk, ManualClock(), on_topic)
            await listener.start()
            await listener.stop()  # no background round: this test runs the one below itself
            for topic in ("a", "b", "a", "a", "c", "b"):
                await notify_topic_change(zk, topic)
            await listener.process()
            assert seen == ["a", "b", "c"]
            await notify_topic_change(zk, "a")
            await listener.process()
            assert seen == ["a", "b", "c", "a"], "handled notices are not handled again"
        finally:
            await zk.close()

    asyncio.run(scenario())


def test_after_each_round_the_listener_pauses_in_proportion_to_the_round(chroot: str) -> None:
    """Every listing names every notice kept (the fleet's sum of all tenants' changes, up to 15
    minutes of them): the listener pauses `ROUND_GAP_FACTOR` times a round's duration after it,
    so its share of the loop is bounded whatever the number; the next round takes what came."""

    async def scenario() -> None:
        zk = ZkClient(chroot)
        await zk.start()
        clock = ManualClock()
        seen: list[str] = []
        pauses: list[float] = []

        async def on_topic(topic: str) -> None:
            seen.append(topic)
            clock.advance(100)  # a round that took 100 ms

        async def sleep(seconds: float) -> None:
            pauses.append(seconds)
            await asyncio.sleep(0)

        try:
            await zk.ensure_path(CONFIG_CHANGES)
            listener = ConfigChangeListener(zk, clock, on_topic, sleep=sleep)
            await listener.start()
            await notify_topic_change(zk, "a")
            await wait_until_async(lambda: _true_when(seen == ["a"]), what="change a handled")
            await wait_until_async(lambda: _true_when(bool(pauses)), what="the pause after it")
            assert pauses[0] == pytest.approx(0.1 * ROUND_GAP_FACTOR)
            await listener.stop()
        finally:
            await zk.close()

    asyncio.run(scenario())
    assert round_gap_s(0.002) == pytest.approx(0.002 * ROUND_GAP_FACTOR)
    assert round_gap_s(60.0) == MAX_ROUND_GAP_S
    assert round_gap_s(-1.0) == 0.0


def test_a_round_that_fails_keeps_its_notices_for_the_next(
    chroot: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ZooKeeper failing in the middle of a round (a notice's read, or the topic's re-read)
    loses nothing: the next round applies what the failed one had taken."""

    async def scenario() -> None:
        zk = ZkClient(chroot)
        await zk.start()
        seen: list[str] = []
        failures = ["get", "apply"]

        async def on_topic(topic: str) -> None:
            if failures and failures[0] == "apply":
                failures.pop(0)
                raise ZooKeeperUnavailableError("lost the session meanwhile")
            seen.append(topic)

        real_get = zk.get

        async def flaky_get(path: str, watch: Any = None) -> Any:
            if failures and failures[0] == "get":
                failures.pop(0)
                raise ZooKeeperUnavailableError("lost the session meanwhile")
            return await real_get(path, watch)

        try:
            await zk.ensure_path(CONFIG_CHANGES)
            clock = ManualClock()
            listener = ConfigChangeListener(zk, clock, on_topic, expiration_ms=1_000)
            await listener.start()
            await listener.stop()  # rounds run below, by hand
            monkeypatch.setattr(zk, "get", flaky_get)
            notice = await notify_topic_change(zk, "a")
            for _ in range(2):
                with pytest.raises(ZooKeeperUnavailableError):
                    await listener.process()
            await listener.process()
            assert seen == ["a"], "the failed rounds' notice applied by the next"
            await listener.process()
            assert seen == ["a"], "and only once"
            real_delete = zk.delete

            async def delete_once_failing(path: str, version: int = -1) -> None:
                monkeypatch.setattr(zk, "delete", real_delete)
                raise ZooKeeperUnavailableError("lost the session meanwhile")

            monkeypatch.setattr(zk, "delete", delete_once_failing)
            clock.advance(1_000)
            with pytest.raises(ZooKeeperUnavailableError):
                await listener.process()  # the purge fails
            await listener.process()
            assert not await zk.exists(notice), "purged by the next round"
        finally:
            await zk.close()

    asyncio.run(scenario())


async def _true_when(value: bool) -> bool:
    return value


def test_a_round_parses_only_new_names_and_leaves_others_deletions_alone(
    chroot: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With thousands of notices kept, a round reads the names its listing adds, not all of
    them; a notice another broker purged first is not deleted again here."""

    async def scenario() -> None:
        zk = ZkClient(chroot)
        await zk.start()
        clock = ManualClock()
        seen: list[str] = []

        async def on_topic(topic: str) -> None:
            seen.append(topic)

        try:
            await zk.ensure_path(CONFIG_CHANGES)
            history = [notify_topic_change(zk, f"h{i}") for i in range(2_000)]
            await asyncio.gather(*history)
            ours = ConfigChangeListener(zk, clock, on_topic, expiration_ms=1_000)
            other = ConfigChangeListener(zk, clock, on_topic, expiration_ms=1_000)
            for listener in (ours, other):
                await listener.start()
                await listener.stop()  # rounds run below, by hand
            parsed: list[str] = []
            real = config_changes.sequence_of

            def counted(name: str) -> int | None:
                parsed.append(name)
                return real(name)

            monkeypatch.setattr(config_changes, "sequence_of", counted)
            await notify_topic_change(zk, "a")
            await ours.process()
            assert seen == ["a"] and len(parsed) == 1, "only the new name is parsed"

            await other.process()
            assert seen == ["a", "a"]
            clock.advance(1_000)  # every notice expired: the other broker purges them first
            await other.process()
            assert await zk.children(CONFIG_CHANGES) == []
            deletes: list[str] = []
            real_delete = zk.delete

            async def counted_delete(path: str, version: int = -1) -> None:
                deletes.append(path)
                await real_delete(path, version)

            monkeypatch.setattr(zk, "delete", counted_delete)
            last = await notify_topic_change(zk, "b")
            clock.advance(1_000)
            await ours.process()  # sees the purge in its listing: nothing left to delete
            assert seen == ["a", "a", "b"] and deletes == []
            clock.advance(1_000)
            await ours.process()
            assert deletes == [last], "its own expired notice is still purged"
        finally:
            await zk.close()

    asyncio.run(scenario())


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    with running_broker(tmp_path, {"num.partitions": "1"}) as address:
        yield address


def test_standalone_topic_with_one_replica_honours_min_insync_replicas(standalone: str) -> None:
    admin = AdminClient({"bootstrap.servers": standalone})
    topic = NewTopic("strict", 1, 1, config={"min.insync.replicas": "2"})
    admin.create_topics([topic])["strict"].result(30)
    outcomes: list[KafkaError | None] = []

    def send(acks: str) -> KafkaError | None:
        producer = Producer(
            {"bootstrap.servers": standalone, "acks": acks, "retries": 0,
             "enable.idempotence": False, "message.timeout.ms": 20_000}
        )  # fmt: skip
        producer.produce("strict", b"v", on_delivery=lambda err, _msg: outcomes.append(err))
        assert producer.flush(30) == 0
        return outcomes.pop()

    refused = send("all")
    assert refused is not None and refused.code() == KafkaError.NOT_ENOUGH_REPLICAS
    assert send("1") is None
