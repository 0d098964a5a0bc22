"""Pier's Python SDK for tenants: the tenant HTTP API as typed clients, and ready Kafka settings.

- `PierClient` (sync, standard library) and `AsyncPierClient` (asyncio, aiohttp): topics and
  configs, produce (bytes → BINARY, str → STRING, other values → JSON), v2 consumer instances
  (`consumer(group)` → subscribe/assign, poll, commit, close), group lag; 429 and 503 answers are
  retried after their `Retry-After`; errors raise `PierApiError` (status, Confluent error code,
  message).
- `kafka_config(endpoint, key, secret, client=...)`: SASL settings for confluent-kafka,
  kafka-python, aiokafka, or Java properties text.

Also importable as `pier_sdk`. Example::

    from gateway.sdk import PierClient, kafka_config

    with PierClient("http://localhost:8082", "KEYID", "SECRET") as pier:
        print(pier.produce("orders", {"id": 1}).offset)
"""

from gateway.sdk._core import ConsumedRecord, PierApiError, ProducedRecord
from gateway.sdk.aio import AsyncConsumer, AsyncPierClient
from gateway.sdk.client import Consumer, PierClient
from gateway.sdk.kafka_config import kafka_config

__all__ = [
    "AsyncConsumer",
    "AsyncPierClient",
    "ConsumedRecord",
    "Consumer",
    "PierApiError",
    "PierClient",
    "ProducedRecord",
    "kafka_config",
]
