"""`infra/up` in its default shape: a real ZooKeeper, three real brokers in ZooKeeper mode and the
admin API, on free ports under a tmp root; an RF-3 topic round trip with confluent-kafka, the
printed `pier cluster` command, then SIGTERM and every child gone.

Runs `python -m infra.up_main`, which is what the `infra/up` script execs (see test_up_admin.py).
"""

from __future__ import annotations

import json
import shlex
import signal
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from infra.probes import port_in_use
from infra.process import pid_running
from infra.stack import free_port
from tests.integration.test_launcher import children_of, wait_for_output
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(360)]

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 90.0
USAGE_S = 180.0  # the billing stream's Spark JVM start and first micro-batch, on two busy cores
RECORDS = 20


def consecutive_free_ports(count: int) -> int:
    """A port P with P..P+count-1 all free now (the brokers' ports follow `--port`)."""
    for _ in range(50):
        base = free_port()
        if not any(port_in_use("127.0.0.1", base + i) for i in range(1, count)):
            return base
    raise AssertionError("no run of free ports found")


def wait_for(output: Path, process: subprocess.Popen[bytes], text: str) -> str:
    """Until infra/up has printed `text` to `output`; all it printed (test_up_crash_restart.py
    waits with this too)."""
    return wait_for_output(output, process, text, timeout=WAIT_S)


def kinds(pids: dict[int, str]) -> list[str]:
    def kind(cmd: str) -> str:
        if "ZooKeeperServerMain" in cmd:
            return "zookeeper"
        if " gateway " in cmd:
            return "gateway"
        if " billing stream " in cmd:
            return "billing"
        return "admin-api" if " admin-api " in cmd else "broker" if " broker " in cmd else cmd

    return sorted(kind(cmd) for cmd in pids.values())


def run_printed_cluster_command(printed: str) -> dict[str, object]:
    """The `pier cluster --bootstrap a,b,c` line infra/up printed, run with `--json`."""
    lines = printed.splitlines()
    (line,) = [line for line in lines if " cluster --bootstrap " in line and "--json" not in line]
    argv = [*shlex.split(line.split("#", 1)[0]), "--json"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def round_trip(bootstrap: str) -> None:
    topic = f"up-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(topic, f"record-{i}".encode(), partition=i % 3)
    assert producer.flush(60) == 0
    meta = admin.list_topics(topic, timeout=30).topics[topic]
    assert all(len(p.replicas) == 3 for p in meta.partitions.values())
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    seen: set[bytes] = set()

    def all_read() -> bool:
        for message in consumer.consume(RECORDS, timeout=1.0):
            if message.error() is not None:
                raise KafkaException(message.error())
            seen.add(message.value() or b"")
        return len(seen) >= RECORDS

    try:
        wait_until(all_read, what=f"{RECORDS} records read back", timeout=60, interval=0)
    finally:
        consumer.close()
    assert seen == {f"record-{i}".encode() for i in range(RECORDS)}


def demo_round_trip(gateway: str, credentials_file: Path) -> None:
    """The demo tenant's key (saved 0600, never printed) produces and reads through the gateway."""
    assert stat.S_IMODE(credentials_file.stat().st_mode) == 0o600
    creds = json.loads(credentials_file.read_text())
    config = {
        "bootstrap.servers": gateway,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": creds["key_id"],
        "sasl.password": creds["secret"],
    }
    topic = f"demo-{uuid.uuid4().hex[:8]}"
    producer = Producer({**config, "acks": "all"})
    producer.produce(topic, b"through the gateway")
    assert producer.flush(60) == 0
    consumer = Consumer({**config, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])

    def record_back() -> bytes | None:
        message = consumer.poll(1.0)
        if message is not None and message.error() is not None:
            raise KafkaException(message.error())
        return None if message is None else message.value()

    try:
        value = wait_until(record_back, what="the demo record read back", timeout=60, interval=0)
    finally:
        consumer.close()
    assert value == b"through the gateway"
    topics = AdminClient(config).list_topics(timeout=30).topics
    assert topic in topics and not any(name.startswith("demo_") for name in topics)


def demo_usage_rolled_up(state: Path) -> None:
    """infra/up's rollup turns the demo traffic into usage without any command being run."""
    argv = [
        sys.executable,
        "-m",
        "pier",
        "billing",
        "usage",
        "--db",
        f"sqlite:///{state / 'tenancy.db'}",
    ]
    argv += ["--tenant", "demo", "--from", "2000-01-01", "--to", "2100-01-01"]

    def bytes_in() -> int:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        return sum(int(json.loads(line)["bytes_in"]) for line in done.stdout.splitlines())

    try:
        wait_until(bytes_in, what="demo usage with bytes_in > 0", timeout=USAGE_S, interval=1.0)
    except AssertionError as error:
        log = (state / "billing.log").read_text() if (state / "billing.log").exists() else ""
        raise AssertionError(f"{error}; billing.log:\n{log[-3000:]}") from error


def test_up_runs_zookeeper_and_three_brokers_and_stops_them_all(tmp_path: Path) -> None:
    port = consecutive_free_ports(3)
    zookeeper_port, admin_port = free_port(), free_port()
    taken = {port, port + 1, port + 2, zookeeper_port, admin_port}
    gateway_port = consecutive_free_ports(5)
    while taken & set(range(gateway_port, gateway_port + 5)):  # not yet bound: keep apart
        gateway_port = consecutive_free_ports(5)
    argv = [sys.executable, "-m", "infra.up_main", "--root", str(tmp_path / "state")]
    argv += ["--port", str(port), "--zookeeper-port", str(zookeeper_port), "--metrics-port", "0"]
    argv += ["--admin-port", str(admin_port)]
    argv += ["--gateway-port", str(gateway_port), "--gateway-metrics-port", "0"]
    argv += ["--billing-every", "5s"]
    argv += ["--broker-config", "zookeeper.session.timeout.ms=6000"]
    output = tmp_path / "up.out"
    with output.open("wb") as sink:
        up = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        printed = wait_for(output, up, "Press Ctrl-C")
        bootstrap = ",".join(f"127.0.0.1:{port + i}" for i in range(3))
        assert f"bootstrap.servers: {bootstrap}" in printed
        for node_id in (1, 2, 3):
            assert f"broker {node_id}: 127.0.0.1:{port + node_id - 1}" in printed
        assert f"kcat -b {bootstrap} -L" in printed
        report = run_printed_cluster_command(printed)
        assert [b["id"] for b in report["brokers"]] == [1, 2, 3]  # type: ignore[attr-defined]
        assert report["controller"] in (1, 2, 3)
        round_trip(bootstrap)
        assert run_printed_cluster_command(printed)["under_replicated"] == []
        assert f"gateway: 127.0.0.1:{gateway_port}" in printed
        demo_round_trip(f"127.0.0.1:{gateway_port}", tmp_path / "state" / "demo-credentials.json")
        demo_usage_rolled_up(tmp_path / "state")

        children = children_of(up.pid)
        assert kinds(children) == [
            "admin-api",
            "billing",
            "broker",
            "broker",
            "broker",
            "gateway",
            "zookeeper",
        ]
        # The record a second `infra/up` finds the running stack by (infra/up_state.py).
        record = json.loads((tmp_path / "state" / "stack.json").read_text())
        assert record["launcher"]["pid"] == up.pid
        assert sorted(p["pid"] for p in record["processes"]) == sorted(children)
        assert all(p["running"] for p in record["processes"])
        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=WAIT_S) == 0
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    assert not any(pid_running(pid) for pid in children)
    for node_id in (1, 2, 3):  # each broker went through its clean shutdown
        assert (tmp_path / "state" / f"broker-{node_id}" / "data" / ".kafka_cleanshutdown").exists()
    assert "infra/up: stopped." in output.read_text()
    assert not (tmp_path / "state" / "stack.json").exists()
