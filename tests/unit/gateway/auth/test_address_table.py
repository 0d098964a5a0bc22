"""The per-address table the workers of one gateway share (`gateway.auth.address_table`): two
workers' views of one file (in two processes for the locking) see each other's counts and
failures; a restarted worker's columns are released; the login backoff and the connection guard
built on it hold across the views."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from gateway.auth.address_table import PROBE, AddressTable
from gateway.auth.backoff import BackoffPolicy, LoginBackoff
from gateway.kafka.connection_guard import ConnectionGuard
from gateway.kafka.connection_limits import ConnectionLimits


class _Conn:
    def overdue(self, now: float) -> str | None:
        return None

    def close_for(self, reason: str, detail: str) -> None:
        pass


def _views(tmp_path: Path, slots: int = 1024) -> tuple[AddressTable, AddressTable]:
    path = AddressTable.create(tmp_path, 2, slots)
    return AddressTable(path, 2, 0), AddressTable(path, 2, 1)


def test_counts_are_shared_and_a_restarted_worker_releases_its_own(tmp_path: Path) -> None:
    zero, one = _views(tmp_path)
    with zero.entry("conn:10.0.0.1", 1.0) as entry:
        assert entry is not None
        entry.own_connections += 3
    with one.entry("conn:10.0.0.1", 2.0) as entry:
        assert entry is not None and entry.connections == 3 and entry.own_connections == 0
        entry.own_connections += 2
    AddressTable(zero.path, 2, 0).reset_worker()  # worker 0 restarted
    with one.entry("conn:10.0.0.1", 3.0) as entry:
        assert entry is not None and entry.connections == 2


def _fail_once(path: Path) -> None:
    table = AddressTable(path, 2, 1)
    backoff = LoginBackoff(BackoffPolicy(free_failures=1, initial_s=60.0), shared=table)
    ticket = backoff.admit("10.0.0.7", "key-a")
    assert ticket is not None
    backoff.failed(ticket)


def test_a_failure_on_one_worker_backs_the_address_off_on_the_other(tmp_path: Path) -> None:
    zero, _one = _views(tmp_path)
    process = multiprocessing.get_context("spawn").Process(target=_fail_once, args=(zero.path,))
    process.start()
    process.join(30)
    assert process.exitcode == 0
    backoff = LoginBackoff(BackoffPolicy(free_failures=1, initial_s=60.0), shared=zero)
    assert backoff.wait_s("10.0.0.7") > 0
    assert backoff.admit("10.0.0.7", "key-b") is None
    assert backoff.admit("10.0.0.8", "key-b") is not None  # another address is not affected


def test_the_per_address_cap_counts_every_workers_connections(tmp_path: Path) -> None:
    zero, one = _views(tmp_path)
    limits = ConnectionLimits(max_connections_per_ip=3)
    guards = [ConnectionGuard(limits, shared=zero), ConnectionGuard(limits, shared=one)]
    conns = [_Conn() for _ in range(4)]
    assert guards[0].admit(conns[0], "10.0.0.9") is None
    assert guards[1].admit(conns[1], "10.0.0.9") is None
    assert guards[1].admit(conns[2], "10.0.0.9") is None
    assert guards[0].admit(conns[3], "10.0.0.9") == "max_connections_per_ip"
    guards[1].gone(conns[1], "10.0.0.9")
    assert guards[0].admit(conns[3], "10.0.0.9") is None


def test_a_full_window_reuses_an_idle_slot_and_never_a_live_one(tmp_path: Path) -> None:
    zero, _one = _views(tmp_path, slots=PROBE)  # every key probes the same PROBE slots
    for k in range(PROBE):
        with zero.entry(f"conn:{k}", float(k)) as entry:
            assert entry is not None
            entry.own_connections += 1
    with zero.entry("conn:one-too-many", 100.0) as entry:
        assert entry is None  # every slot is live
    with zero.entry("conn:0", 101.0) as entry:
        assert entry is not None
        entry.own_connections -= 1  # now idle
    with zero.entry("conn:newcomer", 102.0) as entry:
        assert entry is not None and entry.connections == 0
    for k in range(1, PROBE):
        with zero.entry(f"conn:{k}", 103.0) as entry:
            assert entry is not None and entry.connections == 1


def test_a_table_of_another_worker_count_is_refused(tmp_path: Path) -> None:
    path = AddressTable.create(tmp_path, 2, 64)
    with pytest.raises(ValueError):
        AddressTable(path, 3, 0)
