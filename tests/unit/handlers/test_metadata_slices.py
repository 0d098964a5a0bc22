"""A Metadata answer naming many partitions is written `SLICE_PARTITIONS` partitions a turn of
the loop, other requests served in between (1,000 partitions held the loop 1.8 ms at once), and
is the same answer byte for byte as one written whole, on every version."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_payload_module
from kio.serial import entity_reader
from kio.static.constants import EntityType

from brokers.handlers import metadata
from brokers.server.context import RequestContext
from brokers.wire.errors import ErrorCode
from brokers.wire.headers import RequestHeader
from brokers.wire.metadata_response import MetadataBroker, encode_metadata_response
from tests.unit.handlers.admin_harness import entity, routed, standalone_broker
from tests.unit.handlers.test_descriptor_limit import create

pytestmark = pytest.mark.unit
TOPICS = {"alpha": 3, "beta": 3, "gamma": 3, "delta": 1}


def answer(route: Any, version: int) -> tuple[bytes, int]:
    """The handler's answer to an all-topics request, and how many loop turns another task got
    while it was written."""
    request = entity(
        3, version, "MetadataRequest",
        topics=() if version == 0 else None,  # all topics: v0 by an empty list
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
        include_cluster_authorized_operations=False,
    )  # fmt: skip
    ctx = RequestContext(RequestHeader(3, version, 7, "slices"), "127.0.0.1", "conn-1")

    async def scenario() -> tuple[bytes, int]:
        turns = 0
        answering = asyncio.ensure_future(route.handler(ctx, request))

        async def bystander() -> None:
            nonlocal turns
            while not answering.done():
                turns += 1
                await asyncio.sleep(0)

        watching = asyncio.ensure_future(bystander())
        body = await answering
        await watching
        return body, turns

    return asyncio.run(scenario())


@pytest.mark.parametrize("version", [0, 1, 5, 7, 9, 10, 12, 13])
def test_a_large_answer_is_written_in_slices_and_equals_the_whole(
    tmp_path: Path, version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    with standalone_broker(tmp_path) as broker:
        for name, partitions in TOPICS.items():
            assert create(broker, name, partitions).error_code == ErrorCode.none
        route = routed(broker, metadata.API_KEY)
        whole, whole_turns = answer(route, version)
        monkeypatch.setattr(metadata, "SLICE_PARTITIONS", 3)  # a slice a topic here
        sliced, sliced_turns = answer(route, version)
    assert sliced == whole
    assert whole_turns == 0  # written at once
    assert sliced_turns == len(TOPICS) - 1  # the bystander ran between each two slices
    response_class = load_payload_module(3, version, EntityType.response).MetadataResponse
    decoded, _ = entity_reader(response_class)(sliced, 0)
    assert {t.name: len(t.partitions) for t in decoded.topics} == TOPICS


def test_the_pieces_compose_the_answer_of_encode_metadata_response() -> None:
    broker = MetadataBroker(0, "localhost", 9092, None)
    for version in range(metadata.MAX_VERSION + 1):
        full = encode_metadata_response(
            version, throttle_ms=0, brokers=[broker], cluster_id="c", controller_id=0,
            topics=[], cluster_authorized_operations=metadata.AUTHORIZED_OPERATIONS_OMITTED,
        )  # fmt: skip
        response_class = load_payload_module(3, version, EntityType.response).MetadataResponse
        decoded, size = entity_reader(response_class)(full, 0)
        assert size == len(full) and decoded.topics == ()
