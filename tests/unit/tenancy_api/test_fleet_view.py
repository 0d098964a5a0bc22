"""The fleet view's pieces (docs/gateway.md, "Fleet view"): a reporting id split into its gateway
and worker, and `pier gateway status`'s table grouped by gateway with a total per gateway."""

from __future__ import annotations

import pytest

from pier.gateway_status import render
from tenancy.api.routes.gateways import split_gateway_id

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        ("gw-9192.w0/5a0c81d2e4f1", ("gw-9192", 0)),
        ("gw-9192.w12/5a0c81d2e4f1", ("gw-9192", 12)),
        ("gw-9192/5a0c81d2e4f1", ("gw-9192", None)),
        ("edge.west.w1/ab", ("edge.west", 1)),
        ("edge.w01/ab", ("edge.w01", None)),  # not a worker suffix the supervisor writes
        ("edge.wx/ab", ("edge.wx", None)),
        ("gw-live", ("gw-live", None)),
    ],
)
def test_a_reporting_id_names_its_gateway_and_worker(
    reported: str, expected: tuple[str, int | None]
) -> None:
    assert split_gateway_id(reported) == expected


def _item(gateway: str, worker: int | None, connections: int) -> dict[str, object]:
    suffix = "" if worker is None else f".w{worker}"
    return {
        "id": f"{gateway}{suffix}/inc",
        "gateway": gateway,
        "worker": worker,
        "applied_version": 7,
        "behind": 0,
        "started_at": "2026-11-28T10:00:00Z",
        "last_seen": "2026-11-28T10:00:05Z",
        "connections": connections,
        "tenants": 1,
        "registered": worker != 1,
    }


def test_status_groups_workers_under_their_gateway_with_a_total() -> None:
    body = {
        "version": 7,
        "stale_after_s": 10.0,
        "zookeeper": {"connect": "zk:2181/pier", "readable": True},
        "items": [_item("gw-b", 1, 2), _item("gw-a", None, 4), _item("gw-b", 0, 3)],
    }
    lines = render(body).splitlines()
    assert lines[0] == (
        "2 gateways, 3 processes, 9 connections; store version 7 (live: reported within 10.0 s)"
        "; ZooKeeper zk:2181/pier: registrations"
    )
    cells = [line.split()[:6] for line in lines[1:]]
    assert cells == [
        ["GATEWAY", "WORKER", "CONNECTIONS", "TENANTS", "BEHIND", "ZK"],
        ["gw-a", "-", "4", "1", "0", "yes"],
        ["gw-b", "w0", "3", "1", "0", "yes"],
        ["gw-b", "w1", "2", "1", "0", "no"],
        ["gw-b", "all", "5", "2", "workers"],
    ]


def test_status_with_no_gateway_and_no_zookeeper_says_so() -> None:
    shown = render({"version": 1, "stale_after_s": 10.0, "zookeeper": None, "items": []})
    assert shown.startswith("0 gateways, ") and shown.endswith(
        "ZooKeeper not read (admin-api --zookeeper)"
    )
