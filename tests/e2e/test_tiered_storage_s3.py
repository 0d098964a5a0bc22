"""Tiered storage against a real S3-compatible server: moto's server mode (PyPI `moto[server]`,
started here as its own process on a free port; chosen because PyPI serves it and it speaks the
S3 REST API over HTTP, while MinIO's server is not in the registries this project may use).

The broker copies closed segments to a bucket through boto3, deletes them locally past local
retention, and confluent-kafka reads every record from offset 0 (the older part via ranged GETs).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.probes import free_port
from infra.stack import BrokerProcess, start_broker
from tests.conftest import remember_log
from tests.e2e.kafka_admin import create_topic
from tests.e2e.tiered import (
    EARLIEST,
    EARLIEST_LOCAL,
    LATEST_TIERED,
    TIERED_TOPIC,
    S3Server,
    list_offset,
    local_segments,
    metric,
    numbers_confluent,
    produce,
    s3_broker_config,
    start_s3_server,
)
from tests.polling import wait_until

pytestmark = [pytest.mark.e2e]

BUCKET = "pier-tiered"
RECORDS = 3_000


@pytest.fixture
def s3_server(tmp_path: Path) -> Iterator[S3Server]:
    server = start_s3_server(tmp_path / "moto.log")
    try:
        yield server
    finally:
        server.stop()


def test_segments_go_to_s3_and_are_read_back(
    s3_server: S3Server, tmp_path: Path, topic_name: str, request: pytest.FixtureRequest
) -> None:
    broker: BrokerProcess = start_broker(
        tmp_path / "data", config=s3_broker_config(s3_server, BUCKET)
    )
    remember_log(request.node, "broker", broker.log_path)
    try:
        create_topic(broker.bootstrap, topic_name, config=TIERED_TOPIC)
        produce(broker.bootstrap, topic_name, RECORDS)
        local_start = wait_until(
            lambda: (s := list_offset(broker.host, broker.port, topic_name, EARLIEST_LOCAL)) > 0
            and s,
            what="local log start past 0", timeout=60, interval=0.2,
        )  # fmt: skip
        keys = s3_server.keys(BUCKET, f"{topic_name}-0/")
        data = [k for k in keys if k.endswith(".log")]
        assert data and all(k.replace(".log", ".index") in keys for k in data)
        assert all(k.replace(".log", ".leader-epoch-checkpoint") in keys for k in data)
        assert list_offset(broker.host, broker.port, topic_name, EARLIEST) == 0
        assert list_offset(broker.host, broker.port, topic_name, LATEST_TIERED) >= local_start - 1
        assert numbers_confluent(broker.bootstrap, topic_name) == list(range(RECORDS))
    finally:
        broker.stop()


def test_an_s3_server_that_is_down_delays_local_deletion(
    s3_server: S3Server, tmp_path: Path, topic_name: str, request: pytest.FixtureRequest
) -> None:
    """Connections refused: copies fail (counted), nothing local is deleted; once a server
    answers again on that address (an empty one: the bucket is created again) the segments are
    copied, leave local disk, and every record is still read."""
    broker: BrokerProcess = start_broker(
        tmp_path / "data", config=s3_broker_config(s3_server, BUCKET),
        metrics_port=free_port("127.0.0.1"),
    )  # fmt: skip
    remember_log(request.node, "broker", broker.log_path)
    try:
        create_topic(broker.bootstrap, topic_name, config=TIERED_TOPIC)
        s3_server.stop()
        produce(broker.bootstrap, topic_name, RECORDS)
        wait_until(
            lambda: metric(broker, "remote_copy_errors_total", topic_name) > 0
            and metric(broker, "remote_copy_lag_segments", topic_name) >= 2,
            what="failed copies counted", timeout=60, interval=0.2,
        )  # fmt: skip
        assert local_segments(broker.data_dir, topic_name)[0] == 0
        assert list_offset(broker.host, broker.port, topic_name, EARLIEST_LOCAL) == 0
        restarted = start_s3_server(tmp_path / "moto-2.log", port=s3_server.port)
        try:
            wait_until(
                lambda: list_offset(broker.host, broker.port, topic_name, EARLIEST_LOCAL) > 0,
                what="local log start past 0", timeout=60, interval=0.2,
            )  # fmt: skip
            assert restarted.keys(BUCKET, f"{topic_name}-0/")
            assert numbers_confluent(broker.bootstrap, topic_name) == list(range(RECORDS))
        finally:
            restarted.stop()
    finally:
        broker.stop()
