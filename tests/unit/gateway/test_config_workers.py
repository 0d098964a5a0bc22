"""The default number of gateway workers (`gateway.config`, `workers`): the machine's cores (at
most `MAX_DEFAULT_WORKERS`) where workers can run and share quotas, else 1; a set value wins."""

from __future__ import annotations

import os

from gateway.config import MAX_DEFAULT_WORKERS, GatewayConfig

ZK = {"zookeeper.connect": "127.0.0.1:2181/pier"}


def _config(properties: dict[str, str], port: int = 9092) -> GatewayConfig:
    return GatewayConfig(
        bootstrap="b:9092",
        db_url="sqlite://",
        port=port,
        broker_port_base=9100,
        properties=properties,
    )


def test_the_default_is_the_cores_with_fixed_ports_and_zookeeper() -> None:
    cores = min(os.cpu_count() or 1, MAX_DEFAULT_WORKERS)
    assert _config(ZK).setting("workers") == cores
    assert _config({**ZK, "http.port": "8082"}).setting("workers") == cores


def test_the_default_is_one_where_workers_cannot_share() -> None:
    assert _config({}).setting("workers") == 1  # no ZooKeeper: each would grant every quota
    assert _config(ZK, port=0).setting("workers") == 1  # an ephemeral port cannot be shared
    assert _config({**ZK, "http.port": "0"}).setting("workers") == 1


def test_a_set_value_wins() -> None:
    assert _config({**ZK, "workers": "1"}).setting("workers") == 1
    assert _config({"workers": "3"}).setting("workers") == 3
