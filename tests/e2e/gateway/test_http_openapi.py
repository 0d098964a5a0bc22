"""Schemathesis over the tenant HTTP API's own OpenAPI document (issue 15, acceptance).

Each operation gets schema-valid (positive) and schema-violating (negative) requests against a
real gateway and broker, with Schemathesis' response checks: no 5xx, and status code, content type,
headers and body conforming to the document. Not checked: `positive_data_acceptance` (schema-valid
random names are rightly 404) and `negative_data_rejection` (the API accepts some values the
document narrows, e.g. longer names; it must still never fail). Half of the positive cases aim at
things that exist (the tenant's cluster id, a topic, a consumer instance, an invoice, a usage
window with rows), so handlers past the 404 and 400 run too; deletes run last. Bounded by
`EXAMPLES` per operation and mode, derandomised.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import openapi
from schemathesis.checks import negative_data_rejection, positive_data_acceptance

from billing.rollup.sums import Sums
from tests.e2e.console.seed import HOUR_MS, hour_iso, seed_usage, this_hour_ms
from tests.e2e.gateway.http_stack import TenantHttp, http_gateway_stack, http_url, wait_http
from tests.gateway_stack import GatewayStack

pytestmark = pytest.mark.e2e
EXAMPLES = 10
USAGE_HOUR = this_hour_ms() - HOUR_MS
USAGE_WINDOW = {"from": hour_iso(USAGE_HOUR), "to": hour_iso(USAGE_HOUR + HOUR_MS)}
CALLS: list[tuple[str, int]] = []  # (operation, status) answered, so the test proves it ran


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    # Instances live through the whole run, so cases aimed at the known one find it.
    settings = {"consumer.instance.timeout.ms": "600000"}
    with http_gateway_stack(Path(tmp_path_factory.mktemp("http-openapi")), settings) as running:
        wait_http(running)
        yield running


def destructive_last(operation: Any) -> tuple[int, str]:
    return int(operation.method.upper() == "DELETE"), operation.label


def check_operation(
    operation: Any, tenant: TenantHttp, known: dict[str, str], negative: bool
) -> None:
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
        if case.path_parameters:
            pinned = {"cluster_id": tenant.cluster_id} if not negative else {}
            if aim and not negative:
                pinned = {**known, **pinned}
            case.path_parameters = {k: pinned.get(k, v) for k, v in case.path_parameters.items()}
        if aim and not negative and case.query and "from" in case.query:
            case.query = {**case.query, **USAGE_WINDOW}  # the seeded rows, so 200s are checked
        response = case.call_and_validate(
            base_url=tenant.base,
            auth=(tenant.creds.key_id, tenant.creds.secret),
            excluded_checks=[positive_data_acceptance, negative_data_rejection],
            timeout=30,
        )
        CALLS.append((operation.label, response.status_code))

    run()


def test_responses_conform_to_the_document(stack: GatewayStack) -> None:
    tenant = TenantHttp(stack, stack.credentials["acme"])
    tenant.create_topic("known", 2)
    period = seed_usage(stack, [("acme", USAGE_HOUR, Sums(bytes_in=1, bytes_out=2, requests=3))])
    instance = tenant.consumer("known-group", name="known-instance")
    known = {
        "topic_name": "known",
        "group_name": "known-group",
        "instance": instance.rsplit("/", 1)[1],
        "consumer_group_id": "known-group",
        "name": "retention.ms",
        "partition_id": "0",
        "invoice_id": f"acme-{period}",
    }
    schema = openapi.from_url(http_url(stack) + "/openapi.json")
    results: list[Any] = list(schema.get_all_operations())
    operations = sorted((r.ok() for r in results), key=destructive_last)
    assert len(operations) >= 30
    failures: list[str] = []
    for negative in (False, True):
        for operation in operations:
            if negative and not (operation.definition.raw.get("parameters") or operation.body):
                continue
            try:
                check_operation(operation, tenant, known, negative)
            except Exception as exc:
                failures.append(
                    f"{operation.label} ({'negative' if negative else 'positive'}): {exc}"
                )
    assert failures == [], "\n\n".join(failures)
    statuses = {status for _, status in CALLS}
    assert len(CALLS) > 200 and {200, 204, 404} <= statuses, sorted(statuses)
    answered = {label for label, status in CALLS if status == 200}
    for label in ("usage", "invoices", "invoices/{invoice_id}"):  # their 200 bodies were checked
        assert f"GET /v3/clusters/{{cluster_id}}/{label}" in answered, sorted(answered)
