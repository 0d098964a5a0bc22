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
        "quotas": {"producer_byte_rate": 10.0, "request_percentage": None},
    }


def test_bad_quota_value_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse("quotas", "set", "acme", "--quota", "producer_byte_rate=fast")
    assert exited.value.code == 2
    assert "not a number" in capsys.readouterr().err


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
                "created_at": "2024-01-01T00:00:00Z",
            }
        ],
        "next_cursor": "abc",
    }
    admin_client._render(made, 200, body, as_json=False)
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "ID    DISPLAY-NAME  PLAN  STATUS  CREATED-AT",
        "acme  Acme Corp     free  active  2024-01-01T00:00:00Z",
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
