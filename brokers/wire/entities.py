"""kio message classes by (api key, version), and building them across versions.

Owns: `request_module` / `response_module` (the kio module of one message version) and `make`
(instantiate one of its classes from keyword fields, dropping the fields that version lacks), so
servers and clients write the newest field set once and serve every version. Pure; thread-safe
(caches fill idempotently).
"""

from __future__ import annotations

import dataclasses
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType


@cache
def request_module(api_key: int, version: int) -> ModuleType:
    return load_payload_module(api_key, version, EntityType.request)


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    return load_payload_module(api_key, version, EntityType.response)


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def make(module: ModuleType, name: str, /, **fields: Any) -> Any:
    """Instantiate `module.name` with the keyword fields that class has; others are dropped."""
    cls = getattr(module, name)
    names = _field_names(cls)
    return cls(**{k: v for k, v in fields.items() if k in names})


def has_field(module: ModuleType, name: str, field: str) -> bool:
    return field in _field_names(getattr(module, name))
