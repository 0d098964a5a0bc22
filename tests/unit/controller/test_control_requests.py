"""Control request codecs and framing: round trips, garbage refused, correlation checked."""

from __future__ import annotations

import contextlib
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.controller import requests as rq
from brokers.controller.channel import frame_request, read_response
from brokers.wire.headers import parse_request_header

pytestmark = pytest.mark.unit


def test_a_response_for_another_correlation_id_is_refused() -> None:
    body = rq.encode(rq.UpdateMetadataResponse(error_code=0))
    with pytest.raises(rq.MalformedControlRequestError):
        read_response(rq.UPDATE_METADATA, struct.pack(">i", 5) + b"\x00" + body, 6)
    assert (
        read_response(rq.UPDATE_METADATA, struct.pack(">i", 6) + b"\x00" + body, 6).error_code == 0
    )


ids = st.lists(st.integers(0, 2**31 - 1), max_size=5).map(tuple)


@settings(max_examples=60, deadline=None)
@given(
    topic=st.text("abc._-", min_size=1, max_size=20),
    leader=st.integers(-1, 2**31 - 1),
    isr=ids,
    replicas=ids,
    epoch=st.integers(0, 2**31 - 1),
    is_new=st.booleans(),
)
def test_leader_and_isr_round_trips_through_the_frame(
    topic: str,
    leader: int,
    isr: tuple[int, ...],
    replicas: tuple[int, ...],
    epoch: int,
    is_new: bool,
) -> None:
    state = rq.LeaderAndIsrPartitionState(
        partition_index=0,
        controller_epoch=epoch,
        leader=leader,
        leader_epoch=epoch,
        isr=isr,
        partition_epoch=3,
        replicas=replicas,
        is_new=is_new,
    )
    request = rq.LeaderAndIsrRequest(
        controller_id=1,
        controller_epoch=epoch,
        broker_epoch=2**40,
        topic_states=(
            rq.LeaderAndIsrTopicState(
                topic_name=topic, topic_id=uuid.UUID(int=epoch + 1), partition_states=(state,)
            ),
        ),
        live_leaders=(rq.LeaderAndIsrLiveLeader(broker_id=1, host_name="h", port=9092),),
    )
    frame = memoryview(frame_request(request, 17, b"pier-controller"))[4:]
    header, offset = parse_request_header(frame, flexible=True)
    assert (header.api_key, header.api_version, header.correlation_id) == (4, 5, 17)
    assert rq.decode(rq.LeaderAndIsrRequest, frame, offset) == request


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64))
def test_garbage_never_crashes_the_decoder(data: bytes) -> None:
    for schema in (*rq.REQUESTS.values(), *rq.RESPONSES.values()):
        with contextlib.suppress(rq.MalformedControlRequestError):
            rq.decode(schema, data)
