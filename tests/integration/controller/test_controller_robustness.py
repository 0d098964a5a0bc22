"""Controller robustness against a real ZooKeeper: a lost election reply, a failed failover, a
decision too large for one multi-op, and partition caps of ZooKeeper-mode topic admin."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from brokers.common.clock import ManualClock
from brokers.common.config import BrokerConfig
from brokers.controller import zk_paths
from brokers.controller.context import ControllerContext
from brokers.controller.controller import Controller
from brokers.controller.controller_store import ControllerStore, PartialWriteError
from brokers.controller.election import ControllerElection
from brokers.controller.errors import ZNodeVersionError, ZooKeeperUnavailableError
from brokers.controller.state import LeaderAndIsr, ReplicaAssignment, TopicPartition
from brokers.controller.zk_client import CreateOp, Op, SetOp, ZkClient
from brokers.handlers import describe_configs
from brokers.log.config import LogConfig
from brokers.log.log_manager import LogManager
from brokers.replication.errors import PolicyViolationError, TopicExistsError
from brokers.replication.local_topics import TopicLimits
from brokers.replication.metadata_cache import (
    BrokerEndpoint,
    MetadataCache,
    PartitionMetadata,
    TopicMetadata,
)
from brokers.server.context import RequestContext
from brokers.wire.headers import RequestHeader
from brokers.zk.topics import ZkTopicAdmin
from tests.integration.cluster.test_controller import RecordingChannel, register
from tests.integration.controller.test_zookeeper_controller import (
    WAIT_S,
    expire_session,
    on_loop,
    run,
    started,
)
from tests.polling import wait_until_async
from tests.unit.handlers.admin_harness import entity

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]
CLOCK = ManualClock()


class LostReplyZk(ZkClient):
    """The next multi-op is applied by the server but its reply is lost (connection loss)."""

    lose_next_reply = False

    async def multi(self, ops: Sequence[Op]) -> list[Any]:
        results = await super().multi(ops)
        if self.lose_next_reply:
            self.lose_next_reply = False
            raise ZooKeeperUnavailableError("ConnectionLoss: reply lost")
        return results


class FlakyZk(ZkClient):
    """Listing `fail_path`'s children fails once, as a connection loss would."""

    fail_path = ""

    async def children(self, path: str, watch: Any = None) -> list[str]:
        if path == self.fail_path:
            self.fail_path = ""
            raise ZooKeeperUnavailableError("ConnectionLoss: lost mid-load")
        return await super().children(path, watch)


async def epoch_in_zk(zk: ZkClient) -> int:
    return zk_paths.decode_epoch((await zk.get(zk_paths.CONTROLLER_EPOCH)).data)


def test_an_election_whose_reply_was_lost_is_adopted(chroot: str) -> None:
    async def scenario() -> None:
        zk = LostReplyZk(chroot)
        await zk.start()
        other = await started(chroot)
        elected: list[int] = []
        election = ControllerElection(zk, 1, CLOCK, on_elected=elected.append)
        try:
            zk.lose_next_reply = True
            with pytest.raises(ZooKeeperUnavailableError):
                await election.elect()
            assert not election.is_controller and await epoch_in_zk(zk) == 1
            # The watch on `/controller` re-runs the election, which adopts the node and epoch.
            await wait_until_async(
                on_loop(lambda: election.is_controller),
                what="this broker elected controller",
                timeout=WAIT_S,
            )
            assert (election.epoch, election.epoch_zk_version, elected) == (1, 1, [1])
            await zk.multi([election.fence()])  # the adopted fence holds
            assert not await ControllerElection(other, 2, CLOCK).elect()
            assert await election.elect() and elected == [1], "adopted once"
        finally:
            await zk.close()
            await other.close()

    run(scenario())


def test_a_controller_znode_of_another_session_is_not_adopted(chroot: str) -> None:
    async def scenario() -> None:
        old, new = await started(chroot), await started(chroot)
        try:
            assert await ControllerElection(old, 1, CLOCK).elect()  # broker 1's older session
            restarted = ControllerElection(new, 1, CLOCK)
            assert not await restarted.elect()
            assert restarted.active_controller == 1 and not restarted.is_controller
            await old.close()  # its ephemeral node goes; the watch runs the election again
            await wait_until_async(
                on_loop(lambda: restarted.is_controller),
                what="the restarted broker elected controller",
                timeout=WAIT_S,
            )
            assert restarted.epoch == 2
        finally:
            await new.close()

    run(scenario())


def test_a_failed_failover_moves_the_controller_and_the_election_runs_again(chroot: str) -> None:
    async def scenario() -> None:
        zk = FlakyZk(chroot, session_timeout_s=4.0)
        await zk.start()
        broker_zk, _ = await register(chroot, 1)
        await zk.create(
            zk_paths.topic_path("orders"),
            zk_paths.encode_topic(
                zk_paths.TopicAssignment(uuid.uuid4(), {0: ReplicaAssignment((1,))})
            ),
        )
        channel = RecordingChannel()
        election = ControllerElection(zk, 1, CLOCK)
        controller = Controller(zk, election, channel, auto_rebalance=False)
        epochs: list[int] = []

        def on_elected(epoch: int) -> None:
            epochs.append(epoch)
            controller.on_elected(epoch)

        election.follow(on_elected, controller.on_resigned)
        zk.fail_path = zk_paths.BROKER_TOPICS  # the first failover loses ZooKeeper mid-load
        try:
            assert await election.start()
            tp = TopicPartition("orders", 0)
            await wait_until_async(
                on_loop(lambda: tp in controller.context.leadership),
                what="the partition's leadership known to the controller",
                timeout=WAIT_S,
            )
            assert epochs == [1, 2] and election.epoch == 2 and await epoch_in_zk(zk) == 2
            assert controller.active and controller.context.epoch == 2
            assert channel.live == {1}
        finally:
            await controller.close()
            await zk.close()
            await broker_zk.close()

    run(scenario())


def test_moving_never_deletes_a_newer_controllers_znode(chroot: str) -> None:
    async def scenario() -> None:
        zk, other = await started(chroot), await started(chroot)
        election, standby = ControllerElection(zk, 1, CLOCK), ControllerElection(other, 2, CLOCK)
        try:
            assert await election.elect() and not await standby.elect()
            stale = (election.epoch, election.epoch_zk_version)
            expire_session(zk, chroot.split("/", maxsplit=1)[0])
            await wait_until_async(
                on_loop(lambda: standby.is_controller and election.active_controller == 2),
                what="the standby elected and known as controller",
                timeout=WAIT_S,
            )
            # Broker 1 acts before it has noticed: its fence must protect broker 2's znode.
            election.epoch, election.epoch_zk_version = stale
            election.active_controller = 1
            election.move()
            assert await election.settled() is False
            assert standby.is_controller and election.active_controller == 2
            body = (await other.get(zk_paths.CONTROLLER)).data
            assert zk_paths.decode_controller(body).broker_id == 2
        finally:
            await zk.close()
            await other.close()

    run(scenario())


def test_moving_releases_the_controller_znode(chroot: str) -> None:
    async def scenario() -> None:
        zk = await started(chroot)
        elected: list[int] = []
        election = ControllerElection(zk, 1, CLOCK, on_elected=elected.append)
        try:
            assert await election.elect()
            czxid = (await zk.get(zk_paths.CONTROLLER)).czxid
            election.move()
            await wait_until_async(
                on_loop(lambda: election.is_controller and election.epoch == 2),
                what="this broker controller again in epoch 2",
                timeout=WAIT_S,
            )
            assert (await zk.get(zk_paths.CONTROLLER)).czxid > czxid, "a new znode"
            assert elected == [1, 2]
        finally:
            await zk.close()

    run(scenario())


# --- decisions in chunks ---------------------------------------------------------------------

BIG_TOPIC = "a-topic-with-very-many-partitions-to-write"


async def existing_states(zk: ZkClient, partitions: int) -> ControllerContext:
    """`partitions` state znodes (version 0) and a context that knows them."""
    context = ControllerContext(1, 0)
    await zk.ensure_path(f"{zk_paths.topic_path(BIG_TOPIC)}/partitions")
    ops: list[Op] = []
    for p in range(partitions):
        tp = TopicPartition(BIG_TOPIC, p)
        state = LeaderAndIsr(1, 0, (1, 2, 3), 1)
        path = zk_paths.partition_state_path(tp)
        ops += [CreateOp(path.rsplit("/", 1)[0], b""), CreateOp(path, b"")]
        context.leadership[tp] = LeaderAndIsr(1, 0, (1, 2, 3), 1, zk_version=0)
        context.assignments[tp] = ReplicaAssignment(state.isr)
        if len(ops) >= 1000:
            await zk.multi(ops)
            ops = []
    if ops:
        await zk.multi(ops)
    return context


def moved(context: ControllerContext) -> dict[TopicPartition, LeaderAndIsr]:
    return {tp: LeaderAndIsr(2, 1, (2, 3), 1) for tp in context.leadership}


def test_a_decision_beyond_jute_maxbuffer_is_written_in_fenced_chunks(chroot: str) -> None:
    async def scenario() -> None:
        zk = await started(chroot)
        try:
            election = ControllerElection(zk, 1, CLOCK)
            assert await election.elect()
            context = await existing_states(zk, 8000)
            changes = moved(context)  # ~1.3 MB as one multi: over ZooKeeper's 1 MiB default
            written = await ControllerStore(zk).write_states(election.fence(), context, changes)
            assert len(written) == 8000 and {s.zk_version for s in written.values()} == {1}
            last = TopicPartition(BIG_TOPIC, 7999)
            node = await zk.get(zk_paths.partition_state_path(last))
            assert zk_paths.decode_partition_state(node.data, node.version) == written[last]
        finally:
            await zk.close()

    run(scenario())


def test_a_conflict_in_a_later_chunk_records_exactly_what_was_written(chroot: str) -> None:
    async def scenario() -> None:
        zk = await started(chroot)
        try:
            election = ControllerElection(zk, 1, CLOCK)
            assert await election.elect()
            context = await existing_states(zk, 5)
            tps = sorted(context.leadership)
            await zk.set(zk_paths.partition_state_path(tps[3]), b"{}", 0)  # a broker wrote
            store = ControllerStore(zk, max_ops_per_multi=2)
            with pytest.raises(PartialWriteError) as failure:
                await store.write_states(election.fence(), context, moved(context))
            assert sorted(failure.value.written) == tps[:2] and failure.value.conflict
            for tp in tps[:2]:
                assert context.leadership[tp] == LeaderAndIsr(2, 1, (2, 3), 1, zk_version=1)
                assert (await zk.get(zk_paths.partition_state_path(tp))).version == 1
            for tp in tps[2:]:
                assert context.leadership[tp].zk_version == 0 and context.leadership[tp].leader == 1
            # The conflicting chunk is all-or-nothing: its other partition is untouched.
            assert (await zk.get(zk_paths.partition_state_path(tps[2]))).version == 0
        finally:
            await zk.close()

    run(scenario())


def test_a_deposed_controller_writes_no_chunk(chroot: str) -> None:
    async def scenario() -> None:
        zk = await started(chroot)
        try:
            election = ControllerElection(zk, 1, CLOCK)
            assert await election.elect()
            context = await existing_states(zk, 4)
            stale = election.fence()
            await zk.multi([SetOp(zk_paths.CONTROLLER_EPOCH, zk_paths.encode_epoch(2), -1)])
            with pytest.raises(ZNodeVersionError) as failure:
                await ControllerStore(zk, max_ops_per_multi=2).write_states(
                    stale, context, moved(context)
                )
            assert not isinstance(failure.value, PartialWriteError), "nothing was written"
            for tp in context.leadership:
                assert (await zk.get(zk_paths.partition_state_path(tp))).version == 0
        finally:
            await zk.close()

    run(scenario())


# --- partition caps in ZooKeeper mode ----------------------------------------------------------


def topic_admin(zk: ZkClient, tmp_path: Path, limits: TopicLimits | None) -> ZkTopicAdmin:
    metadata = MetadataCache(cluster_id="c", controller_id=1)
    for b in (1, 2):
        metadata.brokers[b] = BrokerEndpoint(b, "127.0.0.1", 9000 + b, None)
    busy = {p: PartitionMetadata(p, 1, 0, [1, 2], [1, 2]) for p in range(3)}
    metadata.topics["busy"] = TopicMetadata("busy", uuid.uuid4(), busy)
    data = tmp_path / "data"
    logs = LogManager(data, clock=CLOCK, default_config=LogConfig.from_properties({}, {}))
    return ZkTopicAdmin(zk, metadata, logs, broker_defaults={}, limits=limits)


def test_zookeeper_mode_caps_partitions_per_topic_and_per_broker(
    chroot: str, tmp_path: Path
) -> None:
    async def scenario() -> None:
        zk = await started(chroot)
        try:
            admin = topic_admin(zk, tmp_path, TopicLimits(4, 6))
            with pytest.raises(PolicyViolationError):
                admin.create_topic("wide", 5, 1, {})
            with pytest.raises(PolicyViolationError):
                admin.create_topic("placed", 5, 1, {}, assignment={p: [1] for p in range(5)})
            with pytest.raises(PolicyViolationError):  # brokers 1 and 2 already hold 3 each
                admin.create_topic("heavy", 4, 2, {})
            assert admin.create_topic("fits", 3, 2, {}) is not None
            with pytest.raises(PolicyViolationError):
                admin.create_partitions("fits", 5)
            assert not await zk.exists(zk_paths.topic_path("wide"))
            assert not await zk.exists(zk_paths.topic_path("heavy"))
            fits = zk_paths.decode_topic((await zk.get(zk_paths.topic_path("fits"))).data)
            assert sorted(fits.partitions) == [0, 1, 2]
            with pytest.raises(PolicyViolationError):  # the default cap, before any placement
                topic_admin(zk, tmp_path, None).create_topic("huge", 1_000_000, 1, {})
        finally:
            await zk.close()

    run(scenario())


def test_creations_awaiting_zookeeper_refuse_a_name_twice_and_a_topic_being_deleted(
    chroot: str, tmp_path: Path
) -> None:
    """CreateTopics awaits its ZooKeeper round trips (the loop serves other requests meanwhile):
    two creations of one name at once make one topic; a name being deleted is refused, also
    validate-only; the config is written before the topic, as the blocking form writes it."""

    async def scenario() -> None:
        zk = await started(chroot)
        try:
            admin = topic_admin(zk, tmp_path, None)
            creating = asyncio.create_task(admin.create_topic_async("first", 1, 1, {}))
            await asyncio.sleep(0)  # the creation's first step: up to its first round trip
            assert not creating.done(), "awaiting ZooKeeper, not holding the loop for it"
            assert isinstance(await creating, TopicMetadata)
            results = await asyncio.gather(
                admin.create_topic_async("twice", 1, 1, {"retention.ms": "1000"}),
                admin.create_topic_async("twice", 1, 1, {"retention.ms": "2000"}),
                return_exceptions=True,
            )
            made = [r for r in results if isinstance(r, TopicMetadata)]
            refused = [r for r in results if isinstance(r, TopicExistsError)]
            assert len(made) == 1 and len(refused) == 1
            config = zk_paths.decode_topic_config(
                (await zk.get(zk_paths.topic_config_path("twice"))).data
            )
            assert config == made[0].configs, "the config of the topic that was made"
            checking = asyncio.create_task(
                admin.create_topic_async("real", 1, 1, {}, validate_only=True)
            )
            await asyncio.sleep(0)
            assert isinstance(await admin.create_topic_async("real", 1, 1, {}), TopicMetadata)
            assert await checking is None, "a check in flight blocks no creation"
            compacting = asyncio.create_task(
                admin.create_topic_async("raced", 1, 1, {"cleanup.policy": "compact"})
            )
            await asyncio.sleep(0)
            with pytest.raises(TopicExistsError):  # an auto-creation meanwhile
                admin.create_topic("raced", 1, 1, {})
            assert (await compacting).configs == {"cleanup.policy": "compact"}
            crossing = asyncio.create_task(  # another broker makes the name meanwhile
                admin.create_topic_async("cross", 1, 1, {"cleanup.policy": "compact"})
            )
            await asyncio.sleep(0)
            await zk.create(zk_paths.topic_path("cross"), b"{}")
            with pytest.raises(TopicExistsError):
                await crossing
            assert not await zk.exists(zk_paths.topic_config_path("cross")), "no config written"
            await zk.create(zk_paths.topic_config_path("left"), b'{"version":1,"config":{}}')
            made = await admin.create_topic_async("left", 1, 1, {"retention.ms": "5"})
            assert made is not None
            stored = (await zk.get(zk_paths.topic_config_path("left"))).data
            assert zk_paths.decode_topic_config(stored) == {"retention.ms": "5"}
            await zk.create(zk_paths.delete_topic_path("going"), b"")
            for validate_only in (True, False):
                with pytest.raises(TopicExistsError, match="marked for deletion"):
                    await admin.create_topic_async("going", 1, 1, {}, validate_only=validate_only)
            assert await admin.create_topic_async("checked", 1, 1, {}, validate_only=True) is None
            assert not await zk.exists(zk_paths.topic_path("checked"))
        finally:
            await zk.close()

    run(scenario())


def test_describe_configs_awaits_its_zookeeper_reads(chroot: str, tmp_path: Path) -> None:
    """DescribeConfigs in ZooKeeper mode reads each named topic's overrides once, awaited (they
    were blocking reads on the loop, one per resource): the loop serves others meanwhile, and
    every resource, duplicates included, is answered with ZooKeeper's overrides."""

    async def scenario() -> None:
        zk = await started(chroot)
        try:
            admin = topic_admin(zk, tmp_path, None)
            await zk.create(zk_paths.topic_config_path("busy"), b"")
            await zk.set(
                zk_paths.topic_config_path("busy"),
                zk_paths.encode_topic_config({"retention.ms": "1234"}),
            )
            route = describe_configs.route(BrokerConfig(data_dir=tmp_path), admin._metadata, admin)
            resource = entity(
                32, 4, "DescribeConfigsResource", resource_type=2, resource_name="busy",
                configuration_keys=("retention.ms",),
            )  # fmt: skip
            request = entity(
                32, 4, "DescribeConfigsRequest", resources=(resource,) * 300,
                include_synonyms=False, include_documentation=False,
            )  # fmt: skip
            ctx = RequestContext(RequestHeader(32, 4, 1, "t"), "127.0.0.1", "c")
            answering = asyncio.create_task(route.handler(ctx, request))
            await asyncio.sleep(0)
            assert not answering.done(), "awaiting ZooKeeper, not holding the loop for it"
            answer = await answering
            values = {c.value for r in answer.results for c in r.configs}
            assert len(answer.results) == 300 and values == {"1234"}
        finally:
            await zk.close()

    run(scenario())
