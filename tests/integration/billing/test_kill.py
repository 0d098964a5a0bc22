"""`pier billing run` SIGKILLed at several points (Spark starting, reading, rolling up, around the
commit), then run to the end: the totals are those of one clean run."""

from __future__ import annotations

import random
import subprocess
import sys
import time

import pytest

from infra.stack import BrokerProcess
from tests.integration.billing.helpers import merge, rollups
from tests.integration.billing.test_cli import pier
from tests.integration.billing.usage_gen import (
    storage,
    storage_totals,
    traffic,
    traffic_totals,
    write,
)

pytestmark = pytest.mark.integration  # in CI: the issue asks for it there (~80 s)


def test_killed_runs_then_a_clean_one_count_everything_once(
    usage_broker: BrokerProcess, sqlite_url: str
) -> None:
    rng = random.Random(41)
    records = traffic(rng, ["acme", "globex"], 400)
    samples = storage(
        "acme", "orders", 0, [(1_767_225_600_000 + i * 60_000, 10 * i) for i in range(30)]
    )
    write(usage_broker.bootstrap, [*records, *samples])
    argv = [sys.executable, "-m", "pier", "billing", "run", "--db", sqlite_url,
            "--bootstrap", usage_broker.bootstrap, "--until", "1767265200000"]  # fmt: skip
    outcomes = []
    for delay in (2.0, 6.0, 9.0, 12.0, 15.0):
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        process.kill()
        outcomes.append(process.wait())
    done = pier(*argv[3:])
    assert done.returncode == 0, done.stderr[-2000:]
    expected = merge(traffic_totals(records), storage_totals(samples, 60_000, 1_767_265_200_000))
    assert rollups(sqlite_url) == expected, outcomes
