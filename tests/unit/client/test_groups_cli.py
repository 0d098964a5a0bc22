"""`pier groups` output and exit codes, with the client wired to the in-memory broker
(fake_broker.py: Kafka group semantics, real wire encoding)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator

import pytest

from brokers.client.admin import Admin
from brokers.client.cluster import Cluster
from brokers.client.config import ClientConfig
from pier import groups_cli
from pier.cli import main
from tests.unit.client.fake_broker import FakeBroker
from tests.unit.client.test_group_operations import TP0, TP1, seeded

pytestmark = pytest.mark.unit
BOOT = ["groups", "--bootstrap", "fake-broker:9092"]


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeBroker]:
    fake = seeded(FakeBroker())

    def for_bootstrap(
        cls: type[Admin], bootstrap: str, config: ClientConfig | None = None
    ) -> Admin:
        return cls(Cluster(bootstrap, config, connector=fake.connect))

    monkeypatch.setattr(Admin, "for_bootstrap", classmethod(for_bootstrap))
    yield fake


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        status = main([*BOOT, *argv])
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return status, out, err


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("pier: error: ")
    return lines[0]


def test_list_as_table_json_and_filtered(
    broker: FakeBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(capsys, "list")
    assert status == 0
    header, *rows = out.splitlines()
    assert header.split() == ["GROUP", "STATE", "PROTOCOL-TYPE"]
    assert [r.split() for r in rows] == [
        ["busy", "Stable", "consumer"],
        ["idle", "Empty", "consumer"],
    ]
    status, out, _ = run(capsys, "list", "--state", "stable,Dead", "--json")
    assert json.loads(out) == [{"group": "busy", "state": "Stable", "protocol_type": "consumer"}]


def test_describe_shows_members_offsets_and_lag(
    broker: FakeBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(capsys, "describe", "busy", "--json")
    assert status == 0
    document = json.loads(out)
    assert document["state"] == "Stable"
    (member,) = document["members"]
    assert (member["member_id"], member["instance_id"], member["host"]) == (
        "m-1",
        "i-1",
        "/10.0.0.1",
    )
    assert member["assignment"] == [
        {"topic": "orders", "partition": 0},
        {"topic": "orders", "partition": 1},
    ]
    rows = {(r["topic"], r["partition"]): r for r in document["offsets"]}
    assert rows[("orders", 0)] == {
        "topic": "orders",
        "partition": 0,
        "current_offset": 70,
        "log_end_offset": 100,
        "lag": 30,
        "member_id": "m-1",
    }
    assert (rows[("orders", 1)]["current_offset"], rows[("orders", 1)]["lag"]) == (None, None)
    status, out, _ = run(capsys, "describe", "busy")
    assert status == 0
    assert "orders:0,orders:1" in out
    assert any(
        line.split() == ["orders", "0", "70", "100", "30", "m-1"] for line in out.splitlines()
    )


def test_describe_unknown_group_fails(
    broker: FakeBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = run(capsys, "describe", "nobody")
    assert status == 1
    assert "group 'nobody' does not exist" in one_error_line(err)


def test_reset_is_a_dry_run_unless_executed(
    broker: FakeBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(
        capsys, "reset-offsets", "idle", "--topic", "orders", "--to-earliest", "--json"
    )
    assert status == 0 and "dry run" in err
    plan = {
        (r["topic"], r["partition"]): (r["current_offset"], r["new_offset"])
        for r in json.loads(out)
    }
    assert plan == {("orders", 0): (60, 5), ("orders", 1): (10, 0)}
    assert broker.groups["idle"].offsets == {TP0: 60, TP1: 10}
    status, out, err = run(
        capsys, "reset-offsets", "idle", "--topic", "orders:1", "--shift-by", "5", "--execute"
    )
    assert status == 0 and "dry run" not in err
    assert out.splitlines()[1].split() == ["idle", "orders", "1", "10", "15"]
    assert broker.groups["idle"].offsets == {TP0: 60, TP1: 15}


def test_reset_by_datetime_and_all_topics(
    broker: FakeBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    when = datetime.datetime.fromtimestamp(1.5, tz=datetime.UTC).isoformat()  # 1 500 ms
    status, _, _ = run(
        capsys, "reset-offsets", "idle", "--all-topics", "--to-datetime", when, "--execute"
    )
    assert status == 0
    assert broker.groups["idle"].offsets == {TP0: 50, TP1: 40}  # TP1 has no timestamps: log end


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["reset-offsets", "busy", "--topic", "orders", "--to-latest"],
            "inactive, but the current state is Stable",
        ),
        (["reset-offsets", "idle", "--topic", "orders:7", "--to-latest"], "no partition 7"),
        (["reset-offsets", "idle", "--topic", "nope", "--to-latest"], "unknown topic 'nope'"),
        (["reset-offsets", "fresh", "--all-topics", "--to-latest"], "no committed offsets"),
        (["reset-offsets", "fresh", "--topic", "orders", "--shift-by", "1"], "no committed offset"),
    ],
    ids=["active-group", "no-partition", "no-topic", "nothing-committed", "shift-nothing"],
)
def test_reset_refusals_exit_1(
    broker: FakeBroker, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    status, _, err = run(capsys, *argv)
    assert status == 1
    assert message in one_error_line(err)
    assert broker.groups["idle"].offsets == {TP0: 60, TP1: 10}


def test_delete_reports_each_group(broker: FakeBroker, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "delete", "idle", "busy", "missing")
    assert status == 1
    assert out.strip() == "Deleted group 'idle'."
    assert sorted(err.splitlines()) == [
        "pier: error: group 'busy' is not empty (it has active members)",
        "pier: error: group 'missing' does not exist",
    ]
    assert set(broker.groups) == {"busy"}


@pytest.mark.parametrize(
    "argv",
    [
        ["reset-offsets", "g", "--topic", "t"],
        ["reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-latest"],
        ["reset-offsets", "g", "--to-earliest"],
        ["reset-offsets", "g", "--topic", "t:x", "--to-earliest"],
        ["reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday"],
        ["reset-offsets", "g", "--topic", "t", "--to-offset", "ten"],
        ["delete"],
        ["frobnicate"],
    ],
    ids=[
        "no-strategy",
        "two-strategies",
        "no-topic",
        "bad-partition",
        "bad-date",
        "bad-offset",
        "no-group",
        "no-command",
    ],
)
def test_usage_errors_exit_2_with_one_line(
    broker: FakeBroker, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    status, _, err = run(capsys, *argv)
    assert status == 2
    one_error_line(err)
    assert broker.requests == []  # refused before any request


@pytest.mark.parametrize(
    ("argv", "status"),
    [
        (["groups", "list"], 2),
        (["groups", "--bootstrap", "no-port", "list"], 2),
        (["groups", "--timeout", "0", "list"], 2),
    ],
)
def test_bootstrap_and_timeout_are_validated(
    capsys: pytest.CaptureFixture[str], argv: list[str], status: int
) -> None:
    try:
        result = main(argv)
    except SystemExit as exit_:
        result = int(exit_.code or 0)
    assert result == status
    one_error_line(capsys.readouterr().err)


def test_bootstrap_may_follow_the_subcommand(
    broker: FakeBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["groups", "list", "--bootstrap", "fake-broker:9092", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-01T00:00:00Z", 1_704_067_200_000),
        ("2024-01-01T00:00:00", 1_704_067_200_000),
        ("2024-01-01T01:00:00+01:00", 1_704_067_200_000),
    ],
)
def test_datetimes_without_an_offset_are_utc(text: str, expected: int) -> None:
    assert groups_cli._timestamp_ms(text) == expected
