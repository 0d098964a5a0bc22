"""The admin API's parts on their own: document ↔ routes, validator, problem mapping, replay cache,
token cache, timestamps, and the chunked-body limit."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web

from tenancy import errors as store_errors
from tenancy.api import create_app
from tenancy.api.auth import VerifiedTokens, bearer_token
from tenancy.api.errors import (
    IdempotencyInFlightError,
    IdempotencyMismatchError,
    RequestValidationError,
    UnauthorizedError,
)
from tenancy.api.idempotency import ReplayCache
from tenancy.api.openapi import document, public_paths
from tenancy.api.problems import problem_for
from tenancy.api.responses import iso, parse_time
from tenancy.api.validation import RequestValidator, coerce_parameters, validate_body
from tests.unit.tenancy_api.fake_store import FakeStore
from tests.unit.tenancy_api.harness import ServedApi

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2024, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_every_route_is_documented_and_every_path_served() -> None:
    app = create_app(FakeStore())  # type: ignore[arg-type]
    served = {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.method != "HEAD" and route.resource is not None
    }
    described = {
        (method.upper(), path) for path, item in document()["paths"].items() for method in item
    }
    assert served == described


def test_document_references_resolve_and_ids_are_unique() -> None:
    doc = document()
    text = json.dumps(doc)
    for kind in ("schemas", "parameters", "responses"):
        for name in doc["components"][kind]:
            assert f'"#/components/{kind}/{name}"' in text or kind == "schemas"
    ops = [op["operationId"] for item in doc["paths"].values() for op in item.values()]
    assert len(ops) == len(set(ops))
    assert public_paths() == {"/healthz", "/metrics", "/openapi.json"}
    RequestValidator(doc)  # every $ref resolves when the validators are built


def test_validator_coerces_and_reports_every_bad_parameter() -> None:
    validator = RequestValidator(document())
    listing = validator.operation("GET", "/v1/tenants")
    assert listing is not None
    values = coerce_parameters(listing, {}, {"limit": "25", "status": "active"}, {})
    assert values == {"limit": 25, "status": "active"}
    with pytest.raises(RequestValidationError) as caught:
        coerce_parameters(listing, {}, {"limit": "2000", "status": "gone"}, {})
    assert {p.field for p in caught.value.problems} == {"query.limit", "query.status"}


def test_validator_names_nested_and_missing_body_fields() -> None:
    operation = RequestValidator(document()).operation("PUT", "/v1/plans/{name}")
    assert operation is not None
    with pytest.raises(RequestValidationError) as caught:
        validate_body(
            operation, {"dimensions": {"ingress_gib": {"included": "1.5", "tiers": [{}]}}}
        )
    fields = {p.field for p in caught.value.problems}
    assert "body.currency" in fields
    assert "body.dimensions.ingress_gib.tiers.0.up_to" in fields
    validate_body(operation, {"currency": "EUR", "dimensions": {}})


def test_problem_mapping_of_store_errors() -> None:
    cases = {
        store_errors.NotFoundError("x"): 404,
        store_errors.ConflictError("x"): 409,
        store_errors.ForbiddenError("x"): 403,
        store_errors.ValidationError("limits.max_connections", "must be positive"): 400,
        store_errors.TenancyError("x"): 400,
        UnauthorizedError("x"): 401,
        IdempotencyMismatchError("x"): 422,
        IdempotencyInFlightError("x"): 409,
        RuntimeError("secret detail"): 500,
    }
    for exc, status in cases.items():
        assert problem_for(exc).status == status
    invalid = problem_for(
        store_errors.ValidationError("limits.max_connections", "must be positive")
    )
    assert invalid.errors == [{"field": "limits.max_connections", "message": "must be positive"}]
    assert "secret" not in problem_for(RuntimeError("secret detail")).detail
    assert problem_for(UnauthorizedError("x")).headers["WWW-Authenticate"].startswith("Bearer")
    assert problem_for(web.HTTPMethodNotAllowed("PUT", ["GET"])).headers["Allow"] == "GET"


def test_replay_cache_replays_rejects_and_expires() -> None:
    clock = Clock()
    cache = ReplayCache(clock, ttl=timedelta(hours=24))
    scope = ("alice", "k")
    assert cache.claim(scope, b"A") is None
    with pytest.raises(IdempotencyInFlightError):
        cache.claim(scope, b"A")
    cache.finish(scope, web.json_response({"id": 1}, status=201))
    replayed = cache.claim(scope, b"A")
    assert replayed is not None and replayed.status == 201 and b'"id": 1' in replayed.body
    with pytest.raises(IdempotencyMismatchError):
        cache.claim(scope, b"B")
    assert cache.claim(("bob", "k"), b"B") is None  # keys are per operator
    clock.now += timedelta(hours=24)
    assert cache.claim(scope, b"B") is None  # expired: the key is free again
    assert "id" not in repr(cache)


def test_replay_cache_forgets_failures_and_evicts_oldest() -> None:
    cache = ReplayCache(Clock(), capacity=2)
    cache.claim(("a", "1"), b"x")
    cache.finish(("a", "1"), web.json_response({}, status=409))
    assert cache.claim(("a", "1"), b"y") is None  # a failed request is not remembered
    cache.claim(("a", "2"), b"x")
    cache.claim(("a", "3"), b"x")
    assert cache.claim(("a", "1"), b"other") is None  # evicted


def test_verified_tokens_expire_after_ttl() -> None:
    clock = Clock()
    tokens = VerifiedTokens(clock, timedelta(seconds=30), capacity=2)
    tokens.put(b"d1", "alice")
    assert tokens.get(b"d1") == "alice"
    clock.now += timedelta(seconds=30)
    assert tokens.get(b"d1") is None
    for digest in (b"d1", b"d2", b"d3"):
        tokens.put(digest, "x")
    assert tokens.get(b"d1") is None and tokens.get(b"d3") == "x"


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer  ", "Basic abc", "Token x"])
def test_bearer_token_refuses_other_schemes(header: str | None) -> None:
    with pytest.raises(UnauthorizedError):
        bearer_token(header)


def test_bearer_token_accepts_any_case_scheme() -> None:
    assert bearer_token("bearer abc") == "abc"


def test_operator_token_is_verified_once_per_ttl() -> None:
    store = FakeStore()
    token = store.create_operator("alice", actor="t")
    api = ServedApi(store, token=token).start()
    try:
        for _ in range(5):
            assert api.get("/v1/tenants").status == 200
    finally:
        api.stop()
    assert store.calls.count("verify_operator") == 1


def test_chunked_body_over_the_limit_is_413() -> None:
    store = FakeStore()
    token = store.create_operator("alice", actor="t")
    api = ServedApi(store, token=token, max_body_bytes=1024).start()
    try:
        body = json.dumps({"display_name": "x" * 2000, "plan": "free"}).encode()
        reply = api.request(
            "POST",
            "/v1/tenants",
            data=body,
            headers={"Content-Type": "application/json"},
            chunked=True,
        )
    finally:
        api.stop()
    assert reply.status == 413 and reply.content_type == "application/problem+json"


def test_timestamps_are_rfc3339_utc() -> None:
    assert iso(datetime(2024, 5, 1, 12, 0, tzinfo=UTC)) == "2024-05-01T12:00:00Z"
    assert iso(datetime(2024, 5, 1, 12, 0)) == "2024-05-01T12:00:00Z"  # naive: SQLite's
    assert iso(None) is None
    assert parse_time("2024-05-01T12:00:00Z") == datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    assert parse_time("2024-05-01T14:00:00+02:00") == datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    with pytest.raises(ValueError):
        parse_time("tomorrow")
