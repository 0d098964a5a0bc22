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
    }


def test_status_groups_workers_under_their_gateway_with_a_total() -> None:
    body = {
        "version": 7,
        "stale_after_s": 10.0,
        "items": [_item("gw-b", 1, 2), _item("gw-a", None, 4), _item("gw-b", 0, 3)],
    }
    lines = render(body).splitlines()
    assert lines[0] == (
        "2 gateways, 3 processes, 9 connections; store version 7 (live: reported within 10.0 s)"
    )
    cells = [line.split()[:3] for line in lines[1:]]
    assert cells == [
        ["GATEWAY", "WORKER", "CONNECTIONS"],
        ["gw-a", "-", "4"],
        ["gw-b", "w0", "3"],
        ["gw-b", "w1", "2"],
        ["gw-b", "all", "5"],
    ]


def test_status_with_no_gateway_says_so() -> None:
    assert render({"version": 1, "stale_after_s": 10.0, "items": []}).startswith("0 gateways, ")
