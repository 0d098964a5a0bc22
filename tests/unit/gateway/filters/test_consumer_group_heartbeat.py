"""ConsumerGroupHeartbeat through the gateway: the owned partitions' topic ids must be the
tenant's (others dropped, fail closed), all of them looked up at once."""

from __future__ import annotations

import asyncio
import datetime
import uuid

import pytest

from gateway.kafka.filters import consumer_group_heartbeat
from tests.unit.gateway.filters.harness import FakeFleet, context, forwarded, request, run

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("version", [0, 1])
def test_owned_partitions_of_other_tenants_or_no_topic_are_dropped_in_one_lookup(
    version: int,
) -> None:
    own, foreign, nobody = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    fleet = FakeFleet(ids={own: "acme_a", foreign: "bolt_a"})
    ctx = context(consumer_group_heartbeat, version, fleet=fleet)
    owned = tuple(
        request(consumer_group_heartbeat, version, "TopicPartitions", topic_id=i, partitions=(0,))
        for i in (own, foreign, nobody)
    )
    req = request(
        consumer_group_heartbeat,
        version,
        "ConsumerGroupHeartbeatRequest",
        group_id="g",
        member_id="m",
        member_epoch=3,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=("a",),
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=owned,
    )
    outcome = forwarded(asyncio.run(run(consumer_group_heartbeat, ctx, req)))
    assert outcome.request.group_id == "acme_g"
    assert outcome.request.subscribed_topic_names == ("acme_a",)
    assert [t.topic_id for t in outcome.request.topic_partitions] == [own]
    assert fleet.lookups == [("ids", 3)]
