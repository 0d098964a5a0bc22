"""A tenant's own usage and invoices on the gateway's HTTP port (gateway/http/usage.py).

A real broker, gateway and SQLite store; acme and bolt each have usage rows and an invoice,
written through the billing ledger. Each key reads its own tenant's rows and invoices only: bolt's
key with acme's cluster id or acme's invoice id finds nothing, no credentials or a wrong secret is
a 401, a bad window a 400. Blocking; one stack for the module.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from billing.rollup.sums import Sums
from tests.e2e.console.seed import HOUR_MS, hour_iso, seed_usage, this_hour_ms
from tests.e2e.gateway.http_stack import TenantHttp, http_gateway_stack, wait_http
from tests.gateway_stack import GatewayStack

pytestmark = pytest.mark.e2e
HOUR = this_hour_ms() - HOUR_MS
WINDOW = {"from": hour_iso(HOUR - 24 * HOUR_MS), "to": hour_iso(HOUR + HOUR_MS)}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with http_gateway_stack(Path(tmp_path_factory.mktemp("tenant-billing"))) as running:
        wait_http(running)
        yield running


@pytest.fixture(scope="module")
def period(stack: GatewayStack) -> str:
    return seed_usage(
        stack,
        [
            ("acme", HOUR, Sums(bytes_in=111, bytes_out=1, requests=1)),
            ("bolt", HOUR, Sums(bytes_in=222, bytes_out=2, requests=2)),
            ("bolt", HOUR - HOUR_MS, Sums(bytes_in=333, bytes_out=3, requests=3)),
        ],
    )


def tenant(stack: GatewayStack, name: str) -> TenantHttp:
    return TenantHttp(stack, stack.credentials[name])


def test_each_key_reads_its_own_tenants_usage_only(stack: GatewayStack, period: str) -> None:
    for name, expected in (("acme", [111]), ("bolt", [333, 222])):
        client = tenant(stack, name)
        answer = client.get(client.cluster + "/usage", params=WINDOW)
        assert answer.status_code == 200, answer.text
        items = answer.json()["items"]
        assert [row["bytes_in"] for row in items] == expected
        assert {row["tenant"] for row in items} == {name}
        daily = client.get(client.cluster + "/usage", params={**WINDOW, "granularity": "day"})
        assert sum(row["bytes_in"] for row in daily.json()["items"]) == sum(expected)


def test_each_key_reads_its_own_invoices_only(stack: GatewayStack, period: str) -> None:
    acme, bolt = tenant(stack, "acme"), tenant(stack, "bolt")
    listed = acme.get(acme.cluster + "/invoices")
    assert listed.status_code == 200, listed.text
    assert [i["id"] for i in listed.json()["items"]] == [f"acme-{period}"]
    one = acme.get(f"{acme.cluster}/invoices/acme-{period}")
    assert one.status_code == 200 and one.json()["tenant"] == "acme"
    # bolt's key asking for acme's invoice under its own cluster id: not found, nothing of acme's
    theirs = bolt.get(f"{bolt.cluster}/invoices/acme-{period}")
    assert theirs.status_code == 404 and "acme" not in theirs.text.replace(f"acme-{period}", "")


@pytest.mark.parametrize("path", ["/usage", "/invoices", "/invoices/{invoice}"])
def test_another_tenants_cluster_id_finds_nothing(
    stack: GatewayStack, period: str, path: str
) -> None:
    acme, bolt = tenant(stack, "acme"), tenant(stack, "bolt")
    url = acme.cluster + path.format(invoice=f"acme-{period}")
    answer = bolt.get(url, params=WINDOW)
    assert answer.status_code == 404, answer.text
    assert answer.json()["error_code"] == 40404  # as the v3 routes answer another's cluster
    assert "111" not in answer.text and "total" not in answer.text


@pytest.mark.parametrize("path", ["/usage", "/invoices", "/invoices/{invoice}"])
def test_without_valid_credentials_it_is_401(stack: GatewayStack, period: str, path: str) -> None:
    acme = tenant(stack, "acme")
    url = acme.base + acme.cluster + path.format(invoice=f"acme-{period}")
    creds = stack.credentials["acme"]
    wrong = base64.b64encode(f"{creds.key_id}:{creds.secret}x".encode()).decode()
    for headers in ({}, {"Authorization": f"Basic {wrong}"}):
        answer = requests.get(url, params=WINDOW, headers=headers, timeout=30)
        assert answer.status_code == 401, answer.text
        assert answer.headers["WWW-Authenticate"].startswith("Basic")
        assert "111" not in answer.text


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"from": WINDOW["from"]},
        {"from": "not a time", "to": WINDOW["to"]},
        {"from": WINDOW["to"], "to": WINDOW["from"]},
        {"from": "2020-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
        {**WINDOW, "granularity": "minute"},
    ],
)
def test_a_bad_window_is_a_400(stack: GatewayStack, params: dict[str, str]) -> None:
    acme = tenant(stack, "acme")
    answer = acme.get(acme.cluster + "/usage", params=params)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error_code"] == 40002 and answer.json()["message"]
