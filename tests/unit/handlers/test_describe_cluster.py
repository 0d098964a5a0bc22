from collections.abc import Iterator
from pathlib import Path

import pytest

from brokers.app.runtime import Broker
from brokers.handlers import describe_cluster
from brokers.replication.metadata_cache import BrokerEndpoint
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.admin_harness import call, entity, routed, standalone_broker

pytestmark = pytest.mark.unit
KEY = 60


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with standalone_broker(tmp_path) as b:
        yield b


@pytest.mark.parametrize("version", range(2))
def test_every_version_lists_brokers_and_the_cluster(broker: Broker, version: int) -> None:
    broker.metadata.brokers[3] = BrokerEndpoint(3, "b3.example", 9093, "rack-b")
    request = entity(
        KEY, version, "DescribeClusterRequest", include_cluster_authorized_operations=False
    )
    response = call(routed(broker, describe_cluster.API_KEY), version, request)
    assert response.error_code == ErrorCode.none
    assert response.cluster_id == broker.metadata.cluster_id and len(response.cluster_id) > 0
    assert response.controller_id == 0
    assert [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers] == [
        (0, "127.0.0.1", 0, None),
        (3, "b3.example", 9093, "rack-b"),
    ]
    assert response.cluster_authorized_operations == -(2**31)


def test_authorized_operations_when_asked(broker: Broker) -> None:
    request = entity(KEY, 1, "DescribeClusterRequest", include_cluster_authorized_operations=True)
    response = call(routed(broker, describe_cluster.API_KEY), 1, request)
    operations = {bit for bit in range(32) if response.cluster_authorized_operations >> bit & 1}
    assert operations == {5, 7, 8, 9, 10, 11, 12}


def test_unknown_controller_is_reported_as_minus_one(broker: Broker) -> None:
    broker.metadata.controller_id = 42
    request = entity(KEY, 1, "DescribeClusterRequest", include_cluster_authorized_operations=False)
    assert call(routed(broker, describe_cluster.API_KEY), 1, request).controller_id == -1


@pytest.mark.parametrize(
    ("endpoint_type", "code"),
    [(2, ErrorCode.mismatched_endpoint_type), (7, ErrorCode.unsupported_endpoint_type)],
)
def test_endpoint_types_other_than_brokers(
    broker: Broker, endpoint_type: int, code: ErrorCode
) -> None:
    request = entity(
        KEY,
        1,
        "DescribeClusterRequest",
        include_cluster_authorized_operations=False,
        endpoint_type=endpoint_type,
    )
    response = call(routed(broker, describe_cluster.API_KEY), 1, request)
    assert (response.error_code, response.brokers) == (code, ())
    assert response.error_message
