"""Property: whatever field values a group API request carries, its handler answers with a response
that encodes for that version (or stays parked in a rebalance); it never raises."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.coordinator.test_handlers import Api, api
from tests.unit.handlers.admin_harness import entity

pytestmark = pytest.mark.unit
names = st.sampled_from(["", "g", "t", "x" * 300]) | st.text(max_size=8)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
millis = st.integers(-(2**31), 2**31 - 1).map(lambda v: datetime.timedelta(milliseconds=v))


VERSIONS = {
    8: (2, 9), 9: (1, 9), 10: (0, 6), 11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6),
    16: (0, 5), 28: (0, 4), 42: (0, 2), 47: (0, 0),
}  # fmt: skip


@st.composite
def requests(draw: st.DrawFn, api_key: int) -> tuple[int, int, str, dict[str, Any]]:
    version = draw(st.integers(*VERSIONS[api_key]))
    fields = _fields(draw, api_key, version)
    return api_key, version, fields.pop("_class"), fields


def _fields(draw: st.DrawFn, api_key: int, version: int) -> dict[str, Any]:
    group, member, text = draw(names), draw(names), draw(names)
    maybe = draw(st.none() | names)
    number = draw(int32)
    if api_key == 11:
        protocol = entity(11, version, "JoinGroupRequestProtocol", name=text, metadata=b"\x00\x00")
        return dict(
            _class="JoinGroupRequest", group_id=group, member_id=member, group_instance_id=maybe,
            session_timeout=draw(millis), rebalance_timeout=draw(millis), protocol_type=text,
            protocols=(protocol,) * draw(st.integers(0, 2)), reason=None,
        )  # fmt: skip
    if api_key == 14:
        assignment = entity(
            14, version, "SyncGroupRequestAssignment", member_id=member, assignment=b""
        )
        return dict(
            _class="SyncGroupRequest", group_id=group, generation_id=number, member_id=member,
            group_instance_id=maybe, protocol_type=maybe, protocol_name=maybe,
            assignments=(assignment,),
        )  # fmt: skip
    if api_key in (12, 13):
        members: tuple[Any, ...] = ()
        if api_key == 13 and version >= 3:
            identity = dict(member_id=member, group_instance_id=maybe, reason=None)
            members = (entity(13, version, "MemberIdentity", **identity),)
        cls = "HeartbeatRequest" if api_key == 12 else "LeaveGroupRequest"
        return dict(
            _class=cls, group_id=group, generation_id=number, member_id=member,
            group_instance_id=maybe, members=members,
        )  # fmt: skip
    if api_key == 8:
        p = entity(
            8,
            version,
            "OffsetCommitRequestPartition",
            partition_index=number,
            committed_offset=draw(int64),
            committed_leader_epoch=number,
            committed_metadata=maybe,
        )
        topic = entity(8, version, "OffsetCommitRequestTopic", name=text, partitions=(p,))
        return dict(
            _class="OffsetCommitRequest", group_id=group, generation_id_or_member_epoch=number,
            member_id=member, group_instance_id=maybe, retention_time=draw(millis), topics=(topic,),
        )  # fmt: skip
    if api_key == 9:
        if version >= 8:
            topics = (
                entity(
                    9, version, "OffsetFetchRequestTopics", name=text, partition_indexes=(number,)
                ),
            )
            g = entity(
                9,
                version,
                "OffsetFetchRequestGroup",
                group_id=group,
                member_id=None,
                member_epoch=-1,
                topics=draw(st.none() | st.just(topics)),
            )
            return dict(_class="OffsetFetchRequest", groups=(g,), require_stable=True)
        topic = entity(
            9, version, "OffsetFetchRequestTopic", name=text, partition_indexes=(number,)
        )
        return dict(
            _class="OffsetFetchRequest", group_id=group, topics=(topic,), require_stable=False
        )
    if api_key == 28:
        p = entity(
            28, version, "TxnOffsetCommitRequestPartition", partition_index=draw(st.integers(-1, 2)),
            committed_offset=draw(int64), committed_leader_epoch=number, committed_metadata=maybe,
        )  # fmt: skip
        topic = entity(28, version, "TxnOffsetCommitRequestTopic", name=text, partitions=(p,))
        return dict(
            _class="TxnOffsetCommitRequest", transactional_id=text, group_id=group,
            producer_id=draw(st.integers(-1, 3) | int64), producer_epoch=draw(st.integers(-1, 3)),
            generation_id=number, member_id=member, group_instance_id=maybe, topics=(topic,),
        )  # fmt: skip
    if api_key == 10:
        return dict(
            _class="FindCoordinatorRequest",
            key=group,
            key_type=draw(st.integers(-128, 127)),
            coordinator_keys=(group, text),
        )
    if api_key == 15:
        return dict(
            _class="DescribeGroupsRequest", groups=(group, text), include_authorized_operations=True
        )
    if api_key == 16:
        return dict(_class="ListGroupsRequest", states_filter=(text,), types_filter=(text,))
    if api_key == 42:
        return dict(_class="DeleteGroupsRequest", groups_names=(group, text))
    p47 = entity(47, 0, "OffsetDeleteRequestPartition", partition_index=number)
    t47 = entity(47, 0, "OffsetDeleteRequestTopic", name=text, partitions=(p47,))
    return dict(_class="OffsetDeleteRequest", group_id=group, topics=(t47,))


@pytest.mark.parametrize("api_key", sorted(VERSIONS))
def test_group_handlers_answer_any_field_values(tmp_path: Path, api_key: int) -> None:
    loop = asyncio.new_event_loop()
    context = api(tmp_path)
    a: Api = loop.run_until_complete(context.__aenter__())
    seen: list[int] = []

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(requests(api_key))
    def answers(request: tuple[int, int, str, dict[str, Any]]) -> None:
        _, version, name, fields = request

        async def call() -> None:
            with contextlib.suppress(TimeoutError):  # parked in a rebalance: allowed
                await asyncio.wait_for(a.call(api_key, version, name, **fields), 0.05)

        loop.run_until_complete(call())
        seen.append(version)

    try:
        answers()
        assert len(seen) == 40
    finally:
        loop.run_until_complete(context.__aexit__(None, None, None))
        loop.close()
