"""`pier billing stream` as a process: usage appears in the store while it runs, duplicates and
replays count once, and a SIGKILLed stream started again (same checkpoint, same ledger) neither
loses nor doubles a record; SIGTERM ends it with status 0."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from infra.stack import BrokerProcess
from tenancy.usage import HOUR_MS
from tests.integration.billing.helpers import merge, rollups
from tests.integration.billing.usage_gen import traffic, traffic_totals, write
from tests.polling import wait_until

pytestmark = pytest.mark.integration


def _start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)


def _shows(url: str, records: list[object]) -> None:
    wait_until(
        lambda: rollups(url) == merge(traffic_totals(records)),  # type: ignore[arg-type]
        what="the stream's rollups to equal the records written",
        timeout=240,
        retry_on=(OperationalError,),  # SQLite busy while the stream commits
    )


def test_stream_counts_each_record_once_across_a_kill(
    usage_broker: BrokerProcess, sqlite_url: str, tmp_path: Path
) -> None:
    rng = random.Random(51)
    now = int(time.time() * 1000)  # the stream settles at the wall clock: recent usage
    hours = {"base_ms": now - now % HOUR_MS - 2 * HOUR_MS}
    first = traffic(rng, ["acme", "globex"], 120, **hours)
    second = traffic(rng, ["acme", "initech"], 80, first_seq=1_000, **hours)
    third = traffic(rng, ["globex"], 40, first_seq=2_000, **hours)
    argv = [sys.executable, "-m", "pier", "billing", "stream", "--db", sqlite_url,
            "--bootstrap", usage_broker.bootstrap, "--master", "local[1]", "--trigger", "1s"]  # fmt: skip
    log = tmp_path / "stream.log"
    write(usage_broker.bootstrap, first)
    stream = _start(argv, log)
    try:
        _shows(sqlite_url, first)
        write(usage_broker.bootstrap, [*second, *first[:10]])  # a retry: the same ids again
        _shows(sqlite_url, [*first, *second])
    finally:
        stream.kill()
        stream.wait(60)
    write(usage_broker.bootstrap, [*third, *second[:5]])  # written while it is down, a replay
    again = _start(argv, log)
    try:
        _shows(sqlite_url, [*first, *second, *third])
        again.send_signal(signal.SIGTERM)
        assert again.wait(120) == 0, log.read_text()[-3000:]
    finally:
        if again.poll() is None:
            again.kill()
            again.wait(60)
