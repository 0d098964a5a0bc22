"""Listings limited by the request header's name scope (`brokers.wire.headers.NAME_SCOPE_TAG`),
on a real in-process broker over the wire: the gateway sends a tenant's ListGroups (v3+) and
ListTransactions with the tenant's prefix there, so the broker builds the tenant's own entries
and not every tenant's (10,000 groups: ~50 ms of a broker's loop and ~22 ms of the gateway's per
listing, whatever the tenant held). Without a scope a listing is whole, as Kafka's."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from brokers.wire.errors import ErrorCode
from tests.integration.inproc import raw_call, running_broker
from tests.polling import wait_until
from tests.unit.handlers.admin_harness import entity

pytestmark = pytest.mark.integration
COMMIT, LIST_GROUPS, INIT_PID, LIST_TXNS = 8, 16, 22, 66
GROUPS = ("acme_a", "acme_b", "bolt_a", "acmeX")
TRANSACTIONAL_IDS = ("acme_t1", "acme_t2", "bolt_t1")


def _commit(bootstrap: str, group: str) -> None:
    partition = entity(
        COMMIT, 8, "OffsetCommitRequestPartition", partition_index=0, committed_offset=1,
        committed_leader_epoch=-1, committed_metadata="",
    )  # fmt: skip
    topic = entity(COMMIT, 8, "OffsetCommitRequestTopic", name="events", partitions=(partition,))
    request = entity(
        COMMIT, 8, "OffsetCommitRequest", group_id=group, generation_id_or_member_epoch=-1,
        member_id="", group_instance_id=None, topics=(topic,),
    )  # fmt: skip
    answer = raw_call(bootstrap, request)
    assert [p.error_code for t in answer.topics for p in t.partitions] == [ErrorCode.none]


def _init(bootstrap: str, transactional_id: str) -> bool:
    request = entity(
        INIT_PID, 4, "InitProducerIdRequest", transactional_id=transactional_id,
        transaction_timeout=timedelta(seconds=60), producer_id=-1, producer_epoch=-1,
    )  # fmt: skip
    return bool(raw_call(bootstrap, request).error_code == ErrorCode.none)


def _groups(bootstrap: str, version: int, scope: str | None) -> set[str]:
    fields = {"states_filter": ()} if version >= 4 else {}
    answer = raw_call(
        bootstrap, entity(LIST_GROUPS, version, "ListGroupsRequest", **fields), name_scope=scope
    )
    assert answer.error_code == ErrorCode.none
    return {g.group_id for g in answer.groups}


def _transactions(bootstrap: str, scope: str | None) -> set[str]:
    request = entity(
        LIST_TXNS, 1, "ListTransactionsRequest", state_filters=(), producer_id_filters=(),
        duration_filter=-1,
    )  # fmt: skip
    answer = raw_call(bootstrap, request, name_scope=scope)
    assert answer.error_code == ErrorCode.none
    return {t.transactional_id for t in answer.transaction_states}


def test_a_scoped_listing_lists_only_names_with_the_prefix(tmp_path: Path) -> None:
    with running_broker(tmp_path) as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("events", num_partitions=1, replication_factor=1)])[
            "events"
        ].result(30)
        for group in GROUPS:
            _commit(bootstrap, group)
        for transactional_id in TRANSACTIONAL_IDS:
            wait_until(lambda t=transactional_id: _init(bootstrap, t), what=f"{transactional_id}")

        assert _groups(bootstrap, 4, None) == set(GROUPS)
        assert _groups(bootstrap, 4, "acme_") == {"acme_a", "acme_b"}
        assert _groups(bootstrap, 5, "bolt_") == {"bolt_a"}
        assert _groups(bootstrap, 3, "nobody_") == set()
        assert _transactions(bootstrap, None) == set(TRANSACTIONAL_IDS)
        assert _transactions(bootstrap, "acme_") == {"acme_t1", "acme_t2"}
        assert _transactions(bootstrap, "bolt_") == {"bolt_t1"}
