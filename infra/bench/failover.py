"""Leader failover under a steady acks=all producer: `kill -9` and controlled shutdown (SIGTERM).

Owns the two availability phases of the cluster benchmark, run against one RF 3 topic with
`min.insync.replicas=2` (`FAILOVER_TOPIC`, three partitions so some leader is not the controller):
- `kill_leader`: a `SteadyProducer` writes to one partition, its leader is SIGKILLed, and we time
  from the kill to (a) the broker's ZooKeeper session expiring (`/brokers/ids/<id>` gone), (b) a new
  leader in the partition's state znode, (c) the first acknowledged acks=all write among records
  produced after the kill: what a producer waits for. Between (b) and (c) lie the survivors'
  Metadata (`metadata_leader_s`) and the client: librdkafka re-queries a partition whose leader is
  down once a second, so (c) trails (b) by up to a second or two even when the brokers are ready. Kafka's target is (c) ≤ session timeout + 1 s,
  since nothing notices a silent death before ZooKeeper does;
- `shut_down_leader`: the same producer, the leader gets SIGTERM (controlled shutdown moves its
  leadership away before it exits, Kafka's `controlled.shutdown.enable`), and we report the longest
  time between consecutive acknowledgements from the SIGTERM until writes flow again (target ≤ 1 s).
After each repetition the victim is restarted and every replica must be back in sync before the
next. The victim is a leader that is not the controller when one exists (`victim_was_controller`
says when not), so the number measures partition failover, not controller failover too.
Blocking; runs on the calling thread (the producer has its own).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from infra.bench.cluster_view import ClusterView, poll_until
from infra.bench.steady_producer import SteadyProducer
from infra.stack import BrokerProcess, Stack

FAILOVER_TOPIC = "bench-failover"
PARTITIONS = 3
REPLICAS = 3
WARM_ACKS = 50  # acknowledgements before the fault: connections and metadata are settled
RESYNC_TIMEOUT_S = 120.0
AFTER_RESUME_S = 0.5  # acks observed after writes resume, so a late stall would still show


@dataclass(frozen=True, slots=True)
class KillFailover:
    victim: int
    victim_was_controller: bool
    session_expired_s: float | None
    zk_leader_s: float | None
    metadata_leader_s: float | None  # the new leader in a survivor's Metadata: what clients see
    first_ack_s: float | None  # None: no acknowledged write before the deadline
    failed_deliveries: int

    @property
    def after_expiry_s(self) -> float | None:
        """The brokers' and the client's share: session expiry to the first acknowledged write."""
        if self.first_ack_s is None or self.session_expired_s is None:
            return None
        return self.first_ack_s - self.session_expired_s

    def as_json(self) -> dict[str, Any]:
        return rounded({**asdict(self), "after_expiry_s": self.after_expiry_s})


@dataclass(frozen=True, slots=True)
class ShutdownGap:
    victim: int
    victim_was_controller: bool
    shutdown_s: float  # SIGTERM to process exit
    longest_gap_s: float
    failed_deliveries: int

    def as_json(self) -> dict[str, Any]:
        return rounded(asdict(self))


def rounded(fields: dict[str, Any]) -> dict[str, Any]:
    """Milliseconds are the resolution that means anything here."""
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in fields.items()}


def prepare(view: ClusterView) -> None:
    view.create_topic(FAILOVER_TOPIC, PARTITIONS, REPLICAS, {"min.insync.replicas": "2"})
    wait_in_sync(view)


def wait_in_sync(view: ClusterView) -> dict[int, int]:
    """Leader per partition once every partition has all replicas in sync."""

    def leaders() -> dict[int, int] | None:
        found = {
            p: view.leader_with_full_isr(FAILOVER_TOPIC, p, REPLICAS) for p in range(PARTITIONS)
        }
        in_sync = {p: leader for p, leader in found.items() if leader is not None}
        return in_sync if len(in_sync) == PARTITIONS else None

    return poll_until(leaders, RESYNC_TIMEOUT_S, f"all replicas of {FAILOVER_TOPIC} in sync")


def choose_victim(view: ClusterView) -> tuple[int, int, bool]:
    """(partition, its leader, whether that leader is the controller): a non-controller if any."""
    leaders = wait_in_sync(view)
    controller = view.controller()
    others = [p for p, leader in leaders.items() if leader != controller]
    partition = others[0] if others else 0
    return partition, leaders[partition], leaders[partition] == controller


def broker(stack: Stack, node_id: int) -> BrokerProcess:
    return next(b for b in stack.brokers if b.node_id == node_id)


def new_leader(view: ClusterView, partition: int, victim: int) -> bool:
    return view.zk_leaders(FAILOVER_TOPIC, PARTITIONS)[partition] not in (victim, -1)


def led_in_metadata(view: ClusterView, partition: int, victim: int) -> bool:
    try:
        return view.leader_of(FAILOVER_TOPIC, partition) not in (victim, -1)
    except Exception:  # asked the dead broker: ask again
        return False


def kill_leader(stack: Stack, view: ClusterView, deadline_s: float) -> KillFailover:
    partition, victim, was_controller = choose_victim(view)
    with SteadyProducer(stack.bootstrap, FAILOVER_TOPIC, partition) as producer:
        poll_until(lambda: producer.acknowledged() >= WARM_ACKS, 30, "steady writes")
        killed_at = time.perf_counter()
        broker(stack, victim).kill()
        expired = zk_leader = in_metadata = first_ack = None
        stop = killed_at + deadline_s
        while time.perf_counter() < stop and None in (expired, zk_leader, in_metadata, first_ack):
            if expired is None and not view.registered(victim):
                expired = time.perf_counter() - killed_at
            if zk_leader is None and new_leader(view, partition, victim):
                zk_leader = time.perf_counter() - killed_at
                # Both changed between two polls: the expiry came first (the controller acts on it).
                expired = zk_leader if expired is None else expired
            if (
                zk_leader is not None
                and in_metadata is None
                and led_in_metadata(view, partition, victim)
            ):
                in_metadata = time.perf_counter() - killed_at
            acked = producer.first_ack_after(killed_at)
            first_ack = None if acked is None else acked - killed_at
            time.sleep(0.01)
    broker(stack, victim).restart()
    return KillFailover(
        victim, was_controller, expired, zk_leader, in_metadata, first_ack, len(producer.failures)
    )


def shut_down_leader(stack: Stack, view: ClusterView, deadline_s: float) -> ShutdownGap:
    partition, victim, was_controller = choose_victim(view)
    with SteadyProducer(stack.bootstrap, FAILOVER_TOPIC, partition) as producer:
        poll_until(lambda: producer.acknowledged() >= WARM_ACKS, 30, "steady writes")
        signalled_at = time.perf_counter()
        broker(stack, victim).stop()
        exited_at = time.perf_counter()
        resumed = poll_until(
            lambda: producer.first_ack_after(exited_at), deadline_s, "writes after shutdown"
        )
        time.sleep(max(0.0, resumed + AFTER_RESUME_S - time.perf_counter()))
        gap = producer.longest_gap(signalled_at, resumed + AFTER_RESUME_S)
    broker(stack, victim).restart()
    return ShutdownGap(
        victim, was_controller, exited_at - signalled_at, gap, len(producer.failures)
    )
