"""`pier billing stream` as a process: usage appears in the store while it runs, duplicates and
replays count once, and a SIGKILLed stream started again (same checkpoint, same ledger) neither
loses nor doubles a record; SIGTERM ends it with status 0; the offsets its last micro-batch
committed are the ones Spark's offset log gave that batch (`batch_end`, no Spark job)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from billing.rollup.ledger import read_cursor
from billing.rollup.stream import batch_end
from infra.stack import BrokerProcess
from tenancy.database import Database
from tenancy.usage import HOUR_MS, USAGE_TOPIC, TrafficRecord
from tests.integration.billing.helpers import merge, rollups, state_dir
from tests.integration.billing.usage_gen import PARTITIONS, traffic, traffic_totals, write
from tests.polling import wait_until

pytestmark = pytest.mark.integration


def _start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)


def _shows(url: str, records: Sequence[TrafficRecord]) -> None:
    wait_until(
        lambda: rollups(url) == merge(traffic_totals(records)),
        what="the stream's rollups to equal the records written",
        timeout=240,
        retry_on=(OperationalError,),  # SQLite busy while the stream commits
    )


def test_stream_counts_each_record_once_across_a_kill(
    usage_broker: BrokerProcess, sqlite_url: str, tmp_path: Path
) -> None:
    rng = random.Random(51)
    now = int(time.time() * 1000)  # the stream settles at the wall clock: recent usage
    base_ms = now - now % HOUR_MS - 2 * HOUR_MS
    first = traffic(rng, ["acme", "globex"], 120, base_ms=base_ms)
    second = traffic(rng, ["acme", "initech"], 80, first_seq=1_000, base_ms=base_ms)
    third = traffic(rng, ["globex"], 40, first_seq=2_000, base_ms=base_ms)
    argv = [sys.executable, "-m", "pier", "billing", "stream", "--db", sqlite_url,
            "--bootstrap", usage_broker.bootstrap, "--master", "local[1]", "--trigger", "1s"]  # fmt: skip
    log = tmp_path / "stream.log"
    write(usage_broker.bootstrap, first)
    stream = _start(argv, log)
    try:
        _shows(sqlite_url, first)
        _every_partition_committed(log)
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
        _committed_the_logged_end(sqlite_url)
    finally:
        if again.poll() is None:
            again.kill()
            again.wait(60)


def _every_partition_committed(log: Path) -> None:
    """Each micro-batch commits an end offset for every partition, those without records too
    (`batch_end`: the offset log's, not the offsets after the records seen)."""

    def reported() -> list[dict[str, Any]]:  # the line comes a moment after the commit
        return [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]

    wait_until(reported, what="the stream to report its micro-batch", timeout=60)
    for line in reported():
        assert sorted(line["end_offsets"]) == sorted(str(p) for p in range(PARTITIONS)), line


def _committed_the_logged_end(url: str) -> None:
    checkpoint = state_dir(url) / USAGE_TOPIC / "stream-checkpoint"
    last = max(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    db = Database(url)
    try:
        cursor = read_cursor(db, USAGE_TOPIC)
    finally:
        db.dispose()
    assert cursor is not None
    logged = batch_end(str(checkpoint), last, USAGE_TOPIC)
    assert logged == cursor.offsets, (logged, cursor.offsets)
