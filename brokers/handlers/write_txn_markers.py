"""WriteTxnMarkers (key 27, v1–2): a transaction coordinator's COMMIT/ABORT markers, written here.

Owns: decoding the request into `MarkerRequest`s and answering per marker, topic and partition.
An inter-broker API (Kafka authorises it as CLUSTER_ACTION; the gateway never forwards it): the
markers are appended on the partitions this broker leads and each answer waits until the high
watermark passes its marker (acks=all, up to `request.timeout.ms`), all markers of a request at
once — `brokers.replication.txn_markers.write_markers_locally` does the work. Errors per
partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, INVALID_PRODUCER_EPOCH,
TRANSACTION_COORDINATOR_FENCED, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), KAFKA_STORAGE_ERROR,
REQUEST_TIMED_OUT. A committed marker on a `__consumer_offsets` partition is reported to the
group coordinator (`on_offsets_marker`), which then materialises or drops the producer's
pending transactional offsets. v0 is not served: Kafka 4 removed it (KIP-896) and kio has no
schema for it. v2 (KIP-890 part 2, Kafka 4.2) carries each marker's transaction version: a
version 2 marker's producer epoch must be strictly above the producer's at the leader
(INVALID_PRODUCER_EPOCH otherwise: a late or duplicate marker), as Kafka 4.2 checks it. Pier's
own coordinator sends v1 (brokers/replication/marker_brokers.py), markers at least the
producer's epoch, for both transaction versions.
Runs on the event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from brokers.common.clock import Clock
from brokers.handlers.build import by_topic, make, response_module
from brokers.handlers.errors import error_code_for
from brokers.handlers.services import AppendWaiter, Replicas
from brokers.replication.txn_markers import (
    DEFAULT_MARKER_TIMEOUT_S,
    MarkerErrors,
    MarkerRequest,
    TxnCompletion,
    write_markers_locally,
)
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 27
MIN_VERSION, MAX_VERSION = 1, 2


def _no_offsets_completion(offsets_partition: int, producer_id: int, commit: bool) -> None:
    """Without a group coordinator there are no pending transactional offsets to complete."""


def route(
    replicas: Replicas,
    purgatory: AppendWaiter,
    clock: Clock,
    *,
    on_offsets_marker: TxnCompletion | None = None,
    timeout_s: float = DEFAULT_MARKER_TIMEOUT_S,
) -> Route:
    completion = on_offsets_marker or _no_offsets_completion

    async def write(marker: MarkerRequest) -> MarkerErrors:
        return await write_markers_locally(
            replicas,
            purgatory,
            marker,
            on_offsets_marker=completion,
            timeout_s=timeout_s,
            clock=clock,
            error_code_for=error_code_for,
        )

    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        markers = [_marker(entry) for entry in request.markers]
        outcomes = await asyncio.gather(*(write(marker) for marker in markers))
        results = tuple(
            _result(module, marker, outcome)
            for marker, outcome in zip(markers, outcomes, strict=True)
        )
        return make(module, "WriteTxnMarkersResponse", markers=results)

    return Route(API_KEY, MIN_VERSION, MAX_VERSION, handle, name="WriteTxnMarkers")


def _marker(entry: Any) -> MarkerRequest:
    return MarkerRequest(
        producer_id=entry.producer_id,
        producer_epoch=entry.producer_epoch,
        commit=entry.transaction_result,
        coordinator_epoch=entry.coordinator_epoch,
        partitions=tuple(
            (topic.name, index) for topic in entry.topics for index in topic.partition_indexes
        ),
        transaction_version=int(getattr(entry, "transaction_version", 0)),
    )


def _result(module: Any, marker: MarkerRequest, outcome: MarkerErrors) -> Any:
    def partition(index: int, code: ErrorCode) -> Any:
        return make(
            module, "WritableTxnMarkerPartitionResult", partition_index=index, error_code=code
        )

    topics = tuple(
        make(module, "WritableTxnMarkerTopicResult", name=name, partitions=parts)
        for name, parts in by_topic(outcome.items(), partition)
    )
    return make(module, "WritableTxnMarkerResult", producer_id=marker.producer_id, topics=topics)
