"""`pier_sdk`: the same SDK as `gateway.sdk` under a short name (see its docstring)."""

from gateway.sdk import (
    AsyncConsumer,
    AsyncPierClient,
    ConsumedRecord,
    Consumer,
    PierApiError,
    PierClient,
    ProducedRecord,
    kafka_config,
)

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
