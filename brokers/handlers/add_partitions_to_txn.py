"""AddPartitionsToTxn (key 24, v0–5): add partitions to a producer's ongoing transaction.

v0–3 come from clients: one transaction, a code per partition. v4–5 come from partition leaders
(KIP-890 part 1): a batch of transactions, each possibly `verify_only` (is the partition already
in the transaction? NONE or TRANSACTION_ABORTABLE); one without `verify_only` is a leader adding
the partitions for a `transaction.version` 2 producer (KIP-890 part 2, Produce v12+), which
sends none itself. Partitions of topics the cluster does not
have fail the whole transaction's request: UNKNOWN_TOPIC_OR_PARTITION for them,
OPERATION_NOT_ATTEMPTED for the others (Kafka's KafkaApis). PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v2. Runs on the event loop.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from brokers.coordinator.transactions.metadata import TV_2
from brokers.handlers.build import by_topic, make, response_module, throttle
from brokers.handlers.services import TransactionService
from brokers.handlers.txn_codes import for_version
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 24
FENCED_SINCE = 2
FIRST_BATCHED_VERSION = 4
Results = dict[tuple[str, int], ErrorCode]


def route(transactions: TransactionService) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        version = ctx.api_version
        if version < FIRST_BATCHED_VERSION:
            results = await transactions.coordinator.add_partitions(
                request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                _partitions(request.v3_and_below_topics),
            )
            return make(
                module,
                "AddPartitionsToTxnResponse",
                throttle_time=throttle(),
                results_by_topic_v3_and_below=_topic_results(module, results, version),
            )
        answers = []
        for txn in request.transactions:
            results = await transactions.coordinator.add_partitions(
                txn.transactional_id,
                txn.producer_id,
                txn.producer_epoch,
                _partitions(txn.topics),
                verify_only=txn.verify_only,
                client_version=0 if txn.verify_only else TV_2,
            )
            answers.append(
                make(
                    module,
                    "AddPartitionsToTxnResult",
                    transactional_id=txn.transactional_id,
                    topic_results=_topic_results(module, results, version),
                )
            )
        return make(
            module,
            "AddPartitionsToTxnResponse",
            throttle_time=throttle(),
            error_code=ErrorCode.none,
            results_by_transaction=tuple(answers),
        )

    return Route(API_KEY, 0, 5, handle, name="AddPartitionsToTxn")


def _partitions(topics: Any) -> list[tuple[str, int]]:
    return [(topic.name, index) for topic in topics for index in topic.partitions]


def _topic_results(module: ModuleType, results: Results, version: int) -> tuple[Any, ...]:
    def partition(index: int, error: ErrorCode) -> Any:
        return make(
            module,
            "AddPartitionsToTxnPartitionResult",
            partition_index=index,
            partition_error_code=for_version(error, version, FENCED_SINCE),
        )

    return tuple(
        make(module, "AddPartitionsToTxnTopicResult", name=topic, results_by_partition=parts)
        for topic, parts in by_topic(results.items(), partition)
    )
