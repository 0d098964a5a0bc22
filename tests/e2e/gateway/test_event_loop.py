"""`PIER_EVENT_LOOP` (pier/event_loop.py): the broker, the gateway and each of its workers run
on the event loop it names, and serve Kafka clients on it.

A real broker and `pier gateway` with `workers=2`, started with `PIER_EVENT_LOOP=uvloop` and then
with `asyncio`: every ready line (the broker's, the supervisor's, each worker's) names the loop
that is running (`event_loop=...`, read from the running loop's type, not from the setting), and
2 MiB of 1 KiB records produced through the gateway come back whole and in order (the broker
sends fetched regions with sendfile on both loops, the gateway splices them). Where uvloop cannot
be imported the broker runs on asyncio's loop after one `event=event_loop_fallback` line; a value
that names no loop is one line and exit 2.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from infra.probes import free_port
from pier.event_loop import ENV
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
WORKERS = 2
RECORDS = 2048
VALUE = 1024


@pytest.fixture(scope="module", params=["uvloop", "asyncio"])
def loop_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, GatewayStack]]:
    loop: str = request.param
    with pytest.MonkeyPatch.context() as env:
        env.setenv(ENV, loop)  # inherited by the broker, the gateway and its workers
        with GatewayStack(
            tmp_path_factory.mktemp(f"loop-{loop}"), gateway_settings={"workers": str(WORKERS)}
        ) as stack:
            yield loop, stack


def _log(path: Path | None) -> str:
    assert path is not None
    return path.read_text(errors="replace")


def test_every_process_runs_on_the_chosen_loop_and_serves(
    loop_stack: tuple[str, GatewayStack], topic_name: str
) -> None:
    loop, stack = loop_stack
    assert stack.broker is not None and stack.gateway is not None
    assert f"event_loop={loop}" in _log(stack.broker.log_path).split("pier broker ready", 1)[1]
    gateway_log = stack.gateway.log_path

    def ready_lines() -> list[str] | None:
        """The ready lines once all are there (the supervisor's comes after the workers')."""
        text = _log(gateway_log)
        lines = [x for x in text.splitlines() if x.startswith("pier gateway") and " ready " in x]
        return lines if len(lines) > WORKERS else None

    ready = wait_until(
        ready_lines,
        what="the supervisor's and every worker's ready line",
        timeout=60,
    )
    assert ready is not None and len(ready) == WORKERS + 1, (
        ready
    )  # the supervisor's and each worker's
    assert all(line.endswith(f" event_loop={loop}") for line in ready), ready
    values = [i.to_bytes(4, "big") * (VALUE // 4) for i in range(RECORDS)]
    producer = Producer(stack.client_config("acme", "PLAIN", acks="all"))
    for value in values:
        producer.produce(topic_name, value)
    assert producer.flush(60) == 0
    consumer = Consumer(
        stack.client_config("acme", "PLAIN", **{"group.id": "g", "auto.offset.reset": "earliest"})
    )
    consumer.subscribe([topic_name])
    seen: list[bytes] = []
    try:
        while len(seen) < RECORDS:
            message = consumer.poll(10)
            assert message is not None, f"only {len(seen)} of {RECORDS} records arrived"
            assert message.error() is None, message.error()
            seen.append(message.value() or b"")
    finally:
        consumer.close()
    assert seen == values


def _broker(tmp_path: Path, loop: str, prelude: str = "pass") -> subprocess.Popen[bytes]:
    """`pier broker` in a real process, its stderr in `tmp_path/broker.log`; `prelude` runs
    first (to hide uvloop from it)."""
    argv = ["broker", "--data-dir", str(tmp_path / "data"), "--port", str(free_port())]
    code = f"import sys; {prelude}; from pier.cli import main; sys.exit(main({argv!r}))"
    with (tmp_path / "broker.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-c", code],
            env={**os.environ, ENV: loop},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


def test_without_uvloop_the_broker_runs_on_asyncio_after_one_line(tmp_path: Path) -> None:
    broker = _broker(tmp_path, "uvloop", prelude="sys.modules['uvloop'] = None")
    log = tmp_path / "broker.log"
    try:
        wait_until(
            lambda: "pier broker ready" in log.read_text(), what="the ready line", timeout=60
        )
    finally:
        broker.terminate()
        broker.wait(30)
    lines = log.read_text().splitlines()
    ready = [line for line in lines if line.startswith("pier broker ready")]
    assert len(ready) == 1 and ready[0].endswith(" event_loop=asyncio"), lines
    fallbacks = [line for line in lines if "event=event_loop_fallback" in line]
    assert len(fallbacks) == 1 and "wanted=uvloop using=asyncio" in fallbacks[0], lines


def test_a_value_naming_no_loop_is_one_line_and_exit_2(tmp_path: Path) -> None:
    broker = _broker(tmp_path, "tokio")
    assert broker.wait(60) == 2
    assert (tmp_path / "broker.log").read_text().strip().splitlines() == [
        f"pier: error: {ENV}='tokio' is not one of uvloop, asyncio"
    ]
