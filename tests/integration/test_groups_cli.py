"""`pier groups` as a real process against a real in-process broker.

Output formats and every refusal are covered against Kafka semantics in
tests/unit/client/test_groups_cli.py; here the real entry point talks to the real broker.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokers.client import Admin, TopicPartition
from brokers.client.producer import produce
from brokers.client.topics import NewTopic
from brokers.records.builder import simple_batch
from tests.integration.inproc import running_broker
from tests.polling import wait_until

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
WAIT_S = 30.0
TOPIC = "cli-orders"


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_broker(tmp_path_factory.mktemp("groups-cli")) as address:
        asyncio.run(_seed(address))
        yield address


async def _seed(bootstrap: str) -> None:
    async with Admin.for_bootstrap(bootstrap) as admin:
        await admin.create_topics([NewTopic(TOPIC, 2)])
        for partition, count in ((0, 10), (1, 4)):
            batch = simple_batch([b"v"] * count)
            await produce(admin.cluster, TopicPartition(TOPIC, partition), batch)


def pier(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pier", "groups", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
    )


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("pier: error: "), result.stderr
    return lines[0]


def test_missing_bootstrap_is_a_usage_error() -> None:
    result = pier("list")
    assert result.returncode == 2
    assert "--bootstrap" in error_line(result)


def test_unreachable_broker_is_an_operation_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = pier("--bootstrap", f"127.0.0.1:{port}", "--timeout", "5", "list")
    assert result.returncode == 1
    assert "no broker reachable" in error_line(result)


def test_reset_of_an_unknown_topic_fails_cleanly(bootstrap: str) -> None:
    result = pier("--bootstrap", bootstrap, "reset-offsets", "g", "--topic", "nope", "--to-latest")
    assert result.returncode == 1
    error_line(result)


def test_commit_describe_reset_delete_list(bootstrap: str) -> None:
    async def commit() -> None:
        async with Admin.for_bootstrap(bootstrap) as admin:
            await admin.commit_offsets("cli-group", {TopicPartition(TOPIC, 0): 3})

    asyncio.run(commit())
    described = pier("--bootstrap", bootstrap, "describe", "cli-group", "--json")
    assert described.returncode == 0, described.stderr
    document = json.loads(described.stdout)
    assert document["state"] == "Empty"
    (row,) = document["offsets"]
    assert (row["current_offset"], row["log_end_offset"], row["lag"]) == (3, 10, 7)

    dry = pier(
        "--bootstrap", bootstrap, "reset-offsets", "cli-group", "--topic", TOPIC, "--to-latest"
    )
    assert dry.returncode == 0 and "dry run" in dry.stderr
    done = pier(
        "--bootstrap",
        bootstrap,
        "reset-offsets",
        "cli-group",
        "--topic",
        TOPIC,
        "--to-offset",
        "2",
        "--execute",
    )
    assert done.returncode == 0, done.stderr
    after = json.loads(pier("--bootstrap", bootstrap, "describe", "cli-group", "--json").stdout)
    assert {(r["partition"], r["current_offset"]) for r in after["offsets"]} == {(0, 2), (1, 2)}

    listed = json.loads(pier("--bootstrap", bootstrap, "list", "--json").stdout)
    assert any(g["group"] == "cli-group" and g["state"] == "Empty" for g in listed)
    deleted = pier("--bootstrap", bootstrap, "delete", "cli-group")
    assert deleted.returncode == 0 and "Deleted group 'cli-group'." in deleted.stdout
    again = pier("--bootstrap", bootstrap, "delete", "cli-group")
    assert again.returncode == 1
    assert "does not exist" in error_line(again)


def test_active_group_cannot_be_reset_or_deleted(bootstrap: str) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "cli-active",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([TOPIC])

        def stable() -> bool:  # the consumer's polls run the join
            consumer.poll(0.2)
            described = pier("--bootstrap", bootstrap, "describe", "cli-active", "--json")
            # No coordinator in this broker: no point waiting.
            assert "serves no version" not in described.stderr, described.stderr
            return described.returncode == 0 and json.loads(described.stdout)["state"] == "Stable"

        wait_until(stable, what="cli-active Stable", timeout=WAIT_S, interval=0)
        members = json.loads(
            pier("--bootstrap", bootstrap, "describe", "cli-active", "--json").stdout
        )["members"]
        assert {(a["topic"], a["partition"]) for a in members[0]["assignment"]} == {
            (TOPIC, 0),
            (TOPIC, 1),
        }
        reset = pier(
            "--bootstrap", bootstrap, "reset-offsets", "cli-active", "--all-topics", "--to-earliest"
        )
        assert reset.returncode == 1
        assert "inactive" in error_line(reset)
        deleted = pier("--bootstrap", bootstrap, "delete", "cli-active")
        assert deleted.returncode == 1
        assert "not empty" in error_line(deleted)
    finally:
        consumer.close()
