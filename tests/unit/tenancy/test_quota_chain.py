"""The quota precedence chain against a plain reference over random entity sets, plus paths and
validation of entities and values."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenancy.domain import DEFAULT_ENTITY, EffectiveQuota, QuotaEntity
from tenancy.errors import ValidationError
from tenancy.quota_chain import (
    QUOTA_NAMES,
    check_entity,
    check_lookup,
    check_quotas,
    entity_path,
    precedence,
    resolve,
    sanitize,
)
from tests.unit.tenancy.quota_reference import reference_effective

pytestmark = pytest.mark.unit
D = DEFAULT_ENTITY

names = st.sampled_from(["alice", "bob", "sa-1", "a b", "x/y", "*"])
users = st.one_of(st.none(), st.just(D), names)
clients = st.one_of(st.none(), st.just(D), names)
entities = st.builds(QuotaEntity, users, clients).filter(
    lambda e: e.user is not None or e.client_id is not None
)
quota_sets = st.dictionaries(
    st.sampled_from(QUOTA_NAMES), st.floats(0.5, 1e12, allow_nan=False), min_size=1
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(entities, quota_sets, max_size=16), names, names)
def test_resolution_matches_the_reference(
    configured: dict[QuotaEntity, dict[str, float]], user: str, client: str
) -> None:
    assert resolve(configured, user, client) == reference_effective(configured, user, client)


def test_precedence_order_is_kafkas() -> None:
    assert [entity_path(e) for e in precedence("U", "C")] == [
        "/config/users/U/clients/C",
        "/config/users/U/clients/<default>",
        "/config/users/U",
        "/config/users/<default>/clients/C",
        "/config/users/<default>/clients/<default>",
        "/config/users/<default>",
        "/config/clients/C",
        "/config/clients/<default>",
    ]


def test_every_level_wins_over_every_later_level() -> None:
    chain = precedence("U", "C")
    for first, second in itertools.combinations(range(8), 2):
        configured = {
            chain[first]: {"producer_byte_rate": 1.0},
            chain[second]: {"producer_byte_rate": 2.0},
        }
        assert resolve(configured, "U", "C")["producer_byte_rate"] == EffectiveQuota(
            1.0, entity_path(chain[first])
        )


def test_each_name_resolves_independently() -> None:
    configured = {
        QuotaEntity("U", None): {"producer_byte_rate": 10.0},
        QuotaEntity(None, D): {"producer_byte_rate": 1.0, "consumer_byte_rate": 2.0},
    }
    result = resolve(configured, "U", "C")
    assert result["producer_byte_rate"] == EffectiveQuota(10.0, "/config/users/U")
    assert result["consumer_byte_rate"] == EffectiveQuota(2.0, "/config/clients/<default>")
    assert result["request_percentage"] == EffectiveQuota(None, None)


def test_paths_sanitize_names_like_kafka() -> None:
    assert entity_path(QuotaEntity("a b", "x/y*~")) == "/config/users/a%20b/clients/x%2Fy%2A%7E"
    assert entity_path(QuotaEntity(None, D)) == "/config/clients/<default>"
    assert sanitize("user@example.com") == "user%40example.com"
    assert sanitize("é~._-") == "%C3%A9%7E._-"


def kafka_sanitize(name: str) -> str:
    """Kafka's `Sanitizer.sanitize` written from its definition: Java's `URLEncoder` over UTF-8
    (letters, digits and `.-*_` kept, space as `+`, every other byte `%XX`), then `*` -> `%2A`
    and `+` -> `%20`."""
    kept = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-*_")
    encoded = "".join(
        chr(byte) if chr(byte) in kept else "+" if byte == 0x20 else f"%{byte:02X}"
        for byte in name.encode("utf-8")
    )
    return encoded.replace("*", "%2A").replace("+", "%20")


@given(st.text(min_size=1, max_size=40).filter(lambda name: name != D))
@settings(max_examples=300, deadline=None)
def test_sanitize_is_kafkas_for_any_name(name: str) -> None:
    assert sanitize(name) == kafka_sanitize(name)


@pytest.mark.parametrize(
    "entity", [QuotaEntity(None, None), QuotaEntity("", None), QuotaEntity(None, "a\n"), "x"]
)
def test_bad_entities(entity: object) -> None:
    with pytest.raises(ValidationError):
        check_entity(entity)


def test_lookup_accepts_any_client_id_but_needs_a_user() -> None:
    check_lookup("sa-1", "")
    with pytest.raises(ValidationError):
        check_lookup("", "c")
    with pytest.raises(ValidationError):
        check_lookup("sa-1", None)


def test_quota_values_have_kafkas_types() -> None:
    checked = check_quotas(
        {"producer_byte_rate": 5, "consumer_byte_rate": 1048576.0, "request_percentage": 50}
    )
    assert checked == {
        "producer_byte_rate": 5,
        "consumer_byte_rate": 1048576,
        "request_percentage": 50.0,
    }
    assert [type(v) for v in checked.values()] == [int, int, float]
    assert check_quotas({"consumer_byte_rate": None}) == {"consumer_byte_rate": None}
    with pytest.raises(ValidationError, match="whole number of bytes per second"):
        check_quotas({"producer_byte_rate": 1.5})
    assert check_quotas({"controller_mutation_rate": 0.5}) == {"controller_mutation_rate": 0.5}
    bad: object
    for bad in (
        {},
        {"x": 1},
        {"request_percentage": float("nan")},
        {"request_percentage": 0.0},
        [],
    ):
        with pytest.raises(ValidationError):
            check_quotas(bad)
