"""Leader bounces under an idempotent acks=all producer (issue 4 acceptance): RF 3,
`min.insync.replicas=2`, three real broker processes in ZooKeeper mode. The partition leader is
bounced five times, alternating SIGTERM (controlled shutdown: leadership moves first) and
`kill -9` (the controller notices the expired session), each time waiting for the broker to
rejoin the ISR. Then every record a delivery report acknowledged must be in the log exactly once,
at the offset it was acknowledged at, and no record may appear twice: the new leader knows the
producer's last batches (replicated producer state, KIP-98), so a retried batch whose first ack was
lost is answered with its original offsets instead of being written again. Unacknowledged records
may be missing, never duplicated. Finally every replica holds byte-identical batches.

Failover times (bounce → first acknowledged write after it) are printed (`pytest -s`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from brokers.client.admin import Admin
from brokers.client.topics import NewTopic
from brokers.records.batch import iter_headers
from brokers.records.errors import CorruptRecordError
from infra.stack import BrokerProcess
from tests.cluster_probes import SETTLE_S, TOPIC_SETTLING, metadata_of
from tests.polling import wait_until

pytestmark = [pytest.mark.fault, pytest.mark.timeout(300)]

BROKER_CONFIG = {
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "2000",
    "auto.leader.rebalance.enable": "false",
}
BOUNCES = 5


@dataclass
class Deliveries:
    """What the producer thread learnt from delivery reports (written by that thread only)."""

    acked: dict[bytes, tuple[int, int]] = field(
        default_factory=dict
    )  # value -> (partition, offset)
    ack_times: list[float] = field(default_factory=list)
    failed: list[tuple[bytes, str]] = field(default_factory=list)
    sent: int = 0
    fatal: str | None = None
    undelivered: int = 0  # still without a delivery report when the producer stopped


class IdempotentProducer:
    """confluent-kafka with enable.idempotence and acks=all, producing unique values from a thread
    until stopped, paced so the log stays small."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self.deliveries = Deliveries()
        self._stop = threading.Event()
        self._producer = Producer({
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 120_000,
            "topic.metadata.refresh.interval.ms": 1_000,
            "retry.backoff.ms": 100,
            "reconnect.backoff.max.ms": 500,
        })  # fmt: skip
        self._thread = threading.Thread(target=self._run, name="idempotent-producer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> Deliveries:
        self._stop.set()
        self._thread.join(180)
        assert not self._thread.is_alive(), "the producer never drained"
        return self.deliveries

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        value = bytes(message.value() or b"")
        if error is not None:
            self.deliveries.failed.append((value, str(error)))
            if error.fatal():
                self.deliveries.fatal = str(error)
            return
        self.deliveries.acked[value] = (message.partition() or 0, message.offset() or 0)
        self.deliveries.ack_times.append(time.monotonic())

    def _run(self) -> None:
        d = self.deliveries
        while not self._stop.is_set() and d.fatal is None:
            value = b"record-%08d" % d.sent
            try:
                self._producer.produce(
                    self.topic, value=value, partition=d.sent % self.partitions,
                    on_delivery=self._on_delivery,
                )  # fmt: skip
            except BufferError:
                self._producer.poll(0.05)
                continue
            d.sent += 1
            self._producer.poll(0.004)  # paces the producer (~200 records/s) and serves callbacks
        d.undelivered = self._producer.flush(150)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    async def create() -> dict[str, Any]:
        async with Admin.for_bootstrap(bootstrap) as admin:
            configs = {"min.insync.replicas": "2"}
            return await admin.create_topics([NewTopic(topic, partitions, 3, configs)])

    assert asyncio.run(create()) == {topic: None}


def live_broker(brokers: dict[int, BrokerProcess], down: int | None = None) -> BrokerProcess:
    return next(b for n, b in brokers.items() if n != down)


def fully_in_sync(brokers: dict[int, BrokerProcess], topic: str, partitions: int) -> bool:
    """Every partition has a leader and all three replicas in its ISR, seen by every broker."""
    for broker in brokers.values():
        info = metadata_of(broker).topic(topic)
        if len(info.partitions) != partitions:
            return False
        for p in info.partitions.values():
            if p.leader not in brokers or sorted(p.isr) != sorted(brokers):
                return False
    return True


def bounce_leaders(
    brokers: dict[int, BrokerProcess], topic: str, producer: IdempotentProducer, bounces: int
) -> list[float]:
    """Bounce partition 0's leader `bounces` times; returns each failover time in seconds."""
    failovers = []
    partitions = producer.partitions
    for bounce in range(bounces):
        failovers.append(bounce_once(brokers, topic, producer, clean=bounce % 2 == 0))
    wait_in_sync(brokers, topic, partitions)
    return failovers


def wait_in_sync(brokers: dict[int, BrokerProcess], topic: str, partitions: int) -> None:
    wait_until(
        lambda: fully_in_sync(brokers, topic, partitions),
        what=f"every partition of {topic} led with all three replicas in sync",
        timeout=SETTLE_S,
        retry_on=TOPIC_SETTLING,  # a broker just (re)started does not know the topic yet
    )


def bounce_once(
    brokers: dict[int, BrokerProcess], topic: str, producer: IdempotentProducer, *, clean: bool
) -> float:
    """Stop partition 0's leader (SIGTERM or kill -9), wait for a new leader and an acknowledged
    write, restart the old leader; returns the failover time in seconds."""
    times = producer.deliveries.ack_times
    wait_in_sync(brokers, topic, producer.partitions)
    acked_before = len(times)
    wait_until(lambda: len(times) >= acked_before + 50, what="50 more acks", timeout=SETTLE_S)
    leader = metadata_of(live_broker(brokers)).topic(topic).partitions[0].leader
    victim = brokers[leader]
    started = time.monotonic()
    if clean:
        assert victim.stop() == 0, "a SIGTERMed broker should exit cleanly"
    else:
        victim.kill()
    stopped = time.monotonic() - started

    def moved() -> bool:
        p = metadata_of(live_broker(brokers, leader)).topic(topic).partitions[0]
        return p.leader not in (leader, -1)

    wait_until(moved, what=f"a leader other than {leader}", timeout=SETTLE_S)
    elected = time.monotonic() - started
    first_ack = wait_until(
        lambda: next((t for t in times[acked_before:] if t > started), 0.0),
        what="an acknowledged write after the bounce",
        timeout=SETTLE_S,
    )
    print(f"bounce clean={clean}: stopped {stopped:.2f}s elected {elected:.2f}s")
    victim.restart()
    return float(first_ack - started)


def consume_all(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of every partition, read from offset 0 up to the high watermark."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bounce-check", "enable.auto.commit": False,
        "topic.metadata.refresh.interval.ms": 1_000,
    })  # fmt: skip
    try:
        ends = {p: consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), 10)[1]
                for p in range(partitions)}  # fmt: skip
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
        records: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}

        def at_high_watermark() -> bool:
            if all(records[p][-1:] and records[p][-1][0] >= ends[p] - 1
                   for p in range(partitions) if ends[p] > 0):  # fmt: skip
                return True
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                at = (message.partition() or 0, message.offset() or 0)
                records[at[0]].append((at[1], bytes(message.value() or b"")))
            return False

        wait_until(at_high_watermark, what=f"every record of {topic} read", timeout=60, interval=0)
        return records
    finally:
        consumer.close()


def check_exactly_once(deliveries: Deliveries, records: dict[int, list[tuple[int, bytes]]]) -> None:
    assert deliveries.fatal is None, (
        f"the idempotent producer hit a fatal error: {deliveries.fatal}"
    )
    assert deliveries.undelivered == 0, f"{deliveries.undelivered} records never got a report"
    seen: dict[bytes, tuple[int, int]] = {}
    for partition, items in records.items():
        offsets = [offset for offset, _ in items]
        assert offsets == sorted(set(offsets)), f"partition {partition} read out of order"
        for offset, value in items:
            assert value not in seen, f"{value!r} at {partition}/{offset} and at {seen[value]}"
            seen[value] = (partition, offset)
    lost = {v: at for v, at in deliveries.acked.items() if seen.get(v) != at}
    assert not lost, f"{len(lost)} acknowledged records not at their offsets: {list(lost)[:5]}"
    assert len(deliveries.acked) >= 50 * BOUNCES  # each bounce waited for 50 fresh acks


def replica_batches(broker: BrokerProcess, topic: str, partition: int) -> list[tuple[int, ...]]:
    """(base offset, leader epoch, CRC) of every batch in the replica's segment files."""
    directory = Path(broker.data_dir) / f"{topic}-{partition}"
    found: list[tuple[int, ...]] = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        found += [(h.base_offset, h.partition_leader_epoch, h.crc) for _, h in iter_headers(data)]
    return found


def identical_replicas(brokers: dict[int, BrokerProcess], topic: str, partitions: int) -> bool:
    for partition in range(partitions):
        copies = [replica_batches(b, topic, partition) for b in brokers.values()]
        if any(copy != copies[0] for copy in copies[1:]):
            return False
    return True


def run_bounces(
    chroot: str, broker_factory: Any, topic: str, partitions: int, bounces: int
) -> list[float]:
    brokers = {
        n: broker_factory(node_id=n, zookeeper=chroot, config=BROKER_CONFIG) for n in (1, 2, 3)
    }
    wait_until(
        lambda: all(sorted(metadata_of(b).brokers) == [1, 2, 3] for b in brokers.values()),
        what="every broker sees brokers 1, 2 and 3",
        timeout=SETTLE_S,
    )
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    create_topic(brokers[1].bootstrap, topic, partitions)
    wait_in_sync(brokers, topic, partitions)
    producer = IdempotentProducer(bootstrap, topic, partitions)
    producer.start()
    try:
        failovers = bounce_leaders(brokers, topic, producer, bounces)
        acked = len(producer.deliveries.ack_times)
        wait_until(
            lambda: len(producer.deliveries.ack_times) >= acked + 50,
            what="50 acks after the last bounce",
            timeout=SETTLE_S,
        )
    finally:
        deliveries = producer.stop()
    records = consume_all(bootstrap, topic, partitions)
    check_exactly_once(deliveries, records)
    wait_until(
        lambda: identical_replicas(brokers, topic, partitions),
        what=f"identical batches on every replica of {topic}",
        timeout=30,
        retry_on=(CorruptRecordError,),  # a batch being appended is read half-written
    )
    print(
        f"\n{topic}: {deliveries.sent} sent, {len(deliveries.acked)} acked, "
        f"{len(deliveries.failed)} failed; failover seconds per bounce (SIGTERM first, then "
        f"alternating with kill -9): {[round(f, 2) for f in failovers]}"
    )
    return failovers


def test_five_leader_bounces_keep_every_acked_record_exactly_once_at_its_offset(
    chroot: str, broker_factory: Any
) -> None:
    failovers = run_bounces(chroot, broker_factory, "bounced", 1, BOUNCES)
    assert len(failovers) == BOUNCES


@pytest.mark.slow
def test_leader_bounce_soak_over_several_partitions(chroot: str, broker_factory: Any) -> None:
    failovers = run_bounces(chroot, broker_factory, "bounced-soak", 4, 3 * BOUNCES)
    assert len(failovers) == 3 * BOUNCES
