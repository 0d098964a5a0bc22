"""Every code block of README.md and docs/*.md runs as written against one fresh `infra/up`
(issue 22: "every code block of the README and docs runs in CI exactly as written").

How it runs, and the only liberties it takes:

- **One stack.** `infra/up` (as `python -m infra.up_main`, what the script execs once its venv is
  set up, so a test run never pip-installs into the shared venv) starts once for the module, with
  its defaults but for its ports and state directory: every port is a free one from
  `PIER_PORT_RANGE`, and the state directory is `WORK/.pier`.
- **A user's directory.** The blocks run in `WORK`, a directory holding a symlink to every
  top-level entry of the repository except `.pier`, so `.pier/demo-credentials.json`,
  `infra/reference/kafka` and `$PWD/.pier/tenancy.db` mean what they mean in a clone, and files a
  block writes (`usage.png`) land outside the repository.
- **Ports.** In each block, the whole numbers that are infra/up's default ports (9092-9094, 2181,
  8080, 8082, 9192, 9194-9196, 7170, 7071-7073; `doc_blocks.DEFAULT_PORTS`) are replaced by the
  runner's; nothing else in a block is changed.
- **One terminal per page.** A page's blocks run in order in one `bash` (`set -euo pipefail`), as
  typed into one terminal after `source .venv/bin/activate` (the venv's `bin` first on PATH):
  variables a `sh` block sets carry to the next; a `python` block runs as `python -` from a
  here-document, bounded to 120 s. Pages run in `doc_blocks.doc_pages()` order, each after the
  ones before it, so a page must not depend on another's leftovers but may meet them.

A block that fails fails its page's test with the page, block number, line, the block and what it
printed. Blocks that are not commands, or are marked `<!-- not run: REASON -->`, are skipped here
and counted by tests/unit/test_doc_blocks.py, which also fails on any block neither run nor marked.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from infra.stack import free_port
from tests.e2e.docs.doc_blocks import (
    REPO,
    Block,
    doc_pages,
    page_blocks,
    page_script,
    port_map,
    split_output,
)
from tests.integration.test_launcher import wait_for_output

pytestmark = pytest.mark.e2e
START_S = 180.0  # ZooKeeper, three brokers, the admin API, the gateway, on two busy cores
STOP_S = 90.0
PAGE_S = 420.0  # the longest page, with Kafka's tools fetched from the cache and JVMs started
OUTPUT_TAIL = 4000

# What each page's output must show besides a clean exit: evidence the blocks did their work.
EXPECTED: dict[str, list[str]] = {
    "README.md": [
        "b'hello'",
        "b'hello again'",
        "b'hello from aiokafka'",
        "({'user': 7}, {'hi': 2})",
        "greetings",
    ],
    "docs/clients.md": ["b'hello'", "Deleted group 'demo'", "k1"],
    "docs/gateway-http.md": [
        '"topic_name":"orders"',
        "KafkaConsumerGroupLagSummary",
        "{'customer': 7} {'id': 1}",
    ],
    "docs/admin-api.md": ["producer_byte_rate", "User:sa-", "revoked_at"],
    "docs/billing.md": ['"invoice_id": "demo-', '"items": ['],
    "docs/cluster.md": [
        "UNDER-REPLICATED PARTITIONS: 0",
        "REASSIGNMENTS IN PROGRESS",
        "inventory-0",
    ],
}


@dataclass
class DocStack:
    """The running `infra/up`, the directory the blocks run in, and its port for each default."""

    work: Path
    ports: dict[str, int]
    env: dict[str, str]


def _free_run(count: int, taken: set[int]) -> int:
    """The first of `count` consecutive ports that are all free now and not in `taken`."""
    for _ in range(100):
        first = free_port()
        run = set(range(first, first + count))
        if run & taken:
            continue
        if all(_bindable(port) for port in run):
            taken |= run
            return first
    raise AssertionError(f"no {count} consecutive free ports")


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def choose_ports() -> dict[str, int]:
    taken: set[int] = set()
    return {
        "broker": _free_run(3, taken),
        "metrics": _free_run(3, taken),
        "gateway": _free_run(5, taken),  # bootstrap, then broker N on bootstrap + 1 + N
        "zookeeper": _free_run(1, taken),
        "admin": _free_run(1, taken),
        "http": _free_run(1, taken),
        "gateway_metrics": _free_run(1, taken),
    }


def user_directory(work: Path) -> None:
    """`work` looks like a clone: a symlink to each top-level entry of the repository but `.pier`."""
    work.mkdir()
    for entry in REPO.iterdir():
        if entry.name != ".pier":
            (work / entry.name).symlink_to(entry)


def up_argv(root: Path, ports: dict[str, int]) -> list[str]:
    argv = [sys.executable, "-m", "infra.up_main", "--root", str(root)]
    argv += ["--port", str(ports["broker"]), "--metrics-port", str(ports["metrics"])]
    argv += ["--zookeeper-port", str(ports["zookeeper"]), "--admin-port", str(ports["admin"])]
    argv += ["--gateway-port", str(ports["gateway"]), "--gateway-http-port", str(ports["http"])]
    argv += ["--gateway-metrics-port", str(ports["gateway_metrics"])]
    return argv


def terminal_env() -> dict[str, str]:
    """The environment of a terminal after `source .venv/bin/activate`, without our test knobs
    that a user would not have set (PIER_PORT_RANGE stays: `infra.stack` examples pick from it)."""
    venv = Path(sys.executable).parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIER_ADMIN_", "PYTEST"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


@pytest.fixture(scope="module")
def doc_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocStack]:
    base = tmp_path_factory.mktemp("doc-blocks")
    work = base / "work"
    user_directory(work)
    ports = choose_ports()
    output = base / "up.out"
    with output.open("wb") as sink:
        process = subprocess.Popen(
            up_argv(work / ".pier", ports),
            cwd=REPO,
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        wait_for_output(output, process, "Press Ctrl-C", timeout=START_S)
        yield DocStack(work, ports, terminal_env())
        assert process.poll() is None, f"infra/up exited during the run:\n{output.read_text()}"
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=STOP_S) == 0, output.read_text()[-OUTPUT_TAIL:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def failure_report(blocks: list[Block], output: str, status: int) -> str:
    """Which block failed (the last one that started), its text, and what it printed."""
    pieces = split_output(output)
    started = [key for key in pieces if key.isdigit()]
    if not started:
        return f"the page's script failed before its first block (exit {status}):\n{output}"
    block = next(b for b in blocks if str(b.number) == started[-1])
    return (
        f"{block.name} failed (exit {status}):\n{block.text}\n--- it printed:\n"
        f"{pieces[started[-1]][-OUTPUT_TAIL:]}"
    )


def run_page(page: str, stack: DocStack) -> dict[str, str]:
    """Run the page's blocks; the output of each run block by number. Fails naming the block."""
    blocks = page_blocks(page)
    mapping = port_map(stack.ports)
    script = page_script(blocks, mapping)
    try:
        ran = subprocess.run(
            ["bash", "-c", script],
            cwd=stack.work,
            env=stack.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=PAGE_S,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        printed = expired.output if isinstance(expired.output, str) else ""
        pytest.fail(
            f"{page} still running after {PAGE_S:.0f} s: " + failure_report(blocks, printed, -1)
        )
    if ran.returncode != 0 or "end" not in split_output(ran.stdout):
        pytest.fail(failure_report(blocks, ran.stdout, ran.returncode))
    return split_output(ran.stdout)


def pages_with_commands() -> list[str]:
    return [page for page in doc_pages() if any(b.kind == "run" for b in page_blocks(page))]


@pytest.mark.parametrize("page", pages_with_commands())
def test_every_block_of_the_page_runs_as_written(page: str, doc_stack: DocStack) -> None:
    outputs = run_page(page, doc_stack)
    printed = "".join(outputs.values())
    missing = [text for text in EXPECTED.get(page, []) if text not in printed]
    assert not missing, (
        f"{page}'s blocks ran but did not print {missing}:\n{printed[-OUTPUT_TAIL:]}"
    )
    # aiokafka's warning for PLAIN over plaintext: the examples use SCRAM, whose password never
    # crosses the wire.
    assert "in the clear" not in printed, printed[-OUTPUT_TAIL:]
    if page == "docs/gateway-http.md":
        check_http_examples(printed)


def json_values(text: str) -> list[object]:
    """The JSON values curl printed back to back (answers carry no trailing newline), skipping
    lines that are not JSON (the SDK example's print)."""
    decoder = json.JSONDecoder()
    values: list[object] = []
    position = 0
    while position < len(text):
        if text[position].isspace():
            position += 1
            continue
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            end = text.find("\n", position)
            position = len(text) if end < 0 else end + 1
            continue
        values.append(value)
    return values


def check_http_examples(printed: str) -> None:
    """What the curl examples of docs/gateway-http.md must have done (issue 15's acceptance):
    the topic, three produced records, the records read back with their header, zero lag."""
    documents = json_values(printed)
    topic = next(d for d in documents if isinstance(d, dict) and d.get("kind") == "KafkaTopic")
    assert topic["topic_name"] == "orders" and topic["partitions_count"] == 3
    produced = [d for d in documents if isinstance(d, dict) and d.get("error_code") == 200]
    assert len(produced) == 3 and produced[1]["partition_id"] == 0, produced
    records = next(d for d in documents if isinstance(d, list) and d and "headers" in d[0])
    assert len(records) == 3
    assert {"name": "trace", "value": "YWJj"} in [h for r in records for h in r["headers"]]
    summary = next(
        d
        for d in documents
        if isinstance(d, dict) and d.get("kind") == "KafkaConsumerGroupLagSummary"
    )
    assert summary["consumer_group_id"] == "billing" and summary["total_lag"] == 0
