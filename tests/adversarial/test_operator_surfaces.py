"""Attacks on the operator's surfaces: what only operators may reach stays off the tenant listener.

Attack #15 of issue 21: the gateway's Prometheus endpoint (`--metrics-port`) answered on the
tenant-facing address (`--host`), without credentials, with every tenant's id and request counts.
Defended: the endpoint binds `--metrics-host` / `metrics.host`, default 127.0.0.1, never `--host`
(docs/security.md). Checked on a real gateway process listening for tenants on 0.0.0.0: the
metrics socket the process holds is bound to 127.0.0.1 (read from /proc/net/tcp through the
process's own descriptors), it answers on loopback, and on any non-loopback address of this host
the tenant listener answers while the metrics port refuses.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from gateway.config import GatewayConfig
from infra.broker import start_broker
from infra.gateway import GatewayProcess, start_gateway
from infra.probes import free_port
from tenancy.store import TenantStore
from tests.gateway_stack import TEST_GATEWAY_SETTINGS

LOOPBACK = "127.0.0.1"


def _listening(pid: int) -> dict[int, str]:
    """Port → bound IPv4 address of every TCP socket `pid` listens on (from /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found: dict[int, str] = {}
    with open(f"/proc/{pid}/net/tcp", encoding="ascii") as table:
        next(table)
        for line in table:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            address, port = local.split(":")
            found[int(port, 16)] = socket.inet_ntoa(bytes.fromhex(address)[::-1])
    return found


def _non_loopback_ipv4() -> str | None:
    """An address of this host other than loopback (the route a UDP socket would take), if any."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.254", 9))  # TEST-NET-1: nothing is sent
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def _connects(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def public_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A gateway whose tenant listener binds 0.0.0.0, with its metrics port on (default host)."""
    root: Path = tmp_path_factory.mktemp("operator-surfaces")
    db_url = f"sqlite:///{root / 'tenancy.db'}"
    with TenantStore.open(db_url) as store:
        store.upgrade()
    broker = start_broker(root / "broker" / "data")
    try:
        gateway = start_gateway(
            root / "gateway",
            broker.bootstrap,
            db_url,
            node_ids=[broker.node_id],
            host="0.0.0.0",
            metrics_port=free_port(),
            properties=TEST_GATEWAY_SETTINGS,
        )
        try:
            yield gateway
        finally:
            gateway.stop()
    finally:
        broker.stop()


def test_attack_15_metrics_listen_on_loopback_not_the_tenant_address(
    public_gateway: GatewayProcess,
) -> None:
    gateway = public_gateway
    assert gateway.metrics_port is not None
    bound = _listening(gateway.pid)
    assert bound.get(gateway.port) == "0.0.0.0", bound  # the tenant listener, as asked
    assert bound.get(gateway.metrics_port) == LOOPBACK, bound
    answer = requests.get(f"http://{LOOPBACK}:{gateway.metrics_port}/metrics", timeout=5)
    assert answer.status_code == 200
    public = _non_loopback_ipv4()
    if public is not None:  # where a tenant would reach the gateway from outside
        assert _connects(public, gateway.port)
        assert not _connects(public, gateway.metrics_port)


def _config(**extra: Any) -> GatewayConfig:
    return GatewayConfig(
        bootstrap="b:9092", db_url="sqlite://", port=9092, metrics_port=9404, **extra
    )


def test_metrics_host_defaults_to_loopback_whatever_the_tenant_host() -> None:
    assert _config(host="0.0.0.0").metrics_bind_host == LOOPBACK
    with_property = _config(host="0.0.0.0", properties={"metrics.host": "10.0.0.5"})
    assert with_property.metrics_bind_host == "10.0.0.5"
    with_flag = _config(metrics_host="0.0.0.0", properties={"metrics.host": "10.0.0.5"})
    assert with_flag.metrics_bind_host == "0.0.0.0"
