"""The partition leader's side of KIP-890 part 1: asking the transaction coordinator whether
partitions are in a producer's ongoing transaction (Kafka's AddPartitionsToTxnManager).

Owns: `TxnVerification`, the produce handler's `TxnVerifier`. The coordinator of a transactional
id is the leader of its `__transaction_state` partition: this broker (always, standalone) → a
direct `TransactionCoordinator.add_partitions(..., verify_only=True)`; another broker (per the
metadata cache) → AddPartitionsToTxn v4 with `verify_only` over `BrokerConnections` (one reused
connection per broker, shared code with the marker channel). No
leader known → COORDINATOR_NOT_AVAILABLE; an unreachable broker → NETWORK_EXCEPTION (the produce
handler turns both into the retriable NOT_ENOUGH_REPLICAS, as Kafka does). Calls are not batched
across requests (Kafka's manager batches per coordinator; one request per produce is enough here).
`add=True` (Produce v12+ of a `transaction.version` 2 producer, KIP-890 part 2) asks the
coordinator to add the partitions instead (AddPartitionsToTxn v5 without `verify_only`).
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from brokers.client.config import ClientConfig
from brokers.client.errors import ClientError
from brokers.client.messages import make, request_module
from brokers.coordinator.transactions import TRANSACTION_STATE_TOPIC
from brokers.coordinator.transactions.coordinator import TransactionCoordinator
from brokers.coordinator.transactions.metadata import TV_2
from brokers.replication.broker_connections import BrokerConnections
from brokers.replication.metadata_cache import MetadataCache
from brokers.wire.errors import ErrorCode

log = logging.getLogger("pier.transactions")
ADD_PARTITIONS_TO_TXN = 24
VERIFY_VERSION = 4  # the first version with verify_only; inter-broker only
ADD_VERSION = 5  # a leader adding partitions for a TV2 producer (TRANSACTION_ABORTABLE known)
CLIENT_CONFIG = ClientConfig(client_id="pier-txn-verification", request_timeout_s=30.0)
TopicPartition = tuple[str, int]


class TxnVerification:
    """`TxnVerifier`: the coordinator's verify-only answer per partition."""

    def __init__(
        self,
        coordinator: TransactionCoordinator,
        metadata: MetadataCache,
        *,
        node_id: int,
        zookeeper_mode: bool,
        config: ClientConfig = CLIENT_CONFIG,
    ) -> None:
        self._coordinator = coordinator
        self._metadata = metadata
        self._node_id = node_id
        self._zookeeper_mode = zookeeper_mode
        self._connections = BrokerConnections(metadata, config)

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        *,
        add: bool = False,
    ) -> dict[TopicPartition, ErrorCode]:
        leader = self._coordinator_node(transactional_id)
        if leader == self._node_id:
            return await self._coordinator.add_partitions(
                transactional_id,
                producer_id,
                producer_epoch,
                partitions,
                verify_only=not add,
                client_version=TV_2 if add else 0,
            )
        if leader is None:
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        try:
            return await self._remote(
                leader, transactional_id, producer_id, producer_epoch, partitions, add
            )
        except ClientError as exc:  # unreachable, timed out, or an answer we cannot read
            log.warning("event=txn_verify_failed broker=%d error=%s", leader, exc)
            return dict.fromkeys(partitions, ErrorCode.network_exception)

    def _coordinator_node(self, transactional_id: str) -> int | None:
        if not self._zookeeper_mode:
            return self._node_id
        index = self._coordinator.partition_for(transactional_id)
        meta = self._metadata.partition(TRANSACTION_STATE_TOPIC, index)
        if meta is None or meta.leader < 0:
            return None
        return meta.leader

    async def _remote(
        self,
        broker_id: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        add: bool,
    ) -> dict[TopicPartition, ErrorCode]:
        request = _request(transactional_id, producer_id, producer_epoch, partitions, add)
        response = await self._connections.send(broker_id, request)
        return _answers(response, transactional_id, partitions)

    async def close(self) -> None:
        await self._connections.close()


def _request(
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Sequence[TopicPartition],
    add: bool,
) -> Any:
    module = request_module(ADD_PARTITIONS_TO_TXN, ADD_VERSION if add else VERIFY_VERSION)
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    txn = make(
        module,
        "AddPartitionsToTxnTransaction",
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        verify_only=not add,
        topics=tuple(
            make(module, "AddPartitionsToTxnTopic", name=name, partitions=tuple(indexes))
            for name, indexes in by_topic.items()
        ),
    )
    return make(module, "AddPartitionsToTxnRequest", transactions=(txn,))


def _answers(
    response: Any, transactional_id: str, partitions: Sequence[TopicPartition]
) -> dict[TopicPartition, ErrorCode]:
    """Per-partition codes; a top-level error (or a partition missing) applies to the rest."""
    top = ErrorCode(response.error_code)
    missing = top if top != ErrorCode.none else ErrorCode.unknown_server_error
    out: dict[TopicPartition, ErrorCode] = dict.fromkeys(partitions, missing)
    for result in response.results_by_transaction:
        if result.transactional_id != transactional_id:
            continue
        for topic in result.topic_results:
            for p in topic.results_by_partition:
                tp = (topic.name, p.partition_index)
                if tp in out:
                    out[tp] = ErrorCode(p.partition_error_code)
    return out
