"""What the sync and async SDK clients share: request bodies, answers, errors and retry timing.

Owns: `PierApiError` (an error answer: status, Confluent error code, message), the record types
(`ProducedRecord`, `ConsumedRecord`), embedding Python values in the API's formats (`bytes` →
BINARY, `str` → STRING, anything else → JSON), and `retry_delay_s` (how long to wait before
retrying a 429 or 503: its `Retry-After` seconds, else an exponential backoff, capped). Pure;
thread-safe.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

RETRY_STATUSES = frozenset({429, 503})
MAX_RETRY_WAIT_S = 30.0
V2_JSON = "application/vnd.kafka.v2+json"


class PierApiError(Exception):
    """The API answered an error: `status` (HTTP), `error_code` (Confluent's), `message`."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(f"{status} ({error_code}): {message}")
        self.status = status
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True, slots=True)
class ProducedRecord:
    topic: str
    partition: int
    offset: int
    timestamp: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    key: Any
    value: Any
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int | None = None


def embed(value: Any) -> dict[str, Any] | None:
    """A key or value in the API's embedded form."""
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        return {"type": "BINARY", "data": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, str):
        return {"type": "STRING", "data": value}
    return {"type": "JSON", "data": value}


def produce_body(
    value: Any,
    key: Any = None,
    partition: int | None = None,
    headers: dict[str, bytes | str | None] | list[tuple[str, bytes | str | None]] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if partition is not None:
        body["partition_id"] = partition
    if key is not None:
        body["key"] = embed(key)
    body["value"] = embed(value)
    pairs = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    if pairs:
        body["headers"] = [
            {
                "name": name,
                "value": None
                if data is None
                else base64.b64encode(data.encode() if isinstance(data, str) else data).decode(),
            }
            for name, data in pairs
        ]
    return body


def produced(answer: dict[str, Any]) -> ProducedRecord:
    code = int(answer.get("error_code", 200))
    if code != 200:
        status = code if code < 1000 else code // 100
        raise PierApiError(status, code, str(answer.get("message", "")))
    return ProducedRecord(
        str(answer["topic_name"]),
        int(answer["partition_id"]),
        int(answer["offset"]),
        answer.get("timestamp"),
    )


def consumed(record: dict[str, Any], fmt: str) -> ConsumedRecord:
    def decode(data: Any) -> Any:
        if data is None or fmt != "binary":
            return data
        return base64.b64decode(data)

    headers = [
        (str(h["name"]), None if h.get("value") is None else base64.b64decode(h["value"]))
        for h in record.get("headers") or []
    ]
    return ConsumedRecord(
        topic=str(record["topic"]),
        partition=int(record["partition"]),
        offset=int(record["offset"]),
        key=decode(record.get("key")),
        value=decode(record.get("value")),
        headers=headers,
        timestamp=record.get("timestamp"),
    )


def error_of(status: int, body: bytes) -> PierApiError:
    try:
        parsed = json.loads(body)
        return PierApiError(
            status, int(parsed.get("error_code", status)), str(parsed.get("message", ""))
        )
    except (ValueError, AttributeError, TypeError):
        return PierApiError(status, status, body[:200].decode(errors="replace"))


def retry_delay_s(retry_after: str | None, attempt: int) -> float:
    """Seconds to wait before retry `attempt` (1-based) of a 429/503: `Retry-After` if given."""
    if retry_after is not None:
        try:
            return min(MAX_RETRY_WAIT_S, max(0.0, float(retry_after)))
        except ValueError:
            pass
    backoff: float = 0.2 * 2 ** (attempt - 1)
    return min(MAX_RETRY_WAIT_S, backoff)


def partitions_body(partitions: list[tuple[str, int]]) -> dict[str, Any]:
    return {"partitions": [{"topic": t, "partition": p} for t, p in partitions]}


def offsets_body(offsets: dict[tuple[str, int], int]) -> dict[str, Any]:
    return {"offsets": [{"topic": t, "partition": p, "offset": o} for (t, p), o in offsets.items()]}
