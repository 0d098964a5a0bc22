"""A KIP-848 group (`group.protocol=consumer`) survives its coordinator's failover (issue 27).

Three real broker processes in ZooKeeper mode, `__consumer_offsets` with RF 3. Two librdkafka
consumers with `group.protocol=consumer` (separate processes; each prints a record, then
commits) consume a 3-partition stream; a third member (of another topic) joins and leaves, so the group epoch
(4) is one a group rebuilt from scratch by rejoining members could not have. The coordinator is
`kill -9`ed (or stopped) mid-stream. The new coordinator reads the group's records back from
`__consumer_offsets` (consumer_group_store): ConsumerGroupDescribe shows the same group epoch,
the same members with the same member epochs and assignments (also after a SIGTERM: a controlled
shutdown; and with one of them a classic member of a mixed group), the members heartbeat on with
their epochs (no rejoin, no rebalance), every acknowledged record is processed exactly once
(the members kept their partitions and positions) and the commits continue to the log ends.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException
from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
from kio.schema.types import GroupId

from infra.stack import BrokerProcess
from tests.cluster_probes import SETTLE_S, TOPIC_SETTLING
from tests.integration.cluster.test_coordinator_failover import (
    REPO,
    TOPIC,
    Member,
    Stream,
    committed,
    coordinator_of,
    create_stream_topic,
    high_watermarks,
    offsets_topic_on_all_brokers,
    start_cluster,
)
from tests.integration.inproc import raw_call
from tests.polling import wait_until

# A fault test of ~1 min (3 broker processes): slow, per the CI budget; the persistence it
# relies on is also covered fast by tests/unit/coordinator/test_consumer_group_store.py.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]
GROUP = "g-kip848-failover"
Snapshot = tuple[int, dict[str, tuple[int, dict[str, tuple[int, ...]]]]]

# Print each record, then commit; a failed commit (coordinator moving) is retried next round.
CHILD = """
import json, sys
from confluent_kafka import Consumer, KafkaException
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "group.protocol": sys.argv[4], "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
c.subscribe([sys.argv[3]])
last, dirty = None, False
while True:
    msgs = [m for m in c.consume(100, 0.2) if m.error() is None]
    now = sorted(tp.partition for tp in c.assignment())
    if now != last:
        print(json.dumps(["assigned", now]), flush=True)
        last = now
    for m in msgs:
        print(json.dumps([m.partition(), m.offset(), m.value().decode()]), flush=True)
    dirty = dirty or bool(msgs)
    if dirty:
        try:
            c.commit(asynchronous=False)
            dirty = False
        except KafkaException as exc:
            print(json.dumps(["commit_failed", str(exc)]), flush=True)
"""


class ConsumerProtocolMember(Member):
    """`Member`'s reader over a child consuming with `group.protocol=consumer` (or `classic`:
    a classic member of the mixed group)."""

    def __init__(self, bootstrap: str, protocol: str = "consumer") -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", CHILD, bootstrap, GROUP, TOPIC, protocol],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=REPO,
        )
        self.records: list[tuple[int, int, str]] = []
        self.assignment: list[int] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()


def described(broker: BrokerProcess) -> Snapshot | None:
    """The group epoch and each member's (epoch, assignment); None unless Stable."""
    request = ConsumerGroupDescribeRequest(
        group_ids=(GroupId(GROUP),), include_authorized_operations=False
    )
    [group] = raw_call(broker.bootstrap, request).groups
    if group.error_code != 0 or group.group_state != "Stable":
        return None
    members = {
        m.member_id: (
            int(m.member_epoch),
            {t.topic_name: tuple(sorted(t.partitions)) for t in m.assignment.topic_partitions},
        )
        for m in group.members
    }
    return int(group.group_epoch), members


def join_and_leave(bootstrap: str, coordinator: BrokerProcess) -> None:
    """A third member (another topic, so nothing moves) joins, then leaves: two group epochs."""
    transient = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
        }
    )
    try:
        transient.subscribe([f"{TOPIC}-elsewhere"])
        wait_until(
            lambda: (
                transient.poll(0.2) is None
                and (s := described(coordinator)) is not None
                and len(s[1]) == 3
            ),
            what="the transient member in the group",
            timeout=SETTLE_S,
        )
    finally:
        transient.close()


@pytest.mark.parametrize(
    ("how", "second"), [("sigkill", "consumer"), ("sigterm", "consumer"), ("sigkill", "classic")]
)
def test_a_consumer_protocol_group_keeps_its_epochs_through_the_coordinator_failover(
    chroot: str, broker_factory: Any, how: str, second: str
) -> None:
    """`second="classic"`: a mixed group; its classic member is persisted with its protocols
    (ClassicMemberMetadata), so it heartbeats on with the new coordinator, not rejoining."""
    brokers = start_cluster(broker_factory, chroot)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    create_stream_topic(brokers[1])
    stream = Stream(bootstrap)
    members = [ConsumerProtocolMember(bootstrap), ConsumerProtocolMember(bootstrap, second)]
    try:
        wait_until(
            lambda: all(offsets_topic_on_all_brokers(b) for b in brokers.values()),
            what="__consumer_offsets led, on every broker",
            timeout=SETTLE_S,
            retry_on=TOPIC_SETTLING,
        )
        wait_until(
            lambda: all(m.assignment for m in members) and all(m.records for m in members),
            what="both members assigned and consuming",
            timeout=SETTLE_S,
        )
        coordinator = brokers[coordinator_of(brokers[1], GROUP)]
        join_and_leave(bootstrap, coordinator)
        before = wait_until(
            lambda: (s := described(coordinator)) and len(s[1]) == 2 and s,
            what="the group Stable with its two members",
            timeout=SETTLE_S,
        )
        assert before and before[0] >= 4  # 2 joins, 1 join + 1 leave
        committed_before = wait_until(
            lambda: (c := committed(bootstrap, GROUP)) and min(c.values()) > 0 and c,
            what="a commit on every partition",
            timeout=SETTLE_S,
            retry_on=(KafkaException,),
        )
        assert committed_before
        victim = coordinator_of(brokers[1], GROUP)
        sent_at_failure = stream.sent
        if how == "sigkill":
            brokers[victim].kill()
        else:
            brokers[victim].stop()  # SIGTERM: controlled shutdown moves the leadership
        survivor = brokers[next(n for n in brokers if n != victim)]
        new = wait_until(
            lambda: (c := coordinator_of(survivor, GROUP)) not in (victim, -1) and c,
            what=f"a coordinator other than {victim}",
            timeout=SETTLE_S,
        )
        assert new

        def consumed_after_failure() -> bool:
            values = {int(v[1:]) for m in members for _, _, v in list(m.records)}
            return len([v for v in values if v >= sent_at_failure]) >= 100

        wait_until(consumed_after_failure, what="100 records consumed after it", timeout=90)
        # The same group: same epoch, members, member epochs and assignments (no rejoin).
        wait_until(
            lambda: described(brokers[int(new)]) == before,
            what=f"the new coordinator describing the group as before: {before}",
            timeout=SETTLE_S,
            retry_on=(ConnectionError, OSError),
        )
        stream.finish()
        alive = ",".join(b.bootstrap for n, b in brokers.items() if n != victim)

        def processed() -> list[str]:
            return [v for m in members for _, _, v in list(m.records)]

        wait_until(
            lambda: stream.acked <= set(processed()),
            what="every acked record processed",
            timeout=90,
        )
        seen = processed()
        assert len(seen) == len(set(seen)), "a record was read twice"
        ends = high_watermarks(alive)
        wait_until(
            lambda: committed(alive, GROUP) == ends,
            what=f"the group's commits at the ends {ends}",
            timeout=SETTLE_S,
            retry_on=(KafkaException,),
        )
        assert described(brokers[int(new)]) == before  # still no rebalance
    finally:
        for member in members:
            member.stop()
