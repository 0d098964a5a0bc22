"""A streamed chunk of plain records read as columns: the fast path of `ProduceStream`.

Owns: `columns`, which reads the records a chunk completed (`bodies.json_chunks`: orjson's dicts)
as columns when every one of them is what a streaming producer sends — `{"value": {"type": T,
"data": text}}` with at most a `partition_id`, every value of one type T, BINARY or STRING — with
C-level passes over the chunk (`map`, `set().union`, comprehensions): no `ProduceRecord`,
`Embedded` or `Prepared` object per record, and the values decoded by one `map` of strict base64
(`binascii.a2b_base64(strict_mode=True)`, as `records.embedded`) or UTF-8. Anything else — a key,
headers, a timestamp, a JSON value, a null, a field it does not know, a bad partition id or bad
base64 — is None: the record-by-record path (`records.produce_record`) then reads the chunk and
answers exactly as it always did, so the fast path never decides a refusal. Pure; thread-safe.
"""

from __future__ import annotations

import binascii
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

RECORD_FIELDS = frozenset({"partition_id", "value"})
VALUE_FIELDS = frozenset({"type", "data"})
_STRICT_BASE64 = functools.partial(binascii.a2b_base64, strict_mode=True)
_DECODERS: dict[str, Callable[[str], bytes]] = {"BINARY": _STRICT_BASE64, "STRING": str.encode}
_PARTITION_TYPES = frozenset({int, type(None)})


@dataclass(frozen=True, slots=True)
class Columns:
    partitions: list[int | None]  # each record's partition_id (None: the partitioner picks)
    values: list[bytes]
    kind: str  # the type every value has: BINARY or STRING


def columns(records: list[Any]) -> Columns | None:
    """The records as columns, or None when any of them is not a plain record (see above)."""
    if not records or set(map(type, records)) != {dict}:
        return None
    if not RECORD_FIELDS.issuperset(set().union(*records)):
        return None
    embedded = [record.get("value") for record in records]
    if set(map(type, embedded)) != {dict} or not VALUE_FIELDS.issuperset(set().union(*embedded)):
        return None
    kinds = {value.get("type") for value in embedded}
    kind = kinds.pop() if len(kinds) == 1 else None
    decode = _DECODERS.get(kind) if isinstance(kind, str) else None
    data = [value.get("data") for value in embedded]
    if decode is None or set(map(type, data)) != {str}:
        return None
    partitions = [record.get("partition_id") for record in records]
    if not _PARTITION_TYPES.issuperset(set(map(type, partitions))):
        return None  # a bool, a float, a string: the record path says what is wrong
    if min((p for p in partitions if p is not None), default=0) < 0:
        return None
    try:
        values = list(map(decode, data))
    except (binascii.Error, ValueError):  # bad base64, a lone surrogate: the record path says
        return None
    assert kind is not None
    return Columns(partitions, values, kind)
