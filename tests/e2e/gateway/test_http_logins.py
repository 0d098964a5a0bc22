"""An HTTP keep-alive connection reuses its login (gateway.http.logins), never past what a fresh
login would be refused for.

The requests of one keep-alive connection are checked by the authenticator about once a second,
not each (the gateway's login counters rise by a few, not by the request count); the same
connection sending another secret of the key is refused at once (401); a revoked key is refused on
its kept connection from the moment a new connection is refused (the verification cache's bound,
not the reuse window); a suspended tenant's kept connection likewise.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from infra.probes import free_port
from tests.e2e.gateway.http_stack import TenantHttp, http_url, wait_http
from tests.gateway_stack import Credentials, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
OPERATOR = "tests"
LOGINS = ("pier_gateway_authentications", "pier_gateway_authentication_cache_hits")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    port, metrics = free_port(), free_port()
    running = GatewayStack(
        Path(tmp_path_factory.mktemp("http-logins")),
        gateway_settings={"http.port": str(port)},
        gateway_metrics_port=metrics,
    )
    running.http_url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    running.metrics_url = f"http://127.0.0.1:{metrics}/metrics"  # type: ignore[attr-defined]
    with running:
        wait_http(running)
        yield running


def logins(stack: GatewayStack) -> float:
    """PLAIN logins the gateway checked so far (store checks and verification-cache hits)."""
    text = requests.get(stack.metrics_url, timeout=10).text  # type: ignore[attr-defined]
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name in LOGINS
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels.get("mechanism") == "PLAIN"
    )


def new_key(stack: GatewayStack, tenant: str, name: str) -> Credentials:
    with stack.store() as store:
        creds = GatewayStack.add_tenant(store, tenant, name=name)
    url = http_url(stack) + "/v3/clusters"
    wait_until(  # a login racing the key's creation through the change feed may be refused once
        lambda: requests.get(url, auth=(creds.key_id, creds.secret), timeout=30).status_code == 200,
        what="the new key accepted over HTTP",
        timeout=10,
    )
    return creds


def kept_session(creds: Credentials) -> requests.Session:
    session = requests.Session()  # one pooled keep-alive connection to the gateway
    session.auth = (creds.key_id, creds.secret)
    return session


def test_a_kept_connection_reuses_its_login_but_not_for_another_secret(
    stack: GatewayStack,
) -> None:
    creds = new_key(stack, "acme", "kept")
    url = http_url(stack) + "/v3/clusters"
    session = kept_session(creds)
    assert session.get(url, timeout=30).status_code == 200
    before = logins(stack)
    for _ in range(30):
        assert session.get(url, timeout=30).status_code == 200
    checked = logins(stack) - before
    assert checked < 15, f"{checked} logins checked for 30 requests on one connection"
    wrong = session.get(url, auth=(creds.key_id, creds.secret + "x"), timeout=30)
    assert wrong.status_code == 401, wrong.text
    assert session.get(url, timeout=30).status_code == 200


def test_a_revoked_key_is_refused_on_its_kept_connection_as_soon_as_on_a_new_one(
    stack: GatewayStack,
) -> None:
    creds = new_key(stack, "acme", "kept-revoked")
    url = http_url(stack) + "/v3/clusters"
    session = kept_session(creds)
    assert session.get(url, timeout=30).status_code == 200
    with stack.store() as store:
        store.revoke_api_key(creds.key_id, actor=OPERATOR)
    wait_until(
        lambda: requests.get(url, auth=(creds.key_id, creds.secret), timeout=30).status_code == 401,
        what="the revoked key refused on a new connection",
        timeout=10,
        interval=0.02,
    )
    kept = session.get(url, timeout=30)
    assert kept.status_code == 401, kept.text


def test_a_suspended_tenant_is_refused_on_its_kept_connection(stack: GatewayStack) -> None:
    creds = new_key(stack, "lapsed", "kept")
    url = http_url(stack) + "/v3/clusters"
    session = kept_session(creds)
    assert session.get(url, timeout=30).status_code == 200
    with stack.store() as store:
        store.set_tenant_status("lapsed", "suspended", actor=OPERATOR)
    wait_until(
        lambda: requests.get(url, auth=(creds.key_id, creds.secret), timeout=30).status_code != 200,
        what="the suspended tenant refused on a new connection",
        timeout=10,
        interval=0.02,
    )
    kept = session.get(url, timeout=30)
    assert kept.status_code in (401, 403), kept.text


def test_an_acl_change_applies_to_a_kept_connections_next_request(stack: GatewayStack) -> None:
    """A reused login is authorized per request: the moment a new connection's write is refused
    by an ACL added meanwhile, the kept connection's next write (its login reused, checked well
    under a second before) is refused too."""
    creds = new_key(stack, "guarded", "kept-acl")
    kept = TenantHttp(stack, creds)
    record = {"value": {"type": "STRING", "data": "x"}}
    assert kept.produce("absent", record).status_code == 404  # open: no ACL names the account
    with stack.store() as store:
        store.create_acl(
            "guarded",
            resource_type="TOPIC",
            pattern_type="literal",
            resource_name="*",
            operation="READ",
            permission="allow",
            principal=f"User:{creds.service_account}",
            actor=OPERATOR,
        )
    url = f"{kept.base}{kept.cluster}/topics/absent/records"
    auth = (creds.key_id, creds.secret)

    def refused_anew() -> bool:
        assert kept.produce("absent", record).status_code in (403, 404)  # keeps the login fresh
        return requests.post(url, json=record, auth=auth, timeout=30).status_code == 403

    wait_until(refused_anew, what="the ACL in force on a new connection", timeout=10, interval=0)
    answer = kept.produce("absent", record)
    assert answer.status_code == 403, answer.text
