"""Metadata-change limits held across gateways by unit counts (`gateway.quotas.shared_units`):
the znode's "units" (round trip, absent, bad rows, cap), `PeerTable` learning what a peer's counts
grew by (a peer's first document only sets where it stands; a count started again is new; each
unit drained once; undrained units dropped after a hold), and two `GatewayThrottling`s on one fake
clock exchanging documents: the tenant's partition pacing, its config-change pacing and KIP-599's
bucket spent through one gateway hold on the other."""

from __future__ import annotations

import asyncio
import json

import pytest
from prometheus_client import CollectorRegistry

from gateway.fleet.codec import (
    MAX_UNIT_ENTRIES,
    MAX_UNITS,
    RatesFormatError,
    UnitCount,
    decode_report,
    encode_rates,
    sensor_id,
)
from gateway.fleet.exchange import _unit_priority
from gateway.fleet.peer_counts import FRESH_MS, MAX_PENDING, PENDING_HOLD_MS
from gateway.fleet.peers import PeerTable
from gateway.kafka.services import QuotaSubject
from gateway.quotas.client_quotas import SensorKey
from gateway.quotas.mutation_quota import ControllerMutationQuota
from gateway.quotas.quota_book import QuotaBook
from gateway.quotas.shared_units import HELD_MS, PEER_DEBT_MS, UnitCounters
from gateway.quotas.tenant_pacing import TenantPacing
from gateway.throttling import GatewayThrottling
from tenancy.domain import QuotaEntity
from tests.unit.gateway.quotas.fakes import FakeSource

pytestmark = pytest.mark.unit

T0 = 1_000_000
KIND = "partition_mutations"
SID = sensor_id(KIND, "acme")
ALICE = QuotaSubject("acme", "sa-alice", "app")


def node(version: int, *counts: tuple[str, int, int]) -> tuple[int, bytes]:
    data, _ = encode_rates([], [(sid, UnitCount(units, since)) for sid, units, since in counts])
    return version, data


def test_unit_counts_round_trip_and_may_be_absent() -> None:
    data, dropped = encode_rates([], [("a" * 16, UnitCount(20, 7)), ("b" * 16, UnitCount(1, 9))])
    assert dropped == 0
    assert decode_report(data).units == {"a" * 16: UnitCount(20, 7), "b" * 16: UnitCount(1, 9)}
    assert decode_report(b'{"v": 1, "rates": []}').units == {}  # a gateway of an earlier version


def test_the_znode_keeps_the_first_counts_and_the_tenants_pacings_come_first() -> None:
    counts = [(f"{i:016x}", UnitCount(i + 1, 0)) for i in range(MAX_UNIT_ENTRIES + 10)]
    data, dropped = encode_rates([], counts)
    assert dropped == 10
    kept = decode_report(data).units
    assert len(kept) == MAX_UNIT_ENTRIES and f"{MAX_UNIT_ENTRIES:016x}" not in kept
    rows = [("controller_mutation_rate", "k", 900, 0), ("partition_mutations", "t", 5, 0)]
    rows += [("config_changes", "t", 50, 0)]
    assert [r[0] for r in sorted(rows, key=_unit_priority)] == [
        "config_changes",
        "partition_mutations",
        "controller_mutation_rate",  # a tenant's many client ids never push a pacing out
    ]


@pytest.mark.parametrize(
    "units",
    [
        {},
        [["x", -1, 0]],
        [["x", 1.5, 0]],
        [["x", 1, "0"]],
        [["x", True, 0]],
        [[1, 1, 0]],
        [["x"]],
        [["x", MAX_UNITS + 1, 0]],
        [["x", 1, 2**63]],
    ],
)
def test_a_document_with_bad_unit_rows_is_refused(units: object) -> None:
    with pytest.raises(RatesFormatError):
        decode_report(json.dumps({"v": 1, "rates": [], "units": units}).encode())


@pytest.mark.parametrize("data", [None, b"[" * 100_000 + b"]" * 100_000])
def test_an_empty_or_deeply_nested_znode_is_refused(data: bytes | None) -> None:
    with pytest.raises(RatesFormatError):
        decode_report(data)  # type: ignore[arg-type]


def test_a_peer_s_counts_from_before_this_gateway_started_only_set_where_they_stand() -> None:
    """A count begun before this gateway started was enforced by the peers alone: only its
    growth is learnt; one begun since (a new peer's, a count started again) is taken whole; each
    unit is drained once; a peer unlisted for a while and listed again counts nothing twice."""
    table = PeerTable(hold_ms=5000, started_ms=T0)
    before, since = T0 - 100, T0 + 1900
    table.update({"gw-b.1": node(1, (SID, 500, before))}, T0)
    assert table.drain_units(KIND, "acme") == []
    table.update({"gw-b.1": node(2, (SID, 530, before))}, T0 + 500)
    table.update({"gw-b.1": node(2, (SID, 530, before))}, T0 + 1000)  # unchanged: nothing new
    table.update({"gw-b.1": node(3, (SID, 540, before))}, T0 + 1500)
    assert table.drain_units(KIND, "acme") == [(T0 + 500, 30), (T0 + 1500, 10)]
    assert table.drain_units(KIND, "acme") == []  # each unit once
    table.update({"gw-b.1": node(4, (SID, 4, since))}, T0 + 2000)  # started again: all new
    other = sensor_id(KIND, "bolt")
    table.update({"gw-b.1": node(5, (SID, 4, since), (other, 3, T0 + 2400))}, T0 + 2500)
    assert table.drain_units(KIND, "acme") == [(T0 + 2000, 4)]
    assert table.drain_units(KIND, "bolt") == [(T0 + 2500, 3)]
    table.update({"gw-c.1": node(1, (SID, 7, T0 + 2600))}, T0 + 3000)  # a new peer, b unlisted
    table.update({"gw-b.1": node(9, (SID, 4, since)), "gw-c.1": node(1)}, T0 + 3500)
    assert table.drain_units(KIND, "acme") == [(T0 + 3000, 7)]  # b's 4 not counted again


def test_undrained_units_are_dropped_after_a_hold_and_merge_past_a_cap() -> None:
    table = PeerTable(hold_ms=PENDING_HOLD_MS * 2)
    table.update({"gw-b.1": node(1)}, T0)
    for step in range(1, MAX_PENDING + 3):
        table.update({"gw-b.1": node(1 + step, (SID, step, T0))}, T0 + step)
    pending = table.drain_units(KIND, "acme")
    assert len(pending) == MAX_PENDING and sum(u for _, u in pending) == MAX_PENDING + 2
    table.update({"gw-b.1": node(100, (SID, 500, T0))}, T0 + 100)
    table.update({"gw-b.1": node(101, (SID, 500, T0))}, T0 + 100 + PENDING_HOLD_MS + 1)
    assert table.drain_units(KIND, "acme") == []


def test_after_a_gap_counts_only_set_where_they_stand() -> None:
    """Across a ZooKeeper outage (or a peer left out) every gateway enforced alone: what the
    peer's count grew by meanwhile is not charged here at once; growth after it is."""
    table = PeerTable(hold_ms=5000, started_ms=T0)
    table.update({"gw-b.1": node(1, (SID, 10, T0))}, T0)
    table.update({"gw-b.1": node(2, (SID, 20, T0))}, T0 + 500)
    assert table.drain_units(KIND, "acme") == [(T0, 10), (T0 + 500, 10)]  # fresh, then growth
    table.failed(T0 + 1000)
    table.update({"gw-b.1": node(3, (SID, 60_000, T0))}, T0 + 600_000)  # ten minutes later
    table.update({"gw-b.1": node(4, (SID, 60_050, T0))}, T0 + 600_500)
    assert table.drain_units(KIND, "acme") == [(T0 + 600_500, 50)]


def test_a_count_left_out_of_the_znode_and_shown_again_is_not_taken_twice() -> None:
    table = PeerTable(hold_ms=5000, started_ms=T0)
    table.update({"gw-b.1": node(1, (SID, 3, T0))}, T0)
    table.update({"gw-b.1": node(2)}, T0 + 500)  # crowded out by the entry cap
    table.update({"gw-b.1": node(3, (SID, 5, T0))}, T0 + 1000)
    assert table.drain_units(KIND, "acme") == [(T0, 3), (T0 + 1000, 2)]


def test_a_count_first_seen_long_after_it_began_only_sets_where_it_stands() -> None:
    """A peer back after its memory here was forgotten, or a count older than `FRESH_MS` when
    first seen: its units were enforced elsewhere."""
    table = PeerTable(hold_ms=5000, started_ms=T0)
    table.update({"gw-b.1": node(1, (SID, 1000, T0 + 10))}, T0 + 10 + FRESH_MS + 1)
    assert table.drain_units(KIND, "acme") == []


def test_peers_units_leave_a_limiter_at_most_its_peer_debt_past_the_edge() -> None:
    """A peer's one huge request (or a bad count) cannot lock a tenant out for longer."""
    pacing = TenantPacing(10, 200)  # a burst of 20 s
    pacing.apply("acme", 1_000_000, T0)
    assert pacing.throttle_ms("acme", T0) == PEER_DEBT_MS
    pacing.record("acme", 100, T0)  # its own units are charged in full
    assert pacing.throttle_ms("acme", T0) == PEER_DEBT_MS + 10_000
    quota = ControllerMutationQuota()
    key = SensorKey("acme", "sa", "")
    assert quota.apply(key, 1_000_000, 2.0, T0) == -2.0 * PEER_DEBT_MS / 1000
    assert quota.apply(key, 5, 2.0, T0 - 1000) == -2.0 * PEER_DEBT_MS / 1000  # learnt late


def test_a_count_is_published_while_it_moves_and_starts_again_after() -> None:
    counters = UnitCounters()
    counters.add(KIND, "acme", 20, T0)
    counters.add(KIND, "acme", 5, T0 + 10)
    counters.add(KIND, "acme", 0, T0 + 20)
    assert list(counters.live(T0 + 10 + HELD_MS)) == [(KIND, "acme", 25, T0)]
    assert list(counters.live(T0 + 11 + HELD_MS)) == []
    counters.add(KIND, "acme", 1, T0 + 12 + HELD_MS)
    assert list(counters.live(T0 + 12 + HELD_MS)) == [(KIND, "acme", 1, T0 + 12 + HELD_MS)]


class Fleet:
    """Two gateways' throttling on one clock, their documents handed over by `exchange`."""

    def __init__(self, quotas: dict[QuotaEntity, dict[str, float]] | None = None) -> None:
        self.tables = [PeerTable(hold_ms=60_000), PeerTable(hold_ms=60_000)]
        self.gates = [self._gate(table, quotas or {}) for table in self.tables]
        self.version = 0

    @staticmethod
    def _gate(table: PeerTable, quotas: dict[QuotaEntity, dict[str, float]]) -> GatewayThrottling:
        gate = GatewayThrottling(
            QuotaBook(FakeSource({"acme": quotas})),
            samples=11,
            window_s=1,
            registry=CollectorRegistry(),
            fleet=table,
            fleet_units=table,
            config_changes_per_s=1,
            partition_mutations_per_s=10,
        )
        asyncio.run(gate.load("acme"))
        return gate

    def exchange(self, now_ms: int) -> None:
        self.version += 1
        docs = []
        for gate in self.gates:
            units = [
                (sensor_id(k, key), UnitCount(u, s)) for k, key, u, s in gate.live_units(now_ms)
            ]
            docs.append(encode_rates([], units)[0])
        self.tables[0].update({"b": (self.version, docs[1])}, now_ms)
        self.tables[1].update({"a": (self.version, docs[0])}, now_ms)


def test_a_tenant_s_partition_pacing_holds_across_gateways() -> None:
    """10 a second, a burst of 200: the burst spent through gateway A is spent on B once they
    have exchanged; B's own partitions come back to A; alone, B would have granted 200 more."""
    fleet = Fleet()
    a, b = fleet.gates
    fleet.exchange(T0)  # each has seen the other: counts from here on are learnt
    a.mutations(ALICE, False, T0).record(200)
    fleet.exchange(T0 + 500)
    assert b.mutation_throttle_ms(ALICE, T0 + 500) == 0  # 200 in 0.5 s: the burst, not past it
    b.mutations(ALICE, False, T0 + 500).record(100)
    assert b.mutation_throttle_ms(ALICE, T0 + 500) == 10_000  # learnt 0.5 s late
    fleet.exchange(T0 + 1000)
    assert a.mutation_throttle_ms(ALICE, T0 + 1000) == 9_000  # B's 100 charged on A too
    b.mutations(ALICE, False, T0 + 1000).record(300)  # 39 s past the burst
    fleet.exchange(T0 + 1500)
    assert a.mutations(ALICE, False, T0 + 1500).exceeded()  # refused on A: 30 s past it
    assert not a.mutations(ALICE, False, T0 + 10_001).exceeded()  # 30 s past it again


def test_config_changes_and_the_kip_599_bucket_hold_across_gateways() -> None:
    quotas = {QuotaEntity("sa-alice", None): {"controller_mutation_rate": 1.0}}
    fleet = Fleet(quotas)
    a, b = fleet.gates
    fleet.exchange(T0)
    changes = a.config_change_budget(ALICE, False, T0)
    changes.record(50)  # the config changes' burst (50 at 1 a second)
    a.mutations(ALICE, True, T0).record(15)  # 11 tokens (11 × 1 s × 1/s) and 4 past them
    assert b.config_change_throttle_ms(ALICE, T0) == 0  # before the exchange: B's own
    fleet.exchange(T0 + 500)
    b.config_change_budget(ALICE, False, T0 + 500).record(5)
    assert b.config_change_throttle_ms(ALICE, T0 + 500) == 5_000
    assert b.mutations(ALICE, True, T0 + 500).exceeded()  # the strict version refuses
    assert b.mutation_throttle_ms(ALICE, T0 + 500) == 4_000  # 4 tokens short at 1 a second
    assert {(kind, units) for kind, _, units, _ in b.live_units(T0 + 500)} == {
        ("config_changes", 5)
    }


def test_without_fleet_units_nothing_is_counted() -> None:
    gate = GatewayThrottling(
        QuotaBook(FakeSource({"acme": {}})), samples=11, window_s=1, registry=CollectorRegistry()
    )
    asyncio.run(gate.load("acme"))
    gate.mutations(ALICE, False, T0).record(10)
    assert list(gate.live_units(T0)) == []
