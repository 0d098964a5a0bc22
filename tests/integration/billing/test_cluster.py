"""`pier billing run --master spark://...` on a real standalone cluster: executors (worker JVMs)
read `__usage` from the broker themselves, with the Kafka source's jars the driver serves them."""

from __future__ import annotations

import random
from typing import Any

import pytest

from infra.stack import BrokerProcess
from tests.integration.billing.helpers import rollups
from tests.integration.billing.test_cli import pier
from tests.integration.billing.usage_gen import traffic, traffic_totals, write

pytestmark = pytest.mark.integration  # in CI: the issue asks for it there (~80 s)


def test_run_on_a_standalone_cluster(
    spark_cluster: Any, usage_broker: BrokerProcess, sqlite_url: str
) -> None:
    records = traffic(random.Random(31), ["acme", "globex", "initech"], 120)
    write(usage_broker.bootstrap, [*records, *records[:7]])
    done = pier(
        "billing", "run", "--master", spark_cluster.master_url, "--db", sqlite_url,
        "--bootstrap", usage_broker.bootstrap, timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert '"duplicates": 7' in done.stdout
    assert rollups(sqlite_url) == traffic_totals(records)
