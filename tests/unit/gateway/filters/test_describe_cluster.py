"""DescribeCluster through the gateway: brokers and cluster id rewritten, controllers refused,
authorized operations from the tenant's CLUSTER ACLs."""

from __future__ import annotations

import asyncio

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import describe_cluster as dc
from tests.unit.gateway.filters.harness import (
    FakeAccess,
    context,
    forwarded,
    replied,
    request,
    response,
    run,
)

pytestmark = pytest.mark.unit


def _answer(version: int, controller: int) -> object:
    brokers = tuple(
        response(
            dc, version, "DescribeClusterBroker", broker_id=i, host="b.fleet", port=9092, rack="r"
        )
        for i in (1, 3)
    )
    return response(
        dc,
        version,
        "DescribeClusterResponse",
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=1,
        cluster_id="fleet-id",
        controller_id=controller,
        brokers=brokers,
        cluster_authorized_operations=-(2**31),
    )


@pytest.mark.parametrize("version", [0, 1])
def test_brokers_and_cluster_id_are_the_gateways(version: int) -> None:
    ctx = context(dc, version, access=FakeAccess(denied={("DESCRIBE", "CLUSTER", "kafka-cluster")}))
    req = request(
        dc,
        version,
        "DescribeClusterRequest",
        include_cluster_authorized_operations=True,
        endpoint_type=1,
    )
    shown = forwarded(asyncio.run(run(dc, ctx, req))).on_response(_answer(version, 3))
    assert shown.cluster_id == "virtual-acme"
    assert [(b.broker_id, b.host, b.port, b.rack) for b in shown.brokers] == [
        (1, "gw.example", 9101, None)
    ]
    assert shown.controller_id == -1  # broker 3 is not shown
    assert shown.cluster_authorized_operations == 0  # no DESCRIBE on the cluster


def test_operations_computed_when_allowed() -> None:
    ctx = context(dc, 1)
    req = request(
        dc, 1, "DescribeClusterRequest", include_cluster_authorized_operations=True, endpoint_type=1
    )
    shown = forwarded(asyncio.run(run(dc, ctx, req))).on_response(_answer(1, 1))
    assert shown.controller_id == 1 and shown.cluster_authorized_operations & (1 << 8)
    assert not shown.cluster_authorized_operations & (1 << 9)  # never CLUSTER_ACTION


@pytest.mark.parametrize("endpoint_type", [2, 5])
def test_controller_endpoints_are_refused(endpoint_type: int) -> None:
    ctx = context(dc, 1)
    req = request(
        dc,
        1,
        "DescribeClusterRequest",
        include_cluster_authorized_operations=False,
        endpoint_type=endpoint_type,
    )
    assert replied(asyncio.run(run(dc, ctx, req))).error_code == ErrorCode.unsupported_endpoint_type
