"""Kafka's client-quota entities and the precedence chain that picks the quota for a connection.

For a (user, client-id) pair, each quota name is resolved independently from the most specific
configured entity (Kafka's ZooKeeper-mode quota precedence; docs/gateway-options.md):
  1 /config/users/U/clients/C          5 /config/users/<default>/clients/<default>
  2 /config/users/U/clients/<default>  6 /config/users/<default>
  3 /config/users/U                    7 /config/clients/C
  4 /config/users/<default>/clients/C  8 /config/clients/<default>
Pure functions over plain mappings (no database): the store loads the candidate entities and asks
`resolve`; the gateway can use it on a cached copy. Safe from any thread.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from urllib.parse import quote

from tenancy.domain import DEFAULT_ENTITY, EffectiveQuota, QuotaEntity
from tenancy.errors import ValidationError

QUOTA_NAMES = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
)
BYTE_RATE_QUOTAS = ("producer_byte_rate", "consumer_byte_rate")  # Kafka: LONG, bytes/s
MAX_ENTITY_NAME = 255
MAX_BYTE_RATE = 2**63 - 1  # Java's Long.MAX_VALUE


def precedence(user: str, client_id: str) -> list[QuotaEntity]:
    """The eight candidate entities for (user, client_id), most specific first."""
    d = DEFAULT_ENTITY
    return [
        QuotaEntity(user, client_id),
        QuotaEntity(user, d),
        QuotaEntity(user, None),
        QuotaEntity(d, client_id),
        QuotaEntity(d, d),
        QuotaEntity(d, None),
        QuotaEntity(None, client_id),
        QuotaEntity(None, d),
    ]


def sanitize(name: str) -> str:
    """A name as Kafka writes it in a ZooKeeper path (`Sanitizer.sanitize`): Java's URLEncoder
    over UTF-8, which leaves only letters, digits and `.-_*` alone, then `*` as `%2A` and the
    space as `%20`. Python's `quote(name, safe="")` differs only in leaving `~` alone, so `~` is
    `%7E` here too. `<default>` is written as is."""
    if name == DEFAULT_ENTITY:
        return name
    return quote(name, safe="").replace("~", "%7E")


def entity_path(entity: QuotaEntity) -> str:
    """Kafka's ZooKeeper-style config path of an entity, e.g. `/config/users/U/clients/<default>`."""
    if entity.user is None:
        return f"/config/clients/{sanitize(entity.client_id or '')}"
    if entity.client_id is None:
        return f"/config/users/{sanitize(entity.user)}"
    return f"/config/users/{sanitize(entity.user)}/clients/{sanitize(entity.client_id)}"


def resolve(
    configured: Mapping[QuotaEntity, Mapping[str, float]], user: str, client_id: str
) -> dict[str, EffectiveQuota]:
    """Each quota name's value and source path from the first candidate that sets it."""
    chain = precedence(user, client_id)
    result: dict[str, EffectiveQuota] = {}
    for name in QUOTA_NAMES:
        result[name] = EffectiveQuota(None, None)
        for entity in chain:
            value = configured.get(entity, {}).get(name)
            if value is not None:
                result[name] = EffectiveQuota(value, entity_path(entity))
                break
    return result


def _check_name(field: str, value: object) -> None:
    if not isinstance(value, str) or not value or len(value) > MAX_ENTITY_NAME:
        raise ValidationError(field, f"must be a non-empty string of at most {MAX_ENTITY_NAME}")
    if not value.isprintable():
        raise ValidationError(field, "must not contain control characters")


def check_entity(entity: object) -> QuotaEntity:
    """Syntax of an entity: at least one part; each part a name or `<default>`."""
    if not isinstance(entity, QuotaEntity):
        raise ValidationError("entity", "must be a QuotaEntity")
    if entity.user is None and entity.client_id is None:
        raise ValidationError("entity", "needs a user, a client_id, or both")
    if entity.user is not None:
        _check_name("entity.user", entity.user)
    if entity.client_id is not None:
        _check_name("entity.client_id", entity.client_id)
    return entity


def check_lookup(user: object, client_id: object) -> None:
    """An effective-quota lookup: a user and any client id a client may send (even empty)."""
    if not isinstance(user, str) or not user:
        raise ValidationError("user", "must be a non-empty string")
    if not isinstance(client_id, str):
        raise ValidationError("client_id", "must be a string")
    for field, value in (("user", user), ("client_id", client_id)):
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
            raise ValidationError(field, "must not contain control characters")


def check_quota_value(name: str, value: object, field: str) -> float:
    """One quota's value in Kafka's type: the byte rates are whole bytes/s (Kafka's LONG), at
    least 1; `request_percentage` and `controller_mutation_rate` positive finite numbers
    (Kafka's DOUBLE). A whole float (1048576.0) is taken as the integer it is."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(field, "must be a number or null")
    if not math.isfinite(value) or value <= 0:
        raise ValidationError(field, "must be a positive finite number")
    if name in BYTE_RATE_QUOTAS:
        if value != int(value):
            raise ValidationError(
                field, f"must be a whole number of bytes per second (Kafka's {name} is a long)"
            )
        if value > MAX_BYTE_RATE:
            raise ValidationError(field, f"must be at most {MAX_BYTE_RATE}")
        return int(value)
    return float(value)


def check_quotas(quotas: object, field: str = "quotas") -> dict[str, float | None]:
    """Known names only; values in Kafka's types (`check_quota_value`), or None (= remove)."""
    if not isinstance(quotas, Mapping) or not quotas:
        raise ValidationError(field, "must name at least one quota")
    checked: dict[str, float | None] = {}
    for name, value in quotas.items():
        if name not in QUOTA_NAMES:
            raise ValidationError(
                f"{field}.{name}", f"unknown quota; the quotas are {', '.join(QUOTA_NAMES)}"
            )
        checked[name] = None if value is None else check_quota_value(name, value, f"{field}.{name}")
    return checked


def stored_value(name: str, value: float) -> float:
    """A stored quota as Kafka types it: byte rates as integers, the others as floats."""
    return int(value) if name in BYTE_RATE_QUOTAS else float(value)
