"""The web console in a real browser (headless Chromium driven by Selenium) against a real stack.

One broker, the gateway with its tenant HTTP port, and `pier admin-api` on the same SQLite store.
The operator signs in with a token, creates a tenant, a service account and an API key (its secret
shown once), sees the tenant's hourly usage as SVG bars and its invoice, and the stack's gateway
listed live on the Gateways page; the tenant signs in to the gateway's console with that key, sees
its topic and reads back a message produced with confluent-kafka; the operator revokes the key and
the tenant console shows the 401 state. Usage rows are written through the billing ledger as a
rollup run would (no Spark), then invoiced.
`PIER_CONSOLE_SCREENSHOTS=docs/console` keeps the screenshots (docs/console.md shows them);
otherwise they go to a temporary directory. Blocking; one stack and one browser for the module.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from billing.rollup.sums import Sums
from infra.admin_api import AdminApiProcess, start_admin_api
from tests.e2e.console.seed import HOUR_MS, hour_iso, seed_usage, this_hour_ms
from tests.e2e.gateway.http_stack import http_gateway_stack, http_url, wait_http
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
TENANT = "cargo"
MESSAGE = "hello <b>from</b> the console <img src=x onerror=alert(1)>"  # shown as text
BROWSER_WAIT_S = 20.0
SHOTS = Path(os.environ.get("PIER_CONSOLE_SCREENSHOTS") or tempfile.mkdtemp(prefix="console-"))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with http_gateway_stack(Path(tmp_path_factory.mktemp("console"))) as running:
        wait_http(running)
        yield running


@pytest.fixture(scope="module")
def admin(stack: GatewayStack) -> Iterator[tuple[AdminApiProcess, str]]:
    with stack.store() as store:
        token = str(store.create_operator("console-tests", actor="tests"))
    api = start_admin_api(stack.db_url, stack.root / "admin-api.log")
    try:
        yield api, token
    finally:
        api.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,860"):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium')}")
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    try:
        yield driver
    finally:
        driver.quit()


def find(driver: webdriver.Chrome, css: str, text: str = "") -> WebElement:
    """The first element matching `css` (and containing `text`), waiting for the page to draw it."""

    def present() -> WebElement | None:
        for element in driver.find_elements(By.CSS_SELECTOR, css):
            if text in element.text:
                return element
        return None

    try:
        found: WebElement | None = wait_until(
            present,
            what=f"{css!r} with {text!r} on {driver.current_url}",
            timeout=BROWSER_WAIT_S,
            retry_on=(StaleElementReferenceException,),
        )
    except AssertionError as missing:
        banners = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".banner")]
        raise AssertionError(f"{missing}; the page's banners: {banners}") from None
    assert found is not None
    return found


def fill(driver: webdriver.Chrome, values: dict[str, str]) -> None:
    for css, value in values.items():
        element = find(driver, css)
        if element.tag_name == "select":
            element.find_element(By.CSS_SELECTOR, f"option[value='{value}']").click()
        else:
            element.clear()
            element.send_keys(value)


def no_banner_error(driver: webdriver.Chrome) -> None:
    errors = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".banner.error")]
    assert errors == [], errors


def produce_message(stack: GatewayStack, key_id: str, secret: str) -> None:
    config: dict[str, str | int | float | bool] = {
        "bootstrap.servers": stack.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": key_id,
        "sasl.password": secret,
    }
    admin = AdminClient(config)  # kept referenced until the topic is made
    admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(timeout=30)
    producer = Producer({**config, "message.timeout.ms": 30_000})
    producer.produce("orders", key=b"k1", value=MESSAGE.encode())
    assert producer.flush(30) == 0


def operator_creates_tenant_and_key(
    driver: webdriver.Chrome, url: str, token: str
) -> tuple[str, str, str]:
    driver.get(url + "/console/")
    fill(driver, {"#token": token})
    find(driver, "#login button[type=submit]").click()
    find(driver, "#tenants", "acme")  # the stack's tenants are listed
    fill(
        driver,
        {
            "#new-tenant-id": TENANT,
            "#new-tenant-name": "Cargo Ltd",
            "#new-tenant-plan": "free",
            "#new-tenant-authorization": "open",
        },
    )
    find(driver, "#create-tenant button[type=submit]").click()
    find(driver, "#accounts", "No service accounts yet")
    fill(driver, {"#new-account-name": "app", "#new-account-description": "the console test"})
    find(driver, "#create-account button[type=submit]").click()
    account = (
        find(driver, "#accounts", "the console test").find_element(By.CSS_SELECTOR, "code").text
    )
    fill(driver, {"#new-key-description": "browser key"})
    find(driver, "#create-key button[type=submit]").click()
    key_id = find(driver, "#new-key-id").text
    secret = find(driver, "#new-key-secret").text
    assert len(key_id) >= 8 and len(secret) >= 16
    driver.save_screenshot(str(SHOTS / "operator-keys.png"))
    driver.refresh()  # the secret is shown once: a reload lists the key, never its secret
    find(driver, "#keys", key_id)
    assert driver.find_elements(By.CSS_SELECTOR, "#new-secret") == []
    assert secret not in driver.page_source
    return account, key_id, secret


def chart_shows(driver: webdriver.Chrome, hours: list[int], total_in: str) -> None:
    """The usage chart has a bar (bytes in, bytes out) for each of `hours`; totals say `total_in`."""
    for hour_ms in hours:
        css = f"#usage-chart rect.bar[data-hour='{hour_iso(hour_ms)}']"
        find(driver, css)
        bars = driver.find_elements(By.CSS_SELECTOR, css)
        assert len(bars) == 2 and float(bars[0].get_attribute("height") or 0) > 0
    assert f"{total_in} in" in find(driver, "#usage-totals").text


def operator_sees_usage_and_invoice(
    driver: webdriver.Chrome, url: str, hours: list[int], period: str
) -> None:
    driver.get(f"{url}/console/#/tenants/{TENANT}/usage")
    chart_shows(driver, hours, "117.2 KiB")  # 40 000 + 80 000 bytes
    driver.save_screenshot(str(SHOTS / "operator-usage.png"))
    find(driver, "a[data-tab=invoices]").click()
    find(driver, "#invoices a", f"{TENANT}-{period}").click()
    find(driver, "#invoice-lines", "ingress_gib")
    no_banner_error(driver)
    driver.save_screenshot(str(SHOTS / "operator-invoice.png"))


def tenant_sees_its_usage_and_invoice(
    driver: webdriver.Chrome, hours: list[int], period: str
) -> None:
    find(driver, "a[data-nav=usage]").click()
    chart_shows(driver, hours, "117.2 KiB")
    driver.save_screenshot(str(SHOTS / "tenant-usage.png"))
    find(driver, "a[data-nav=invoices]").click()
    find(driver, "#invoices a", f"{TENANT}-{period}").click()
    find(driver, "#invoice-lines", "ingress_gib")
    no_banner_error(driver)


def operator_sees_other_pages(driver: webdriver.Chrome, url: str, account: str) -> None:
    """Overview with suspend and reactivate, a quota set, explained and deleted, HTTP consumers,
    plans."""
    driver.get(f"{url}/console/#/tenants/{TENANT}")
    find(driver, "#content .kv", "Cargo Ltd")
    find(driver, "#tenant-suspend").click()
    find(driver, "#content h1 .badge.suspended")
    find(driver, "#tenant-resume").click()
    find(driver, "#content h1 .badge.active")
    find(driver, "a[data-tab=quotas]").click()
    find(driver, "#quotas")
    fill(driver, {"#quota-user": account, "#quota-producer_byte_rate": "2048"})
    find(driver, "#set-quotas button[type=submit]").click()
    find(driver, "#quotas", f"user={account}")
    fill(driver, {"#effective-user": account, "#effective-client": "cli"})
    find(driver, "#explain-quotas button[type=submit]").click()
    assert "2048" in find(driver, "#effective table", "producer_byte_rate").text
    find(driver, f"button[data-delete-quota^='user={account}']").click()
    wait_until(
        lambda: f"user={account}" not in find(driver, "#quotas").text,
        what="the quota entity deleted",
        timeout=BROWSER_WAIT_S,
        retry_on=(StaleElementReferenceException,),
    )
    find(driver, "a[data-tab=consumers]").click()
    find(driver, "#http-consumers")
    find(driver, "a[data-nav=plans]").click()
    find(driver, "#plans", "standard")
    no_banner_error(driver)


def operator_sees_the_live_gateways(
    driver: webdriver.Chrome, url: str, token: str, stack: GatewayStack
) -> None:
    """The Gateways page lists the stack's gateway (the one heartbeat row the admin API reports)
    live, with its applied version, and the connections it holds in the store while a Kafka
    client of acme's is connected (the page redraws every few seconds)."""

    def listed() -> list[dict[str, Any]]:
        answer = requests.get(
            url + "/v1/gateways", headers={"Authorization": f"Bearer {token}"}, timeout=10
        )
        assert answer.status_code == 200, answer.text
        return list(answer.json()["items"])

    (gateway,) = listed()  # the stack's one gateway
    creds = stack.credentials["acme"]
    client = AdminClient(
        {
            "bootstrap.servers": stack.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": creds.key_id,
            "sasl.password": creds.secret,
        }
    )
    client.list_topics(timeout=30)  # connected: the gateway holds a slot of acme's for it
    find(driver, "a[data-nav=gateways]").click()
    row = find(driver, "#gateways tbody tr", gateway["id"])
    assert str(gateway["applied_version"]) in row.text
    find(driver, "#gateways .badge.live", "live")  # once it has applied the latest change

    def page_shows_the_held_connections() -> bool:
        (now,) = listed()
        cells = [
            c.text for c in find(driver, "#gateways tbody tr").find_elements(By.TAG_NAME, "td")
        ]
        return now["connections"] >= 1 and cells[6:8] == [str(now["connections"]), "1"]

    wait_until(
        page_shows_the_held_connections,
        what="the Gateways page shows the connections the gateway holds",
        timeout=BROWSER_WAIT_S,
        retry_on=(StaleElementReferenceException,),
    )
    assert "1 live gateway(s)" in find(driver, "#gateways-summary").text
    no_banner_error(driver)
    driver.save_screenshot(str(SHOTS / "operator-gateways.png"))
    del client  # closes its connections


def tenant_reads_the_message(driver: webdriver.Chrome, url: str, key_id: str, secret: str) -> None:
    driver.get(url + "/console/")
    fill(driver, {"#key-id": key_id, "#key-secret": secret})
    find(driver, "#login button[type=submit]").click()
    find(driver, "#topics a", "orders")
    fill(driver, {"#new-topic-name": "events"})  # a topic made and written in the browser
    find(driver, "#create-topic button[type=submit]").click()
    find(driver, "#partitions", "0")
    fill(driver, {"#produce-key": "k2", "#produce-value": "typed in the console"})
    find(driver, "#produce button[type=submit]").click()
    find(driver, "#produced", "offset 0")
    find(driver, "#browse button[type=submit]").click()
    assert "k2" in find(driver, "#message-table", "typed in the console").text
    driver.save_screenshot(str(SHOTS / "tenant-messages.png"))
    find(driver, "a[data-nav=topics]").click()
    find(driver, "#topics a", "orders").click()
    find(driver, "#partitions", "0")
    find(driver, "#browse button[type=submit]").click()
    row = find(driver, "#message-table", MESSAGE)
    assert "k1" in row.text
    no_banner_error(driver)
    find(driver, "a[data-nav=groups]").click()
    find(driver, "#groups")
    no_banner_error(driver)


def operator_revokes(driver: webdriver.Chrome, url: str, key_id: str) -> None:
    driver.get(f"{url}/console/#/tenants/{TENANT}/keys")
    revoke = find(driver, f"button[data-revoke='{key_id}']")
    revoke.click()  # first click asks to confirm
    find(driver, f"button[data-revoke='{key_id}']", "Confirm revoke").click()
    find(driver, "#keys .badge.revoked")


def tenant_sees_401(driver: webdriver.Chrome, url: str, key_id: str, secret: str) -> None:
    """Once the gateway refuses the revoked key, reloading the tenant console lands on the sign-in
    form, which says the gateway refused the key (401), and the key is gone from the tab.

    The gateway may serve a key up to a second after its revocation (it remembers an HTTP login
    that long: gateway/http/server.py), and the operator's clicks take less, so the test first
    waits for the gateway's refusal, then loads the page (a new document: navigating to the same
    URL with only a fragment would not reload it)."""
    wait_until(
        lambda: (
            requests.get(url + "/v3/clusters", auth=(key_id, secret), timeout=10).status_code == 401
        ),
        what="the gateway refuses the revoked key",
        timeout=10,
    )
    driver.get(url + "/console/#/topics")
    shown = find(driver, ".login .banner.error, #content table, #content .banner")
    assert "401" in shown.text, shown.text
    assert driver.find_elements(By.CSS_SELECTOR, "#key-id")  # back at the sign-in form
    assert driver.execute_script("return sessionStorage.length") == 0  # credentials dropped
    driver.save_screenshot(str(SHOTS / "tenant-revoked.png"))


def test_operator_and_tenant_consoles_in_a_browser(
    stack: GatewayStack, admin: tuple[AdminApiProcess, str], browser: webdriver.Chrome
) -> None:
    api, token = admin
    SHOTS.mkdir(parents=True, exist_ok=True)
    account, key_id, secret = operator_creates_tenant_and_key(browser, api.url, token)
    browser.get(api.url + "/console/#/tenants")
    find(browser, "#tenants", TENANT)
    browser.save_screenshot(str(SHOTS / "operator-tenants.png"))
    hours = [this_hour_ms() - 2 * HOUR_MS, this_hour_ms() - HOUR_MS]
    period = seed_usage(
        stack,
        [
            (TENANT, hours[0], Sums(bytes_in=40_000, bytes_out=25_000, requests=10)),
            (TENANT, hours[1], Sums(bytes_in=80_000, bytes_out=50_000, requests=11)),
        ],
    )
    operator_sees_usage_and_invoice(browser, api.url, hours, period)
    operator_sees_other_pages(browser, api.url, account)
    operator_sees_the_live_gateways(browser, api.url, token, stack)
    produce_message(stack, key_id, secret)
    tenant_reads_the_message(browser, http_url(stack), key_id, secret)
    tenant_sees_its_usage_and_invoice(browser, hours, period)
    operator_revokes(browser, api.url, key_id)
    tenant_sees_401(browser, http_url(stack), key_id, secret)


@pytest.mark.parametrize("host", ["admin", "gateway"])
def test_both_hosts_serve_the_console_with_its_policy(
    stack: GatewayStack, admin: tuple[AdminApiProcess, str], host: str
) -> None:
    base = admin[0].url if host == "admin" else http_url(stack)
    page = requests.get(base + "/console/", timeout=10)  # no credentials: the pages are public
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    expected = "operator.js" if host == "admin" else "tenant.js"
    assert expected in page.text
    traversal = requests.get(base + "/console/static/..%2F..%2Fserve.py", timeout=10)
    assert traversal.status_code == 404 and "import" not in traversal.text
    # The API behind it still wants credentials.
    api_path = "/v1/tenants" if host == "admin" else "/v3/clusters"
    assert requests.get(base + api_path, timeout=10).status_code == 401
