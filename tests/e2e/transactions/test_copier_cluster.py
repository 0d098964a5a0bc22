"""Exactly-once copying through client kills and a broker bounce on a 3-broker cluster (issue 14).

Kafka's ducktape transactions_test with its figures (`copy_run.CopyPlan`): 100,000 records seeded
into a 2-partition input topic are copied by two transactional copiers (confluent-kafka; one per
input partition, `transactional.id` copier-0 / copier-1, read_committed input,
send_offsets_to_transaction, transactions of 750 records) into a 3-partition output topic, both
topics RF 3 with min.insync.replicas 2, on three Pier brokers in ZooKeeper mode. Each copier is
SIGKILLed 3 times, each time after its running incarnation copied ≥ 20 % of what it had left,
mostly with a transaction flushed and not committed, and restarted; its 2nd transaction and every
10th after are aborted on purpose. After the first round of kills the broker coordinating
copier-0's transactional id (the leader of its `__transaction_state` partition) is stopped
(controlled shutdown; SIGKILL in the slow variant), and started again after the second round.

The output read read_committed equals the input as a set, without duplicates, each key in one
output partition in its input order; every transaction is visible whole or not at all; the
aborted ones are in the log and invisible; and a read_committed consumer running all along saw
exactly the committed output, per partition in order. The test prints the copy's figures.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from brokers.coordinator.offsets_topic import partition_for
from brokers.coordinator.transactions import TRANSACTION_STATE_TOPIC
from infra.stack import BrokerProcess
from tests.cluster_probes import SETTLE_S, TOPIC_SETTLING, metadata_of
from tests.conftest import BrokerFactory
from tests.e2e.transactions.copy_run import CLUSTER_PLAN as PLAN
from tests.e2e.transactions.copy_run import CopyRun, bounce_copiers
from tests.polling import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

TRANSACTION_STATE = TRANSACTION_STATE_TOPIC
STATE_PARTITIONS = 5
BROKER_CONFIG = {
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "5000",
    "auto.leader.rebalance.enable": "false",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
    "group.initial.rebalance.delay.ms": "0",
}


def transaction_coordinator(broker: BrokerProcess, transactional_id: str) -> int:
    """The leader of the id's `__transaction_state` partition; 0 while it has none."""
    topic = metadata_of(broker).topic(TRANSACTION_STATE)
    # Kafka's partitionFor: Utils.abs(hashCode) % partitions, as for group ids
    leader = int(topic.partitions[partition_for(transactional_id, STATE_PARTITIONS)].leader)
    return leader if leader in (1, 2, 3) else 0


def start_cluster(broker_factory: BrokerFactory, chroot: str) -> dict[int, BrokerProcess]:
    brokers = {
        n: broker_factory(node_id=n, zookeeper=chroot, config=BROKER_CONFIG) for n in (1, 2, 3)
    }
    wait_until(
        lambda: all(sorted(metadata_of(b).brokers) == [1, 2, 3] for b in brokers.values()),
        what="brokers 1, 2 and 3 registered",
        timeout=SETTLE_S,
    )
    return brokers


def run_copy_with_bounce(
    broker_factory: BrokerFactory, chroot: str, root: Path, stop: Callable[[BrokerProcess], object]
) -> None:
    brokers = start_cluster(broker_factory, chroot)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    run = CopyRun(bootstrap, PLAN, root / "copy")
    bounced: list[int] = []

    def bounce_coordinator(round_number: int) -> None:
        if round_number == 0:
            any_broker = brokers[1]
            victim = wait_until(
                lambda: transaction_coordinator(any_broker, "copier-0"),
                what=f"the coordinator of copier-0 in {TRANSACTION_STATE}",
                timeout=SETTLE_S,
                retry_on=TOPIC_SETTLING,
            )
            stop(brokers[victim])
            bounced.append(victim)
        elif round_number == 1:
            brokers[bounced[0]].restart()

    try:
        run.create_topics()
        run.seed()
        run.start()
        bounce_copiers(run.copiers, PLAN, bounce_coordinator)
        report = run.check(run.wait_done())
    finally:
        run.close()
    assert bounced, "no broker was bounced"
    assert report.kills == PLAN.kill_rounds * PLAN.input_partitions
    assert report.transactions.aborted_on_purpose >= report.kills, report.summary()
    print(f"\n{report.summary()}; broker {bounced[0]} bounced")


def test_the_copier_copies_exactly_once_through_kills_and_a_broker_bounce(
    chroot: str, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    run_copy_with_bounce(broker_factory, chroot, tmp_path, BrokerProcess.stop)


@pytest.mark.slow
def test_the_copier_copies_exactly_once_when_its_coordinator_is_killed(
    chroot: str, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    """ducktape's hard_bounce: the coordinator is SIGKILLed (no controlled shutdown: its
    transactions' state must be read back by the new leader of the `__transaction_state`
    partition from what was replicated, and it recovers its own logs when it comes back)."""
    run_copy_with_bounce(broker_factory, chroot, tmp_path, BrokerProcess.kill)
