"""The fleet view (issue 24 item 5; docs/gateway.md "Fleet view", docs/admin-api.md): a real
`pier admin-api` and a real `pier gateway --workers 2` on one tenant store and broker.

- `GET /v1/gateways` lists both workers live, each as its own row naming its `gateway` (the
  gateway's id) and its `worker` (0, 1); the connections each row counts are the Kafka sessions
  that landed on that worker (its own `pier_gateway_connections` gauge on metrics port + k), with
  producers added until both workers hold some (the kernel's SO_REUSEPORT hash places them).
- With `pier admin-api --zookeeper` (the gateways' chroot) each worker is `registered`: its fleet
  znode exists.
- `pier gateway status` (the real CLI, a subprocess) prints the summary, a row per worker and the
  gateway's total; `--json` prints the API's answer; an admin API that is down, a wrong token and
  a missing token each give one line on stderr and exit 1, 1 and 2 (no traceback).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from infra.admin_api import AdminApiProcess, start_admin_api
from infra.probes import free_port
from tests.e2e.gateway.test_fleet_quotas import fleet_chroot
from tests.e2e.gateway.test_fleet_quotas_workers import WORKERS, _metrics_ports, _supervisor_ready
from tests.gateway_stack import OPERATOR, GatewayStack
from tests.polling import wait_until

__all__ = ["fleet_chroot"]  # the module fixture: this module's ZooKeeper chroot
pytestmark = pytest.mark.e2e
MAX_PRODUCERS = 24


@dataclass
class FleetView:
    stack: GatewayStack
    api: AdminApiProcess
    token: str
    metrics_port: int
    gateway: str  # the gateway's id (`gw-<port>`)
    api_zookeeper: str  # the admin API's --zookeeper

    def listing(self) -> dict[str, Any]:
        request = urllib.request.Request(
            self.api.url + "/v1/gateways", headers={"Authorization": f"Bearer {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            body: dict[str, Any] = json.loads(answer.read())
        return body

    def rows(self) -> dict[int | None, dict[str, Any]]:
        """This gateway's rows by worker index."""
        return {
            item["worker"]: item
            for item in self.listing()["items"]
            if item["gateway"] == self.gateway
        }

    def open_connections(self, worker: int) -> int:
        """Worker `worker`'s own count of open authenticated connections (all tenants)."""
        url = f"http://127.0.0.1:{self.metrics_port + worker}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        return round(
            sum(
                sample.value
                for family in text_string_to_metric_families(text)
                if family.name == "pier_gateway_connections"
                for sample in family.samples
            )
        )


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory, fleet_chroot: str) -> Iterator[FleetView]:
    root = Path(tmp_path_factory.mktemp("fleet-view"))
    metrics_port = _metrics_ports()
    settings = {"workers": str(WORKERS), "zookeeper.connect": fleet_chroot}
    with GatewayStack(root, gateway_settings=settings, gateway_metrics_port=metrics_port) as stack:
        assert stack.gateway is not None
        gateway = stack.gateway
        wait_until(lambda: _supervisor_ready(gateway), what="both workers ready", timeout=60)
        with stack.store() as store:
            token = str(store.create_operator("fleet-view", actor=OPERATOR))
        api = start_admin_api(stack.db_url, root / "admin-api.log", zookeeper=fleet_chroot)
        try:
            yield FleetView(
                stack, api, token, metrics_port, f"gw-{stack.gateway.port}", fleet_chroot
            )
        finally:
            api.stop()


def pier(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pier", "gateway", "status", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_both_workers_are_listed_with_the_connections_that_landed_on_each(
    view: FleetView,
) -> None:
    wait_until(lambda: view.rows().keys() == {0, 1}, what="both workers listed")
    rows = view.rows()
    assert {row["id"].split("/")[0] for row in rows.values()} == {
        f"{view.gateway}.w0",
        f"{view.gateway}.w1",
    }
    assert all(row["behind"] == 0 for row in rows.values()), rows
    # Each worker's fleet znode (/pier/gateways/<id>.<incarnation>) is seen by the admin API.
    wait_until(
        lambda: all(row["registered"] for row in view.rows().values()),
        what="both workers registered in ZooKeeper",
    )
    assert view.listing()["zookeeper"]["readable"] is True
    config = view.stack.client_config("acme")
    producers: list[Producer] = []

    def counted() -> list[tuple[int, int]]:
        rows = view.rows()
        return [(rows[k]["connections"], rows[k]["tenants"]) for k in range(WORKERS)]

    seen: dict[str, object] = {}

    def listed_as_open() -> bool:
        # Each worker's own count is read afresh beside the listing: a producer's connections
        # come and go after `list_topics` returns (librdkafka ≥ 2.10 drops its bootstrap
        # connection once it has learned the brokers, and opens one to the broker it was told
        # of), so a worker that held one may hold none a moment later. While one holds none,
        # another producer is added; the kernel's SO_REUSEPORT hash places its connections.
        opened = [view.open_connections(k) for k in range(WORKERS)]
        seen.update(opened=opened, listed=counted())
        if not all(opened):
            assert len(producers) < MAX_PRODUCERS, f"every connection on one worker: {opened}"
            producer = Producer({**config, "client.id": f"view-{len(producers)}"})
            producer.list_topics(timeout=30)  # authenticated on some worker
            producers.append(producer)
            return False
        return seen["listed"] == [(n, 1) for n in opened]

    try:
        wait_until(
            listed_as_open,
            what="the listing counts each worker's connections",
            timeout=60,
            interval=0.2,
        )
    except AssertionError as exc:  # say what differed: (connections, tenants) against the gauge
        raise AssertionError(
            f"{exc}; workers' gauges {seen['opened']}, listed {seen['listed']}"
        ) from None
    for producer in producers:
        producer.flush(10)
    producers.clear()  # closed here, before the module fixture stops the gateway


def test_pier_gateway_status_prints_each_worker_and_the_gateways_total(view: FleetView) -> None:
    wait_until(lambda: view.rows().keys() == {0, 1}, what="both workers listed")
    shown = pier("--url", view.api.url, "--token", view.token)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("1 gateways, 2 processes, "), lines[0]
    assert lines[0].endswith(f"ZooKeeper {view.api_zookeeper}: registrations"), lines[0]
    header = lines[1].split()
    assert header[:6] == ["GATEWAY", "WORKER", "CONNECTIONS", "TENANTS", "BEHIND", "ZK"], header
    cells = [line.split() for line in lines[2:]]
    assert [row[:2] for row in cells] == [
        [view.gateway, "w0"],
        [view.gateway, "w1"],
        [view.gateway, "all"],
    ]
    assert int(cells[2][2]) == int(cells[0][2]) + int(cells[1][2])
    assert cells[0][5] == cells[1][5] == "yes", cells
    assert cells[2][3:] == ["2", "workers"]

    as_json = pier("--url", view.api.url, "--token", view.token, "--json")
    assert as_json.returncode == 0, as_json.stderr
    items = json.loads(as_json.stdout)["items"]
    assert sorted((i["gateway"], i["worker"]) for i in items) == [
        (view.gateway, 0),
        (view.gateway, 1),
    ]


def test_pier_gateway_status_fails_with_one_line_when_it_cannot_ask(view: FleetView) -> None:
    down = pier("--url", f"http://127.0.0.1:{free_port()}", "--token", view.token)
    assert down.returncode == 1 and down.stdout == ""
    assert down.stderr.startswith("pier: error: cannot reach the admin API at "), down.stderr
    assert len(down.stderr.splitlines()) == 1, down.stderr

    refused = pier("--url", view.api.url, "--token", "pop_not-a-token")
    assert refused.returncode == 1 and refused.stderr.startswith("pier: error: 401"), refused.stderr
    assert len(refused.stderr.splitlines()) == 1, refused.stderr

    untold = subprocess.run(
        [sys.executable, "-m", "pier", "gateway", "status", "--url", view.api.url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PIER_ADMIN_TOKEN"},
    )
    assert untold.returncode == 2, untold.stderr
    assert untold.stderr.startswith("pier: error: an operator token is needed"), untold.stderr
