"""A running `infra/up` in its default shape (ZooKeeper, three brokers, the admin API, the gateway;
the billing rollup left out: test_up_cluster.py covers it), as a new user meets it (issue 22):
- the HTTP v3 produce right after the topic's creation never answers 404, whether the topic was
  made over HTTP or by a Kafka client through the gateway; a topic that does not exist is still 404;
- every client snippet infra/up printed runs as pasted, with nothing on stderr (no aiokafka or
  kafka-python warning about credentials in the clear; the admin API's block is run by
  test_up_admin.py);
- a second `infra/up` on the same state dir starts nothing: it says Pier is already running there,
  with the launcher's PID and the URLs, and exits 3; one on another state dir whose ports are taken
  names the port and its option and exits 1.
One stack for the module; `python -m infra.up_main` is what the `infra/up` script execs.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from infra.stack import free_port
from tests.integration.test_up_cluster import REPO, consecutive_free_ports, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ATTEMPTS = 10  # create-then-produce rounds; before the fix 3 of 3 answered 404 on a cluster
SNIPPET_S = 90.0


@dataclass
class RunningUp:
    process: subprocess.Popen[bytes]
    argv: list[str]
    root: Path
    printed: str
    http: str
    gateway: str
    admin: str

    def credentials(self) -> dict[str, str]:
        found: dict[str, str] = json.loads((self.root / "demo-credentials.json").read_text())
        return found


def _argv(root: Path) -> tuple[list[str], dict[str, int]]:
    port = consecutive_free_ports(3)
    ports = {"port": port, "zookeeper": free_port(), "admin": free_port(), "http": free_port()}
    taken = {port, port + 1, port + 2, *ports.values()}
    gateway = consecutive_free_ports(5)
    while taken & set(range(gateway, gateway + 5)):
        gateway = consecutive_free_ports(5)
    ports["gateway"] = gateway
    argv = [sys.executable, "-m", "infra.up_main", "--root", str(root)]
    argv += ["--port", str(port), "--zookeeper-port", str(ports["zookeeper"])]
    argv += ["--metrics-port", "0", "--admin-port", str(ports["admin"])]
    argv += ["--gateway-port", str(gateway), "--gateway-metrics-port", "0"]
    argv += ["--gateway-http-port", str(ports["http"]), "--no-billing"]
    return argv, ports


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningUp]:
    base = tmp_path_factory.mktemp("up-running")
    argv, ports = _argv(base / "state")
    output = base / "up.out"
    with output.open("wb") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        printed = wait_for(output, process, "Press Ctrl-C")
        yield RunningUp(
            process,
            argv,
            base / "state",
            printed,
            http=f"http://127.0.0.1:{ports['http']}",
            gateway=f"127.0.0.1:{ports['gateway']}",
            admin=f"http://127.0.0.1:{ports['admin']}",
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=90) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


# -- HTTP produce right after a topic's creation (item 6) ---------------------------------------
def _session(up: RunningUp) -> tuple[requests.Session, str]:
    creds = up.credentials()
    session = requests.Session()
    session.auth = (creds["key_id"], creds["secret"])
    cluster_id = session.get(f"{up.http}/v3/clusters", timeout=30).json()["data"][0]["cluster_id"]
    return session, f"{up.http}/v3/clusters/{cluster_id}"


def _produce(session: requests.Session, cluster: str, topic: str) -> requests.Response:
    record = {"value": {"type": "STRING", "data": "right after create"}}
    return session.post(f"{cluster}/topics/{topic}/records", json=record, timeout=60)


def test_http_produce_right_after_an_http_create_never_answers_404(up: RunningUp) -> None:
    session, cluster = _session(up)
    for _ in range(ATTEMPTS):
        topic = f"fresh-{uuid.uuid4().hex[:8]}"
        body: dict[str, Any] = {"topic_name": topic, "partitions_count": 3}
        created = session.post(f"{cluster}/topics", json=body, timeout=60)
        assert created.status_code == 201, created.text
        # The create answered once this gateway saw the topic led: its partitions show leaders.
        listed = session.get(f"{cluster}/topics/{topic}/partitions", timeout=60)
        assert listed.status_code == 200, f"{topic}: {listed.text}"
        assert [p["leader_id"] >= 0 for p in listed.json()["data"]] == [True] * 3, listed.text
        produced = _produce(session, cluster, topic)
        assert produced.status_code == 200, f"{topic}: {produced.text}"
        assert produced.json()["error_code"] == 200


def test_http_produce_right_after_a_kafka_client_create_never_answers_404(up: RunningUp) -> None:
    creds = up.credentials()
    admin = AdminClient(
        {
            "bootstrap.servers": up.gateway,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": creds["key_id"],
            "sasl.password": creds["secret"],
        }
    )
    session, cluster = _session(up)
    for _ in range(ATTEMPTS // 2):
        topic = f"kafka-made-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(topic, num_partitions=3)])[topic].result(60)
        produced = _produce(session, cluster, topic)
        assert produced.status_code == 200, f"{topic}: {produced.text}"


def test_http_produce_to_a_topic_that_does_not_exist_is_still_404(up: RunningUp) -> None:
    session, cluster = _session(up)
    produced = _produce(session, cluster, "never-created")
    assert produced.status_code == 404, produced.text
    assert produced.json()["error_code"] == 40401


# -- the printed snippets (item 10's warnings) ------------------------------------------------
PYTHON_CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")


def printed_snippets(printed: str) -> dict[str, str]:
    """Each `--- name ---` section infra/up printed: name → its text up to the next section or
    the first blank line after a line that is not code (the snippet ends at a blank line that
    precedes plain text)."""
    sections: dict[str, str] = {}
    parts = re.split(r"^--- (.+?) ---$", printed, flags=re.MULTILINE)
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = body.strip("\n").splitlines()
        end = next(
            (
                i
                for i, line in enumerate(lines)
                if re.match(r"^(infra/up|Pier is up|\w[\w ]*: )", line)
            ),
            len(lines),
        )
        sections[name] = "\n".join(lines[:end]).strip() + "\n"
    return sections


def _run(kind: str, text: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = (
        [sys.executable, "-c", text]
        if kind == "python"
        else ["bash", "-eo", "pipefail", "-c", text]
    )
    return subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=SNIPPET_S, check=False
    )


@pytest.mark.parametrize(
    "name",
    [
        *PYTHON_CLIENTS,
        "kcat",
        *(f"{client} (SASL)" for client in PYTHON_CLIENTS),
        "kcat (SASL)",
    ],
)
def test_each_printed_client_snippet_runs_as_pasted_without_a_warning(
    up: RunningUp, name: str
) -> None:
    snippet = printed_snippets(up.printed)[name]
    done = _run("bash" if name.startswith("kcat") else "python", snippet, REPO)
    detail = f"{name}:\n{snippet}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 0, detail
    assert "hello" in done.stdout, detail
    assert done.stderr.strip() == "", detail


# -- a second infra/up (item 10) ----------------------------------------------------------------
def test_a_second_up_on_the_same_state_dir_says_what_runs_and_exits_3(up: RunningUp) -> None:
    again = subprocess.run(
        up.argv, cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    detail = f"stdout:\n{again.stdout}\nstderr:\n{again.stderr}"
    assert again.returncode == 3, detail
    assert (
        f"Pier is already running from {up.root} (launcher pid {up.process.pid}); nothing started"
        in again.stdout
    ), detail
    for url in (up.gateway, up.http, up.admin, f"{up.admin}/console/", f"{up.http}/console/"):
        assert url in again.stdout, detail
    assert "Pier is up" not in again.stdout, detail
    assert up.process.poll() is None  # the running stack is untouched


def test_a_second_up_elsewhere_names_the_taken_port_and_its_option(
    up: RunningUp, tmp_path: Path
) -> None:
    argv = list(up.argv)
    argv[argv.index("--root") + 1] = str(tmp_path / "other")
    again = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    port = argv[argv.index("--zookeeper-port") + 1]
    assert again.returncode == 1, again.stderr
    assert (
        f"infra/up: port {port} on 127.0.0.1 is in use by another program;"
        " pick another with --zookeeper-port"
    ) in again.stderr, again.stderr
    assert not (tmp_path / "other" / "zookeeper").exists()  # nothing was started
