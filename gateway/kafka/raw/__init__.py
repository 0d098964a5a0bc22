"""Produce requests and Fetch responses renamed on raw bytes: the gateway's hot path.

A Produce request and a Fetch response carry megabytes of record batches, so the gateway never
decodes them with kio: it walks the frame with a bounds-checked `Reader`, and emits the rewritten
message as buffer parts — small new bytes for renamed fields, views of the original buffer for
the record sets — for `transport.writelines` (docs/gateway.md, "A request's way").
The cost per message grows with the number of topics and partitions, never with record bytes.
Pure; thread-safe.
"""

from brokers.wire.produce_request import (
    ProducePartition,
    ProduceRequestView,
    ProduceTopic,
    parse_produce_request,
)
from brokers.wire.raw_reader import Parts, Reader
from gateway.kafka.raw.fetch_response import (
    FetchRewrite,
    fetch_records_bytes,
    rewrite_fetch_response,
)
from gateway.kafka.raw.produce_request import build_produce_request

__all__ = [
    "FetchRewrite",
    "Parts",
    "ProducePartition",
    "ProduceRequestView",
    "ProduceTopic",
    "Reader",
    "build_produce_request",
    "fetch_records_bytes",
    "parse_produce_request",
    "rewrite_fetch_response",
]
