"""The answer to a request whose handler failed: the API's own response, every entry in error.

Owns: `error_response(request, response_class, code, message)`, Kafka's `AbstractRequest.
getErrorResponse` for any kio message: the response carries `code` at the top level when it has
an `error_code`, and every entry that has one (topic, partition, group, resource, coordinator
key) — one per entry of the request, named as the request named it. Lists are mirrored from the
request by field name, else pairing the one list of each side left over (Produce `topic_data` →
`responses`, DeleteGroups `groups_names` → `results`); a list whose entries carry no error code
(brokers, record errors, aborted transactions) is left empty, and one whose entries would name
nothing (DescribeLogDirs results) too. Every other field gets its kio default, else the value
Kafka uses for "none" (-1, "", null, 0 ms). Pure; thread-safe (the per-class analysis is cached).
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from collections.abc import Sequence
from enum import Enum
from functools import cache
from typing import Any

from brokers.wire.errors import ErrorCode

# Fields naming an entry, by what they name: copied from the request entry that named it.
_KEY_GROUPS = (
    ("name", "topic", "topic_name"),
    ("partition_index", "index", "partition"),
    ("topic_id",),
    ("group_id",),
    ("member_id",),
    ("group_instance_id",),
    ("key",),
    ("resource_type",),
    ("resource_name",),
)
_SYNONYMS = {name: group for group in _KEY_GROUPS for name in group}


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    base: Any  # the type without `| None`
    nullable: bool
    item: Any  # tuple[item, ...]: the item type, else None
    has_default: bool


def error_response(request: Any, response_class: type, code: ErrorCode, message: str) -> Any:
    """`response_class` answering `request` with `code` everywhere the response has room."""
    return _build(response_class, request, code, message)


def _build(cls: type, source: Any, code: ErrorCode, message: str) -> Any:
    values: dict[str, Any] = {}
    pending_lists: list[_Field] = []
    mirrored_from: set[str] = set()
    source_type: type = type(source)
    source_fields = _fields(source_type) if _is_entity(source) else {}
    for field in _fields(cls).values():
        if field.base is ErrorCode:
            values[field.name] = code
        elif field.name == "error_message" and field.base is str:
            values[field.name] = message
        elif field.item is not None:
            match = source_fields.get(field.name)
            if match is not None and match.item is not None and _carries_errors(field.item):
                values[field.name] = _mirror(field.item, getattr(source, match.name), code, message)
                mirrored_from.add(match.name)
            else:
                pending_lists.append(field)
        elif field.name in _SYNONYMS and _copy_key(field, source, source_fields, values):
            continue
        elif not field.has_default:
            values[field.name] = _none_value(field, code, message)
    leftovers = [
        f for f in source_fields.values() if f.item is not None and f.name not in mirrored_from
    ]
    for field in pending_lists:
        if len(pending_lists) == 1 and leftovers and _carries_errors(field.item):
            entries = _mirror(field.item, getattr(source, leftovers[0].name), code, message)
            if all(_names_something(e, field.item) for e in entries):
                values[field.name] = entries
                continue
        if not field.has_default:
            values[field.name] = None if field.nullable else ()
    return cls(**values)


def _mirror(item: Any, entries: Sequence[Any] | None, code: ErrorCode, message: str) -> Any:
    """One response entry per request entry (an entity, or a bare name/index)."""
    if not _is_entity_type(item):
        return ()
    return tuple(_build(item, entry, code, message) for entry in entries or ())


def _copy_key(
    field: _Field, source: Any, source_fields: dict[str, _Field], values: dict[str, Any]
) -> bool:
    """Copy the entry's name/index from the request entry (or from a bare name in a list)."""
    if source is None:
        return False
    if not _is_entity(source):
        base = field.base
        for kind in (str, int):
            if isinstance(source, kind) and isinstance(base, type) and issubclass(base, kind):
                values[field.name] = source
                return True
        return False
    for synonym in _SYNONYMS[field.name]:
        if synonym in source_fields:
            values[field.name] = getattr(source, synonym)
            return True
    return False


def _names_something(entry: Any, item: type) -> bool:
    return any(
        name in _SYNONYMS and getattr(entry, name) not in (None, "", -1) for name in _fields(item)
    )


def _none_value(field: _Field, code: ErrorCode, message: str) -> Any:
    base = field.base
    if field.nullable:
        return None
    if _is_entity_type(base):
        return _build(base, None, code, message)
    if isinstance(base, type):
        if issubclass(base, bool):
            return False
        if issubclass(base, Enum):
            return next(iter(base))
        if issubclass(base, int):
            return 0 if base.__name__.startswith("u") else -1
        if issubclass(base, float):
            return 0.0
        if issubclass(base, str):
            return ""
        if issubclass(base, bytes):
            return b""
        if issubclass(base, datetime.timedelta):
            return datetime.timedelta(0)
        if issubclass(base, datetime.datetime):
            return datetime.datetime.fromtimestamp(0, tz=datetime.UTC)
        if issubclass(base, uuid.UUID):
            return uuid.UUID(int=0)
    raise TypeError(f"no error value for field {field.name}: {base!r}")


@cache
def _carries_errors(item: Any) -> bool:
    """Whether entries of this type (or entries nested in them) have an error code."""
    if not _is_entity_type(item):
        return True  # a bare name list becomes entries of the response's own type
    for field in _fields(item).values():
        if field.base is ErrorCode or (field.item is not None and _is_entity_type(field.item)
                                       and _carries_errors(field.item)):  # fmt: skip
            return True
    return False


@cache
def _fields(cls: type) -> dict[str, _Field]:
    hints = typing.get_type_hints(cls)
    fields = {}
    for field in dataclasses.fields(cls):
        base, nullable = _strip_none(hints[field.name])
        item = None
        if typing.get_origin(base) is tuple:
            item = typing.get_args(base)[0]
        has_default = (
            field.default is not dataclasses.MISSING
            or field.default_factory is not dataclasses.MISSING
        )
        fields[field.name] = _Field(field.name, base, nullable, item, has_default)
    return fields


def _strip_none(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return hint, False


def _is_entity(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _is_entity_type(value: Any) -> bool:
    return isinstance(value, type) and dataclasses.is_dataclass(value)
