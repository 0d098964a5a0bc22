"""Leader election at scale: creating a many-partition RF 3 topic, and losing a third of its leaders.

Owns the elections phase of the cluster benchmark, on one topic of `partitions` partitions (1,000
by default), RF 3, created through CreateTopics:
- creation: from the CreateTopics call until every partition has a leader in ZooKeeper (the
  controller wrote its state znode) and in Metadata (the brokers applied UpdateMetadata), Kafka's
  `onNewPartitionCreation` path: NewPartition → OnlinePartition for all of them at once;
- failure: the non-controller broker leading the most partitions (about a third) is SIGKILLed; we
  time until its ZooKeeper session expires (`/brokers/ids/<id>` deleted: this part is the session
  timeout), until every partition has a live leader in ZooKeeper, and until Metadata agrees.
  `election_s` is the difference between the last ZooKeeper leader and the expiry: how long the
  controller takes to elect (and write, and propagate) a few hundred leaders, Kafka's
  `onBrokerFailure` → `OfflinePartition` → `OnlinePartition`.
The victim is not restarted: this phase runs last. Blocking, main thread only.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from infra.bench.cluster_view import ClusterView, poll_until
from infra.bench.failover import rounded
from infra.stack import Stack

ELECTIONS_TOPIC = "bench-elections"
REPLICAS = 3
CREATE_TIMEOUT_S = 300.0


@dataclass(frozen=True, slots=True)
class Elections:
    partitions: int
    create_to_zk_leaders_s: float
    create_to_metadata_leaders_s: float
    victim: int
    victim_led: int
    session_expired_s: float | None
    zk_leaders_s: float | None
    metadata_leaders_s: float | None

    @property
    def election_s(self) -> float | None:
        if self.zk_leaders_s is None or self.session_expired_s is None:
            return None
        return self.zk_leaders_s - self.session_expired_s

    def as_json(self) -> dict[str, Any]:
        return rounded({**asdict(self), "election_s": self.election_s})


def create(view: ClusterView, partitions: int) -> tuple[float, float]:
    """Seconds from CreateTopics to all leaders in ZooKeeper, then in Metadata."""
    started = time.perf_counter()
    view.create_topic(ELECTIONS_TOPIC, partitions, REPLICAS)
    poll_until(
        lambda: view.all_led_in_zk(ELECTIONS_TOPIC, partitions), CREATE_TIMEOUT_S, "ZK leaders"
    )
    in_zk = time.perf_counter() - started
    poll_until(
        lambda: view.all_led_in_metadata(ELECTIONS_TOPIC, partitions),
        CREATE_TIMEOUT_S,
        "Metadata leaders",
    )
    return in_zk, time.perf_counter() - started


def choose_victim(view: ClusterView, partitions: int) -> tuple[int, int]:
    """(broker, partitions it leads): the non-controller leading the most partitions."""
    led = Counter(view.zk_leaders(ELECTIONS_TOPIC, partitions))
    controller = view.controller()
    victim = max((n for n in led if n not in (controller, -1)), key=lambda n: led[n])
    return victim, led[victim]


def measure(stack: Stack, view: ClusterView, partitions: int, deadline_s: float) -> Elections:
    in_zk, in_metadata = create(view, partitions)
    victim, led = choose_victim(view, partitions)
    killed_at = time.perf_counter()
    next(b for b in stack.brokers if b.node_id == victim).kill()
    expired = zk_done = metadata_done = None
    stop = killed_at + deadline_s
    while time.perf_counter() < stop and None in (expired, zk_done, metadata_done):
        if expired is None and not view.registered(victim):
            expired = time.perf_counter() - killed_at
        if zk_done is None and view.all_led_in_zk(ELECTIONS_TOPIC, partitions, (victim,)):
            zk_done = time.perf_counter() - killed_at
            # Both changed between two polls: the expiry came first (the controller acts on it).
            expired = zk_done if expired is None else expired
        if zk_done is not None and _led_in_metadata(view, partitions, victim):
            metadata_done = time.perf_counter() - killed_at
        time.sleep(0.01)
    return Elections(partitions, in_zk, in_metadata, victim, led, expired, zk_done, metadata_done)


def _led_in_metadata(view: ClusterView, partitions: int, victim: int) -> bool:
    try:
        return view.all_led_in_metadata(ELECTIONS_TOPIC, partitions, (victim,))
    except Exception:  # the request went to the dead broker: ask again
        return False
