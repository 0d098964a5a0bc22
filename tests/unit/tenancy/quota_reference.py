"""A deliberately plain reference of Kafka's quota precedence, written from Kafka's documented list and
independent of `tenancy.quota_chain`: the eight levels spelled out as ZooKeeper paths."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

from tenancy.domain import EffectiveQuota, QuotaEntity

NAMES = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
)


def _path(entity: QuotaEntity) -> str:
    def name(value: str) -> str:
        return value if value == "<default>" else quote(value, safe="")

    if entity.user is not None and entity.client_id is not None:
        return "/config/users/" + name(entity.user) + "/clients/" + name(entity.client_id)
    if entity.user is not None:
        return "/config/users/" + name(entity.user)
    assert entity.client_id is not None
    return "/config/clients/" + name(entity.client_id)


def reference_effective(
    configured: Mapping[QuotaEntity, Mapping[str, float]], user: str, client_id: str
) -> dict[str, EffectiveQuota]:
    by_path = {_path(entity): quotas for entity, quotas in configured.items()}
    u = user if user == "<default>" else quote(user, safe="")
    c = client_id if client_id == "<default>" else quote(client_id, safe="")
    levels = [
        f"/config/users/{u}/clients/{c}",
        f"/config/users/{u}/clients/<default>",
        f"/config/users/{u}",
        f"/config/users/<default>/clients/{c}",
        "/config/users/<default>/clients/<default>",
        "/config/users/<default>",
        f"/config/clients/{c}",
        "/config/clients/<default>",
    ]
    result = {}
    for quota in NAMES:
        result[quota] = EffectiveQuota(None, None)
        for level in levels:
            if quota in by_path.get(level, {}):
                result[quota] = EffectiveQuota(by_path[level][quota], level)
                break
    return result
