"""The copier scenario of test_copier_cluster against Apache Kafka 4.1.1 (3 KRaft nodes): the proof
that the copier, the kill rounds and the checks hold on Kafka itself, so a failure on Pier is
Pier's. Same plan and checks; the bounced node is node 2 (Kafka's transaction coordinator
placement is not asked for: any node going away moves leaders and replicas). Slow (three JVMs);
run with `--run-slow` when the copier or its checks change.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infra import reference_kafka as rk
from tests.e2e.transactions.copy_run import CLUSTER_PLAN as PLAN
from tests.e2e.transactions.copy_run import CopyRun, bounce_copiers

pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.timeout(900)]


def test_the_copier_scenario_holds_on_apache_kafka(tmp_path: Path) -> None:
    cluster = rk.start_kafka(tmp_path / "kafka", nodes=3, heap="512m", jvm_flags=rk.QUICK_JVM_FLAGS)
    try:
        run = CopyRun(cluster.bootstrap, PLAN, tmp_path / "copy")
        bounced = cluster.nodes[1]

        def bounce(round_number: int) -> None:
            if round_number == 0:
                bounced.stop()
            elif round_number == 1:
                bounced.start()

        try:
            run.create_topics()
            run.seed()
            run.start()
            bounce_copiers(run.copiers, PLAN, bounce)
            report = run.check(run.wait_done())
        finally:
            run.close()
    finally:
        cluster.close()
    print(f"\nApache Kafka: {report.summary()}")
