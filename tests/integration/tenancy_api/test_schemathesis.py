"""Schemathesis over the served `/openapi.json`: no 5xx, and every response matches the document.

Each operation gets schema-valid (positive) and schema-violating (negative) requests against the
real store on SQLite and PostgreSQL, with Schemathesis' response checks: not a server error, status
code, content type, headers and body conformance, and negative data rejected with a 4xx. Not
checked: `positive_data_acceptance`, since schema-valid random ids and cursors are rightly 404/400.
Half of the positive cases aim at resources that exist (seeded below), so handlers past the 404
run too; destructive operations (deletes, revocation) run last so they do not starve the rest.
Bounded by `EXAMPLES` per operation and mode, derandomised so CI runs are reproducible.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import openapi
from schemathesis.checks import positive_data_acceptance

from tenancy.api.openapi import document
from tests.unit.tenancy_api.harness import ServedApi

pytestmark = pytest.mark.integration
EXAMPLES = 25


@pytest.fixture
def known(api: ServedApi) -> dict[str, str]:
    """Path parameter values of resources that exist, by parameter name."""
    assert (
        api.post("/v1/tenants", {"id": "acme", "display_name": "Acme", "plan": "free"}).status
        == 201
    )
    account = api.post("/v1/tenants/acme/service-accounts", {"name": "app"}).json["id"]
    key = api.post("/v1/tenants/acme/api-keys", {"service_account_id": account}).json["key"]
    acl = api.post(
        "/v1/tenants/acme/acls",
        {
            "resource_type": "TOPIC",
            "pattern_type": "literal",
            "resource_name": "orders",
            "operation": "READ",
            "permission": "allow",
            "principal": f"User:{account}",
        },
    ).json["id"]
    plan = {
        "currency": "EUR",
        "dimensions": {
            "requests": {"included": "0", "tiers": [{"up_to": None, "unit_price": "0.01"}]}
        },
    }
    assert api.put("/v1/plans/pro", plan).status == 200
    return {"id": "acme", "key": key, "acl_id": acl, "name": "pro"}


def destructive_last(operation: Any) -> tuple[int, str]:
    rank = (
        2
        if operation.label == "DELETE /v1/tenants/{id}"
        else int(operation.method.upper() == "DELETE")
    )
    return rank, operation.label


def drops_auth(case: Any) -> bool:
    """A negative case whose mutation is a missing Authorization header (sending one would undo it)."""
    data = getattr(getattr(case.meta, "phase", None), "data", None)
    names = {getattr(m, "parameter", None) for m in getattr(data, "mutations", ()) or ()}
    return "Authorization" in names | {getattr(data, "parameter", None)}


def check_operation(operation: Any, api: ServedApi, known: dict[str, str], negative: bool) -> None:
    mode = (
        schemathesis.GenerationMode.NEGATIVE if negative else schemathesis.GenerationMode.POSITIVE
    )

    @given(case=operation.as_strategy(generation_mode=mode), aim=st.booleans())
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any, aim: bool) -> None:
        if aim and not negative and case.path_parameters:
            case.path_parameters = {k: known.get(k, v) for k, v in case.path_parameters.items()}
        auth = {} if drops_auth(case) else {"Authorization": f"Bearer {api.token}"}
        case.call_and_validate(
            base_url=api.url, headers=auth, excluded_checks=[positive_data_acceptance]
        )

    run()


def test_responses_conform_to_the_document(api: ServedApi, known: dict[str, str]) -> None:
    schema = openapi.from_url(f"{api.url}/openapi.json")
    results: list[Any] = list(schema.get_all_operations())
    operations = sorted((result.ok() for result in results), key=destructive_last)
    labels = {operation.label for operation in operations}
    assert {"GET /v1/tenants/{id}/quotas/effective", "DELETE /v1/api-keys/{key}"} <= labels
    documented = {f"{m.upper()} {p}" for p, item in document()["paths"].items() for m in item}
    assert {label for label in documented if " /v1/" in label} <= labels
    failures: list[str] = []
    for negative in (False, True):
        for operation in operations:
            if negative and not (operation.definition.raw.get("parameters") or operation.body):
                continue  # nothing to violate
            try:
                check_operation(operation, api, known, negative)
            except Exception as exc:
                failures.append(
                    f"{operation.label} ({'negative' if negative else 'positive'}): {exc}"
                )
    assert failures == [], "\n\n".join(failures)
