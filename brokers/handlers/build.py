"""Building version-specific kio responses from one handler.

Owns: `response_module` (the kio module of a response version) and `make` (construct one of its
classes from keyword fields, dropping the ones that version does not have). Handlers write the
newest field set once and serve every version. Pure; thread-safe (caches fill idempotently).
"""

from __future__ import annotations

import dataclasses
import datetime
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

NO_THROTTLE = datetime.timedelta(0)


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    return load_payload_module(api_key, version, EntityType.response)


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def make(module: ModuleType, name: str, /, **fields: Any) -> Any:
    cls = getattr(module, name)
    names = _field_names(cls)
    return cls(**{k: v for k, v in fields.items() if k in names})


def throttle(ms: int = 0) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms) if ms else NO_THROTTLE


def timestamp_or_none(ms: int) -> datetime.datetime | None:
    """kio's TZAware fields: -1 (no timestamp) is None."""
    if ms < 0:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
