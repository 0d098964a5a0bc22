"""Group membership through librdkafka against a real in-process broker: a member killed without
leaving (its partitions move after the session timeout), KIP-345 static members (a restart within
the session keeps the partitions without a rebalance; a duplicate instance is fenced) and KIP-429
cooperative-sticky (only the partitions that must move are revoked)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError

from brokers.app.runtime import Broker
from tests.integration.inproc import broker_thread
from tests.integration.test_groups_clients import (
    PROPERTIES,
    SESSION_MS,
    WAIT_S,
    assigned,
    bootstrap_of,
    confluent_consumer,
    consume_until,
    create_topic,
    group_generation,
    is_split,
)
from tests.polling import wait_until

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]

# A consumer in its own process, so it can die without a LeaveGroup (confluent's close() leaves).
_CHILD = """
import json, sys
from confluent_kafka import Consumer
consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                     "session.timeout.ms": int(sys.argv[3]), "heartbeat.interval.ms": 500,
                     "auto.offset.reset": "earliest"})
consumer.subscribe([sys.argv[4]])
last = None
while True:
    consumer.poll(0.1)
    now = sorted(tp.partition for tp in consumer.assignment())
    if now != last:
        print(json.dumps(now), flush=True)
        last = now
"""


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with broker_thread(tmp_path, PROPERTIES) as running:
        yield running


def _child_assignment(child: subprocess.Popen[str]) -> list[int]:
    stdout = child.stdout
    assert stdout is not None

    def next_assignment() -> list[int]:  # the child prints each new one; [] before it joins
        line = stdout.readline()
        assert line, "the child consumer exited"
        partitions: list[int] = json.loads(line)
        return partitions

    return wait_until(
        next_assignment, what="an assignment of the child consumer", timeout=WAIT_S, interval=0
    )


def test_killed_member_partitions_move_after_its_session_times_out(broker: Broker) -> None:
    bootstrap = bootstrap_of(broker)
    create_topic(bootstrap, "kill", 6)
    args = [bootstrap, "g-kill", str(SESSION_MS), "kill"]
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, *args], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    survivors = [confluent_consumer(bootstrap, "g-kill") for _ in range(2)]
    try:
        for consumer in survivors:
            consumer.subscribe(["kill"])
        consume_until(
            survivors,
            lambda: all(assigned(c) for c in survivors),
            what="both survivors assigned",
        )
        owned_by_child = _child_assignment(child)
        consume_until(
            survivors,
            lambda: len(assigned(survivors[0]) | assigned(survivors[1])) + len(owned_by_child) == 6,
            what="six partitions owned by the three members",
        )
        generation = group_generation(broker, "g-kill")
        child.send_signal(signal.SIGKILL)
        child.wait(WAIT_S)
        consume_until(
            survivors,
            lambda: is_split([assigned(c) for c in survivors], "kill", 6),
            what="the killed member's partitions moved to the survivors",
        )
        assert group_generation(broker, "g-kill") > generation
        assert len(broker.groups.coordinator.groups["g-kill"].members) == 2
    finally:
        if child.poll() is None:
            child.kill()
        for consumer in survivors:
            consumer.close()


def _static(bootstrap: str, instance: str, **extra: Any) -> Consumer:
    return confluent_consumer(
        bootstrap,
        "g-static",
        **{"group.instance.id": instance, "session.timeout.ms": 20_000},
        **extra,
    )


def test_static_member_restart_gets_its_partitions_back_without_rebalance(broker: Broker) -> None:
    bootstrap = bootstrap_of(broker)
    create_topic(bootstrap, "static", 4)
    revoked: list[Any] = []
    steady = _static(bootstrap, "steady")
    steady.subscribe(["static"], on_revoke=lambda _c, parts: revoked.extend(parts))
    bouncing = _static(bootstrap, "bouncing")
    bouncing.subscribe(["static"])
    restarted = None
    try:
        consume_until(
            [steady, bouncing],
            lambda: is_split([assigned(steady), assigned(bouncing)], "static", 4),
            what="static split between the two members",
        )
        before = assigned(bouncing)
        generation = group_generation(broker, "g-static")
        revoked.clear()
        bouncing.close()  # a static member sends no LeaveGroup (KIP-345)
        restarted = _static(bootstrap, "bouncing")
        restarted.subscribe(["static"])
        consume_until(
            [steady, restarted],
            lambda: assigned(restarted) == before,
            what="the restarted static member given its partitions back",
        )
        assert group_generation(broker, "g-static") == generation
        assert revoked == []
        group = broker.groups.coordinator.groups["g-static"]
        assert sorted(group.static_members) == ["bouncing", "steady"] and len(group.members) == 2
    finally:
        steady.close()
        if restarted is not None:
            restarted.close()


def test_a_second_instance_with_the_same_id_fences_the_first(broker: Broker) -> None:
    bootstrap = bootstrap_of(broker)
    create_topic(bootstrap, "fence", 2)
    errors: list[KafkaError] = []
    first = _static(bootstrap, "twin", error_cb=errors.append)
    first.subscribe(["fence"])
    second = None
    try:
        consume_until([first], lambda: len(assigned(first)) == 2, what="twin assigned")
        second = _static(bootstrap, "twin")
        second.subscribe(["fence"])

        def fenced() -> bool:  # librdkafka raises it as a fatal error of the old instance
            return any(
                e.code() == KafkaError.FENCED_INSTANCE_ID
                or (e.code() == KafkaError._FATAL and "fenced" in e.str())
                for e in errors
            )

        def first_fenced() -> bool:
            if fenced() and len(assigned(second)) == 2:
                return True
            for consumer in (first, second):
                message = consumer.poll(0.05)
                error = None if message is None else message.error()
                if error is not None:
                    errors.append(error)
            return False

        wait_until(
            first_fenced,
            what="the first instance fenced and the second assigned",
            timeout=WAIT_S,
            interval=0,
        )
        [member] = broker.groups.coordinator.groups["g-static"].members.values()
        assert member.group_instance_id == "twin"
    finally:
        first.close()
        if second is not None:
            second.close()


def test_cooperative_sticky_moves_only_the_partitions_that_must_move(broker: Broker) -> None:
    bootstrap = bootstrap_of(broker)
    create_topic(bootstrap, "coop", 6)
    revoked: list[int] = []
    strategy = {"partition.assignment.strategy": "cooperative-sticky"}
    first = confluent_consumer(bootstrap, "g-coop", **strategy)
    first.subscribe(
        ["coop"], on_revoke=lambda _c, parts: revoked.extend(p.partition for p in parts)
    )
    second = confluent_consumer(bootstrap, "g-coop", **strategy)
    try:
        consume_until([first], lambda: len(assigned(first)) == 6, what="coop all on first")
        second.subscribe(["coop"])
        consume_until(
            [first, second],
            lambda: is_split([assigned(first), assigned(second)], "coop", 6),
            what="coop split between two members",
        )
        moved = {p for _, p in assigned(second)}
        assert len(moved) == 3 and sorted(revoked) == sorted(moved)
        assert broker.groups.coordinator.groups["g-coop"].protocol_name == "cooperative-sticky"
    finally:
        first.close()
        second.close()
