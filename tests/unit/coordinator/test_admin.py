"""DescribeGroups, ListGroups and DeleteGroups views of the coordinator."""

import asyncio

import pytest

from brokers.coordinator import errors
from brokers.coordinator.group_admin import delete_groups, describe_group, list_groups
from brokers.coordinator.offset_store import CommitRequest, OffsetCommit
from tests.unit.coordinator.harness import driver, join_request, subscription

pytestmark = pytest.mark.unit


def test_describe_shows_metadata_and_assignment_only_when_stable() -> None:
    async def scenario() -> None:
        d = await driver()
        results = await d.stable_group(2)
        summary = describe_group(d.coordinator, "g")
        assert (summary.state, summary.protocol_type, summary.protocol) == (
            "Stable",
            "consumer",
            "range",
        )
        by_id = {m.member_id: m for m in summary.members}
        first = by_id[results[0].member_id]
        assert first.metadata == subscription("t") and first.assignment.startswith(b"a-")
        assert (first.client_id, first.client_host) == ("client", "/127.0.0.1")
        await d.start_join(join_request(require_known=False))
        rebalancing = describe_group(d.coordinator, "g")
        assert rebalancing.state == "PreparingRebalance" and rebalancing.protocol == ""
        assert all(m.metadata == m.assignment == b"" for m in rebalancing.members)
        missing = describe_group(d.coordinator, "nobody")
        assert missing.state == "Dead" and isinstance(missing.error, errors.GroupIdNotFoundError)
        assert isinstance(describe_group(d.coordinator, "").error, errors.InvalidGroupIdError)

    asyncio.run(scenario())


def test_list_groups_filters_by_state_case_insensitively() -> None:
    async def scenario() -> None:
        d = await driver()
        await d.stable_group(1)
        await d.coordinator.commit_offsets(
            CommitRequest("simple", "", None, -1, [OffsetCommit("t", 0, 1)])
        )
        error, everything = list_groups(d.coordinator)
        assert error is None
        assert {(g.group_id, g.state, g.protocol_type) for g in everything} == {
            ("g", "Stable", "consumer"),
            ("simple", "Empty", ""),
        }
        _, stable = list_groups(d.coordinator, ["stable"])
        assert [g.group_id for g in stable] == ["g"]

    asyncio.run(scenario())


def test_delete_groups_only_empty_ones() -> None:
    async def scenario() -> None:
        d = await driver()
        await d.stable_group(1)
        await d.coordinator.commit_offsets(
            CommitRequest("simple", "", None, -1, [OffsetCommit("t", 0, 1)])
        )
        results = dict(await delete_groups(d.coordinator, ["g", "simple", "nobody"]))
        assert isinstance(results["g"], errors.NonEmptyGroupError)
        assert results["simple"] is None
        assert isinstance(results["nobody"], errors.GroupIdNotFoundError)
        assert "simple" not in d.coordinator.groups
        records = d.topic.records(d.coordinator.partition_for("simple"))
        assert [value for _, value in records[-2:]] == [None, None]

    asyncio.run(scenario())
