"""`pier admin` without a server: arguments → the API call, and the table/JSON rendering."""

from __future__ import annotations

import argparse

import pytest

from pier import admin_client, cli

pytestmark = pytest.mark.unit


def parse(*argv: str) -> argparse.Namespace:
    return cli._parser().parse_args(["admin", "--url", "http://x", "--token", "t", *argv])


def call(*argv: str) -> admin_client.Call:
    args = parse(*argv)
    return admin_client._CALLS[args.resource](args)


def test_tenant_authorization_is_sent_only_when_given() -> None:
    made = call("tenants", "create", "--display-name", "A", "--plan", "free")
    assert "authorization" not in made.body  # the plan's
    made = call(
        "tenants", "create", "--display-name", "A", "--plan", "free", "--authorization", "open"
    )
    assert made.body["authorization"] == "open"
    made = call("tenants", "update", "acme", "--authorization", "acls")
    assert (made.method, made.body) == ("PATCH", {"authorization": "acls"})
    with pytest.raises(SystemExit):
        parse("tenants", "create", "--display-name", "A", "--plan", "free", "--authorization", "x")


def test_gateways_list() -> None:
    made = call("gateways", "list")
    assert (made.method, made.path) == ("GET", "/v1/gateways")
    assert {"gateway", "worker", "connections", "registered"} <= set(made.columns or ())


def test_tenant_create_with_limits_and_idempotency_key() -> None:
    made = call(
        "tenants",
        "create",
        "--display-name",
        "Acme",
        "--plan",
        "free",
        "--id",
        "acme",
        "--max-partitions",
        "1",
        "--max-storage-bytes",
        "2",
        "--max-connections",
        "3",
        "--max-request-bytes",
        "4",
        "--idempotency-key",
        "k1",
    )
    assert (made.method, made.path) == ("POST", "/v1/tenants")
    assert made.body == {
        "id": "acme",
        "display_name": "Acme",
        "plan": "free",
        "limits": {
            "max_partitions": 1,
            "max_storage_bytes": 2,
            "max_connections": 3,
            "max_request_bytes": 4,
        },
    }
    assert made.headers == {"Idempotency-Key": "k1"}


def test_partial_limits_on_create_are_a_usage_error() -> None:
    with pytest.raises(admin_client.UsageError):
        call("tenants", "create", "--display-name", "A", "--plan", "p", "--max-partitions", "1")


def test_update_sends_only_what_changes() -> None:
    made = call("tenants", "update", "acme", "--max-connections", "9")
    assert (made.method, made.path, made.body) == (
        "PATCH",
        "/v1/tenants/acme",
        {"limits": {"max_connections": 9}},
    )


def test_rate_caps_on_create_come_with_the_other_limits() -> None:
    sizes = ["--max-partitions", "1", "--max-storage-bytes", "2"]
    sizes += ["--max-connections", "3", "--max-request-bytes", "4"]
    create = ["tenants", "create", "--display-name", "A", "--plan", "p"]
    caps = ["--max-producer-byte-rate", "1048576", "--max-consumer-byte-rate", "none"]
    made = call(*create, *sizes, *caps)
    assert made.body["limits"] == {
        "max_partitions": 1,
        "max_storage_bytes": 2,
        "max_connections": 3,
        "max_request_bytes": 4,
        "max_producer_byte_rate": 1048576,
        "max_consumer_byte_rate": None,
    }
    with pytest.raises(admin_client.UsageError):
        call(*create, "--max-producer-byte-rate", "5")  # caps alone: the API needs all four


def test_update_sets_or_removes_the_group_and_transactional_id_limits() -> None:
    made = call("tenants", "update", "acme", "--max-groups", "20", "--max-transactional-ids", "5")
    assert made.body == {"limits": {"max_groups": 20, "max_transactional_ids": 5}}
    removed = call("tenants", "update", "acme", "--max-groups", "none")
    assert removed.body == {"limits": {"max_groups": None}}


def test_update_sets_or_removes_a_rate_cap() -> None:
    made = call("tenants", "update", "acme", "--max-consumer-byte-rate", "2048")
    assert made.body == {"limits": {"max_consumer_byte_rate": 2048}}
    removed = call("tenants", "update", "acme", "--max-producer-byte-rate", "none")
    assert removed.body == {"limits": {"max_producer_byte_rate": None}}


@pytest.mark.parametrize("bad", ["0", "-5", "1.5", "fast"])
def test_bad_rate_cap_is_a_usage_error(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse("tenants", "update", "acme", "--max-producer-byte-rate", bad)
    assert exited.value.code == 2
    assert "--max-producer-byte-rate" in capsys.readouterr().err


def test_path_segments_are_escaped() -> None:
    assert call("tenants", "get", "a/b").path == "/v1/tenants/a%2Fb"


def test_quota_set_entity_and_values() -> None:
    made = call(
        "quotas",
        "set",
        "acme",
        "--client-id",
        "<default>",
        "--quota",
        "producer_byte_rate=10",
        "--quota",
        "request_percentage=none",
    )
    assert made.method == "PUT"
    assert made.body == {
        "entity": {"client_id": "<default>"},
        "quotas": {"producer_byte_rate": 10, "request_percentage": None},
    }
    assert type(made.body["quotas"]["producer_byte_rate"]) is int


@pytest.mark.parametrize(
    ("flags", "entity"),
    [
        (["--user", "sa-1"], {"user": "sa-1"}),
        (["--user-defaults"], {"user": "<default>"}),
        (["--client", "app"], {"client_id": "app"}),
        (["--client-id", "app"], {"client_id": "app"}),
        (["--client-defaults"], {"client_id": "<default>"}),
        (["--user", "sa-1", "--client-defaults"], {"user": "sa-1", "client_id": "<default>"}),
    ],
)
def test_quota_entity_flags_are_kafka_configs(flags: list[str], entity: dict[str, str]) -> None:
    made = call("quotas", "set", "acme", *flags, "--quota", "consumer_byte_rate=1048576")
    assert made.body == {"entity": entity, "quotas": {"consumer_byte_rate": 1048576}}
    deleted = call("quotas", "delete", "acme", *flags)
    assert dict(deleted.query) == entity


def test_kafka_units_fractions_only_where_kafka_takes_doubles() -> None:
    made = call(
        "quotas",
        "set",
        "acme",
        "--user-defaults",
        "--quota",
        "request_percentage=12.5",
        "--quota",
        "controller_mutation_rate=0.5",
    )
    assert made.body["quotas"] == {"request_percentage": 12.5, "controller_mutation_rate": 0.5}


@pytest.mark.parametrize(
    ("quota", "expected"),
    [
        ("producer_byte_rate=1.5", "whole number of bytes per second"),
        ("consumer_byte_rate=1e6", "whole number of bytes per second"),
        ("producer_byte_rate=0", "at least 1"),
        ("producer_byte_rate=fast", "whole number of bytes per second"),
        ("request_percentage=fast", "positive number"),
        ("request_percentage=-1", "positive number"),
        ("request_percentage=inf", "positive number"),
        ("bytes=1", "NAME one of producer_byte_rate, consumer_byte_rate, request_percentage"),
    ],
)
def test_bad_quota_value_is_a_usage_error(
    quota: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse("quotas", "set", "acme", "--user-defaults", "--quota", quota)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert expected in err
    assert repr(quota.partition("=")[2]) in err or "got 'bytes=1'" in err  # names what it got


def test_user_and_user_defaults_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse("quotas", "delete", "acme", "--user", "sa-1", "--user-defaults")
    assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_quota_help_documents_the_entity_flags_and_units(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse("quotas", "set", "--help")
    assert exited.value.code == 0
    text = capsys.readouterr().out
    for flag in ("--user SA", "--user-defaults", "--client CLIENT", "--client-defaults"):
        assert flag in text
    assert "whole\nbytes/s" in text or "whole bytes/s" in text


def test_plans_list_and_get() -> None:
    listed = call("plans", "list")
    assert (listed.method, listed.path) == ("GET", "/v1/plans")
    assert call("plans", "get", "free").path == "/v1/plans/free"


def test_version_comes_from_the_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"pier {version('pier')}\n"


def test_acl_delete_by_id_or_filter() -> None:
    assert call("acls", "delete", "acme", "acl-1").path == "/v1/tenants/acme/acls/acl-1"
    filtered = call("acls", "delete", "acme", "--operation", "WRITE")
    assert (filtered.path, dict(filtered.query)) == (
        "/v1/tenants/acme/acls",
        {"operation": "WRITE"},
    )


def test_json_flag_after_the_verb() -> None:
    assert parse("tenants", "list", "--json").json is True
    assert parse("tenants", "list").json is False


def test_list_renders_a_table_and_the_next_cursor(capsys: pytest.CaptureFixture[str]) -> None:
    made = call("tenants", "list", "--limit", "1")
    assert dict(made.query) == {"limit": 1}
    body = {
        "items": [
            {
                "id": "acme",
                "display_name": "Acme Corp",
                "plan": "free",
                "status": "active",
                "authorization": "acls",
                "created_at": "2024-01-01T00:00:00Z",
            }
        ],
        "next_cursor": "abc",
    }
    admin_client._render(made, 200, body, as_json=False)
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "ID    DISPLAY-NAME  PLAN  STATUS  AUTHORIZATION  CREATED-AT",
        "acme  Acme Corp     free  active  acls           2024-01-01T00:00:00Z",
    ]
    assert "--cursor abc" in err


def test_single_object_renders_flattened_fields(capsys: pytest.CaptureFixture[str]) -> None:
    made = call("tenants", "get", "acme")
    admin_client._render(
        made,
        200,
        {"id": "acme", "limits": {"max_partitions": 5}, "revoked_at": None},
        as_json=False,
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["FIELD", "VALUE"]
    assert lines[1].split() == ["id", "acme"]
    assert lines[2].split() == ["limits.max_partitions", "5"]
    assert lines[3].split() == ["revoked_at", "-"]


def test_effective_quotas_render_value_and_source(capsys: pytest.CaptureFixture[str]) -> None:
    made = call("quotas", "effective", "acme", "--user", "u", "--client-id", "c")
    body = {
        "user": "u",
        "client_id": "c",
        "quotas": {
            "producer_byte_rate": {"value": 5.0, "source": "/config/users/u"},
            "consumer_byte_rate": {"value": None, "source": None},
        },
    }
    admin_client._render(made, 200, body, as_json=False)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["producer_byte_rate", "5.0", "/config/users/u"]
    assert lines[2].split() == ["consumer_byte_rate", "-", "-"]
