"""Error codes shared by the transaction handlers (InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn).

Owns: `for_version` — PRODUCER_FENCED (KIP-588) only exists from a version of each API on; older
requests get INVALID_PRODUCER_EPOCH, as Kafka's KafkaApis answers them, so old clients keep their
fencing logic. Pure; thread-safe.
"""

from __future__ import annotations

from brokers.wire.errors import ErrorCode


def for_version(error: ErrorCode, version: int, fenced_since: int) -> ErrorCode:
    if error == ErrorCode.producer_fenced and version < fenced_since:
        return ErrorCode.invalid_producer_epoch
    return error
