"""KIP-392's preferred read replica on a real led `Partition`: the rack-aware selector names an
in-sync follower on the client's rack that holds the fetch offset, keeps the leader otherwise,
stops naming a follower that left the ISR; `LeaderSelector` and no selector never redirect;
`replica.selector.class` is checked at start-up."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.common.config import BrokerConfig, BrokerConfigError
from brokers.log.config import LogConfig
from brokers.log.log import Log
from brokers.replication.partition import LeadershipState, Partition
from brokers.replication.replica_selector import (
    LEADER_SELECTOR,
    RACK_AWARE_SELECTOR,
    ReplicaView,
    preferred_read_replica,
    select,
)
from tests.unit.log.partition_helpers import make_batch

pytestmark = pytest.mark.unit
LEADER, NEAR, FAR = 0, 1, 2
RACKS: dict[int, str | None] = {LEADER: "a", NEAR: "b", FAR: "c"}


def led(tmp_path: Path, clock: ManualClock, isr: list[int]) -> Partition:
    log = Log.open(tmp_path / "topic-0", LogConfig(), clock=clock)
    partition = Partition(
        log, node_id=LEADER, clock=clock, high_watermark=0, on_high_watermark=lambda p: None
    )
    partition.become_leader(LeadershipState(LEADER, 1, [LEADER, NEAR, FAR], isr))
    partition.append_as_leader(make_batch(4))
    for follower in (NEAR, FAR):
        partition.update_follower_fetch_state(follower, 4, 0, clock.time_ms())
    return partition


def preferred(
    partition: Partition,
    rack: str | None,
    *,
    offset: int = 2,
    selector: str | None = RACK_AWARE_SELECTOR,
    racks: dict[int, str | None] = RACKS,
) -> int | None:
    return preferred_read_replica(
        partition,
        selector=selector,
        client_rack=rack,
        fetch_offset=offset,
        racks=racks,
        now_ms=0,
    )


def test_a_client_on_a_followers_rack_is_sent_to_it(tmp_path: Path) -> None:
    partition = led(tmp_path, ManualClock(), [LEADER, NEAR, FAR])
    assert preferred(partition, "b") == NEAR
    assert preferred(partition, "c") == FAR
    assert preferred(partition, "a") is None  # the leader's own rack: read here
    assert preferred(partition, "z") is None  # no replica on that rack
    assert preferred(partition, None) is None  # no client.rack


def test_only_in_sync_live_followers_holding_the_offset_are_named(tmp_path: Path) -> None:
    partition = led(tmp_path, ManualClock(), [LEADER, FAR])  # NEAR out of the ISR
    assert preferred(partition, "b") is None
    assert preferred(partition, "c") == FAR
    assert preferred(partition, "c", offset=5) is None  # past what FAR has fetched
    assert preferred(partition, "c", racks={LEADER: "a", NEAR: "b"}) is None  # FAR not alive


def test_leader_selector_and_no_selector_never_redirect(tmp_path: Path) -> None:
    partition = led(tmp_path, ManualClock(), [LEADER, NEAR, FAR])
    assert preferred(partition, "b", selector=LEADER_SELECTOR) is None
    assert preferred(partition, "b", selector=None) is None


def test_the_most_caught_up_same_rack_follower_wins() -> None:
    leader = ReplicaView(LEADER, "a", 10, 0)
    behind = ReplicaView(1, "b", 8, 0)
    ahead_stale = ReplicaView(2, "b", 10, 500)
    ahead_fresh = ReplicaView(3, "b", 10, 100)
    chosen = select(RACK_AWARE_SELECTOR, "b", leader, [behind, ahead_stale, ahead_fresh])
    assert chosen is ahead_fresh


def test_an_unknown_selector_class_fails_at_start_up(tmp_path: Path) -> None:
    config = BrokerConfig(tmp_path, properties={"replica.selector.class": "com.example.Nearest"})
    with pytest.raises(BrokerConfigError, match=r"replica\.selector\.class"):
        config.validate()
    good = BrokerConfig(tmp_path, properties={"replica.selector.class": RACK_AWARE_SELECTOR})
    assert good.replica_selector_class == RACK_AWARE_SELECTOR
