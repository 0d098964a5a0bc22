"""AddPartitionsToTxn (key 24), versions 0-3 (CAP 3: v4+ batches transactions, brokers only,
and is never forwarded): the transactional id
and topic names are the tenant's (RW); results stripped, topics not the tenant's dropped.
Kafka's ACLs: WRITE on the transactional id (else every partition gets
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic; as Kafka does, if any topic is
refused nothing is forwarded: refused partitions get TOPIC_AUTHORIZATION_FAILED and the others
OPERATION_NOT_ATTEMPTED. Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import entity, response
from gateway.kafka.filters.groups_common import prefixed, split_by_acl, stripped

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 3


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    txn, topics = request.v3_and_below_transactional_id, request.v3_and_below_topics
    if not ctx.allowed("WRITE", "TRANSACTIONAL_ID", txn):
        code = ErrorCode.transactional_id_authorization_failed
        return Reply(_answer(ctx, [_result(ctx, t, code) for t in topics]))
    _, refused = split_by_acl(ctx, topics, "WRITE", "TOPIC")
    if refused:
        results = [
            _result(ctx, t, ErrorCode.topic_authorization_failed)
            if t in refused
            else _result(ctx, t, ErrorCode.operation_not_attempted)
            for t in topics
        ]
        return Reply(_answer(ctx, results))
    forwarded = replace(
        request,
        v3_and_below_transactional_id=ctx.namespace.fleet(txn),
        v3_and_below_topics=prefixed(ctx, topics),
    )

    def on_response(answer: Any) -> Any:
        results = tuple(stripped(ctx, answer.results_by_topic_v3_and_below))
        return replace(answer, results_by_topic_v3_and_below=results)

    return Forward(forwarded, on_response)


def _result(ctx: FilterContext, topic: Any, code: ErrorCode) -> Any:
    partitions = tuple(
        entity(
            ctx, "AddPartitionsToTxnPartitionResult", partition_index=p, partition_error_code=code
        )
        for p in topic.partitions
    )
    return entity(
        ctx, "AddPartitionsToTxnTopicResult", name=topic.name, results_by_partition=partitions
    )


def _answer(ctx: FilterContext, results: list[Any]) -> Any:
    return response(ctx, "AddPartitionsToTxnResponse", results_by_topic_v3_and_below=tuple(results))
