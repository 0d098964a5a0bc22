"""`pier tenancy init`, `pier admin-api` and `pier admin` as real processes, on SQLite and PostgreSQL.

`init` prints a working operator token once (a second `init` prints none); `admin-api` is started
on a free port (`--port 0`, the port read from its ready line) and stopped by PID; `pier admin`
talks to it with tables and `--json`, reports API problems as one line with exit 1 and usage
errors with exit 2, never a traceback. `admin_api` asserts the server exits 0 on SIGTERM and
that its log never shows the token.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra import process as proc
from tenancy.store import TenantStore
from tests.conftest import remember_log

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]
READY = re.compile(r"pier admin-api ready url=(http://\S+)")


def pier(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pier", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout


def test_init_prints_one_working_token_once(empty_store_url: str) -> None:
    first = pier("tenancy", "init", "--db", empty_store_url)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert len(lines) == 1 and len(lines[0]) >= 32
    token = lines[0]
    assert token not in first.stderr
    again = pier("tenancy", "init", "--db", empty_store_url)
    assert again.returncode == 0, again.stderr
    assert again.stdout == "" and "no new token" in again.stderr
    with TenantStore.open(empty_store_url) as store:
        assert store.verify_operator(token) == "admin"
        assert store.verify_operator(token + "x") is None


def test_init_with_an_unusable_database_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    bad = pier("tenancy", "init", "--db", f"sqlite:///{tmp_path}/a-file/x.db")
    no_traceback(bad)
    assert bad.returncode == 1 and bad.stderr.startswith("pier: error:")
    usage = pier("tenancy", "init", "--db", "nonsense://")
    no_traceback(usage)
    assert usage.returncode == 2


class RunningApi:
    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.token = token

    def admin(self, *args: str, token: bool = True) -> subprocess.CompletedProcess[str]:
        env = {"PIER_ADMIN_TOKEN": self.token} if token else {"PIER_ADMIN_TOKEN": ""}
        result = pier("admin", "--url", self.url, *args, env=env)
        no_traceback(result)
        return result


@pytest.fixture
def admin_api(
    empty_store_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[RunningApi]:
    token = pier("tenancy", "init", "--db", empty_store_url).stdout.strip()
    log = tmp_path / "admin-api.log"
    remember_log(request.node, "admin-api", log)
    argv = [sys.executable, "-m", "pier", "admin-api", "--db", empty_store_url, "--port", "0"]
    server = proc.spawn(argv, log)
    try:
        proc.wait_ready(
            server,
            lambda: READY.search(log.read_text()) is not None,
            timeout=30,
            name="admin-api",
            log_path=log,
        )
        match = READY.search(log.read_text())
        assert match is not None
        yield RunningApi(match.group(1), token)
    finally:
        assert proc.terminate(server, timeout=15) == 0
    assert token not in log.read_text()  # the access log never shows the token


def test_admin_tenants_create_and_list(admin_api: RunningApi) -> None:
    created = admin_api.admin(
        "tenants", "create", "--id", "acme", "--display-name", "Acme", "--plan", "free", "--json"
    )
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["id"] == "acme"
    listed = admin_api.admin("tenants", "list", "--json")
    assert [t["id"] for t in json.loads(listed.stdout)["items"]] == ["acme"]
    table = admin_api.admin("tenants", "list")
    header, row = table.stdout.splitlines()
    assert header.split() == ["ID", "DISPLAY-NAME", "PLAN", "STATUS", "AUTHORIZATION", "CREATED-AT"]
    assert row.split()[:5] == ["acme", "Acme", "free", "active", "acls"]
    opened = admin_api.admin("tenants", "update", "acme", "--authorization", "open", "--json")
    assert json.loads(opened.stdout)["authorization"] == "open", opened.stderr
    shown = admin_api.admin("tenants", "get", "acme")
    assert re.search(r"^limits\.max_partitions\s+\d+$", shown.stdout, re.M)


# The CLI is a thin client: the API itself is checked on both stores by test_endpoints; the
# long CLI walks run on SQLite only to keep subprocess start-ups down.
@pytest.mark.parametrize("store_backend", ["sqlite"])
def test_admin_every_resource(admin_api: RunningApi, tmp_path: Path) -> None:
    run = admin_api.admin
    assert (
        run(
            "tenants", "create", "--id", "acme", "--display-name", "Acme", "--plan", "free"
        ).returncode
        == 0
    )
    capped = run("tenants", "update", "acme", "--max-producer-byte-rate", "1048576", "--json")
    assert json.loads(capped.stdout)["limits"]["max_producer_byte_rate"] == 1048576
    uncapped = run("tenants", "update", "acme", "--max-producer-byte-rate", "none")
    assert re.search(r"^limits\.max_producer_byte_rate\s+-$", uncapped.stdout, re.M)
    account = json.loads(
        run("service-accounts", "create", "acme", "--name", "app", "--json").stdout
    )
    assert account["id"] in run("service-accounts", "list", "acme").stdout
    key = run("api-keys", "create", "acme", "--service-account", account["id"])
    assert key.returncode == 0 and "not shown again" in key.stderr
    secret = re.search(r"^secret\s+(\S+)$", key.stdout, re.M)
    key_id = re.search(r"^key\s+(\S+)$", key.stdout, re.M)
    assert secret and key_id
    keys = run("api-keys", "list", "acme")
    assert key_id.group(1) in keys.stdout and secret.group(1) not in keys.stdout
    assert run("api-keys", "revoke", key_id.group(1), "--json").returncode == 0
    user = account["id"]
    assert (
        run(
            "quotas", "set", "acme", "--user", user, "--quota", "producer_byte_rate=1024"
        ).returncode
        == 0
    )
    effective = run("quotas", "effective", "acme", "--user", user, "--client-id", "c1")
    assert re.search(rf"producer_byte_rate\s+1024\s+/config/users/{user}$", effective.stdout, re.M)
    assert user in run("quotas", "get", "acme").stdout
    assert run("quotas", "delete", "acme", "--user", user).returncode == 0
    acl = run(
        "acls",
        "create",
        "acme",
        "--resource-type",
        "TOPIC",
        "--pattern-type",
        "literal",
        "--resource-name",
        "orders",
        "--operation",
        "READ",
        "--permission",
        "allow",
        "--principal",
        f"User:{user}",
        "--json",
    )
    acl_id = json.loads(acl.stdout)["id"]
    assert acl_id in run("acls", "list", "acme").stdout
    assert run("acls", "delete", "acme", acl_id).returncode == 0
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "currency": "EUR",
                "dimensions": {
                    "requests": {
                        "included": "100",
                        "tiers": [{"up_to": None, "unit_price": "0.01"}],
                    }
                },
            }
        )
    )
    assert run("plans", "put", "pro", "--file", str(plan)).returncode == 0
    assert json.loads(run("plans", "get", "pro", "--json").stdout)["currency"] == "EUR"
    for verb in ("suspend", "resume", "delete"):
        assert run("tenants", verb, "acme").returncode == 0


@pytest.mark.parametrize("store_backend", ["sqlite"])
def test_first_hour_plans_list_get_and_refusal(admin_api: RunningApi) -> None:
    """Issue 12: the default plans are there, listed; an unknown plan is refused by name."""
    run = admin_api.admin
    listed = run("plans", "list")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["NAME", "CURRENCY", "LIMITS", "QUOTAS"]
    assert [row.split()[0] for row in rows] == ["enterprise", "free", "standard"]
    free = json.loads(run("plans", "get", "free", "--json").stdout)
    assert free["limits"]["max_partitions"] == 100
    assert free["quotas"] == {
        "producer_byte_rate": 1048576,
        "consumer_byte_rate": 2097152,
        "request_percentage": 25.0,
    }
    refused = run("tenants", "create", "--id", "acme", "--display-name", "Acme", "--plan", "gold")
    assert refused.returncode == 1
    assert refused.stderr == (
        "pier: error: 400 Invalid request: plan: unknown plan 'gold'; the plans are: "
        "enterprise, free, standard (`pier admin plans list` shows them, `pier admin plans put` "
        "defines one)\n"
    )
    assert json.loads(run("tenants", "list", "--json").stdout)["items"] == []
    created = run("tenants", "create", "--id", "acme", "--display-name", "A", "--plan", "standard")
    assert created.returncode == 0, created.stderr
    assert re.search(r"^limits\.max_partitions\s+1000$", created.stdout, re.M)
    quotas = json.loads(run("quotas", "get", "acme", "--json").stdout)["items"]
    assert quotas == [
        {
            "entity": {"user": "<default>", "client_id": None},
            "quotas": {
                "producer_byte_rate": 10485760,
                "consumer_byte_rate": 20971520,
                "request_percentage": 100.0,
            },
        }
    ]


@pytest.mark.parametrize("store_backend", ["sqlite"])
def test_first_hour_quota_units_and_entity_paths(admin_api: RunningApi) -> None:
    """Issue 12: byte rates are whole bytes/s as in Kafka; entity flags as kafka-configs names
    them; paths escaped as Kafka escapes them (`~` is %7E)."""
    run = admin_api.admin
    assert (
        run("tenants", "create", "--id", "acme", "--display-name", "A", "--plan", "free").returncode
        == 0
    )
    fraction = run("quotas", "set", "acme", "--user-defaults", "--quota", "producer_byte_rate=1.5")
    assert fraction.returncode == 2
    assert "producer_byte_rate takes a whole number of bytes per second" in fraction.stderr
    assert fraction.stderr.count("\n") == 1
    made = run(
        "quotas", "set", "acme", "--user-defaults", "--client", "app~1",
        "--quota", "producer_byte_rate=2097152", "--quota", "request_percentage=12.5", "--json",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout) == {
        "entity": {"user": "<default>", "client_id": "app~1"},
        "quotas": {"producer_byte_rate": 2097152, "request_percentage": 12.5},
    }
    account = json.loads(run("service-accounts", "create", "acme", "--name", "a", "--json").stdout)
    effective = run("quotas", "effective", "acme", "--user", account["id"], "--client", "app~1")
    assert re.search(
        r"^producer_byte_rate\s+2097152\s+/config/users/<default>/clients/app%7E1$",
        effective.stdout,
        re.M,
    ), effective.stdout
    assert re.search(  # the plan's quota where nothing more specific sets one
        r"^consumer_byte_rate\s+2097152\s+/config/users/<default>$", effective.stdout, re.M
    ), effective.stdout
    raw = pier(
        "admin", "--url", admin_api.url, "--token", admin_api.token, "quotas", "set", "acme",
        "--user-defaults", "--quota", "consumer_byte_rate=5",
    )  # fmt: skip
    assert raw.returncode == 0, raw.stderr
    assert (
        run("quotas", "delete", "acme", "--user-defaults", "--client-id", "app~1").returncode == 0
    )


@pytest.mark.parametrize("store_backend", ["sqlite"])
def test_admin_errors_are_one_line(admin_api: RunningApi) -> None:
    missing = admin_api.admin("tenants", "get", "nobody")
    assert missing.returncode == 1
    assert missing.stderr.count("\n") == 1 and missing.stderr.startswith("pier: error: 404")
    invalid = admin_api.admin(
        "tenants", "create", "--id", "BAD!", "--display-name", "x", "--plan", "free"
    )
    assert invalid.returncode == 1 and "body.id" in invalid.stderr
    no_token = admin_api.admin("tenants", "list", token=False)
    assert no_token.returncode == 2 and "PIER_ADMIN_TOKEN" in no_token.stderr
    wrong = pier("admin", "--url", admin_api.url, "--token", "wrong", "tenants", "list")
    assert wrong.returncode == 1 and "401" in wrong.stderr
    usage = admin_api.admin("quotas", "set", "acme", "--quota", "nonsense=1")
    assert usage.returncode == 2


def test_admin_api_refuses_an_uninitialised_database(tmp_path: Path) -> None:
    result = pier("admin-api", "--db", f"sqlite:///{tmp_path}/empty.db", "--port", "0")
    no_traceback(result)
    assert result.returncode == 1 and "pier tenancy init" in result.stderr


def test_unreachable_api_is_one_line() -> None:
    result = pier("admin", "--url", "http://127.0.0.1:9", "--token", "t", "tenants", "list")
    no_traceback(result)
    assert result.returncode == 1 and "cannot reach" in result.stderr
