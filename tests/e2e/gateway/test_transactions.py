"""Transactions through the gateway: two tenants, the same transactional ids, no fencing (issue 14).

Tenants `acme` (SASL PLAIN) and `bolt` (SCRAM-SHA-256) each run the transactional copier of
tests/e2e/transactions (confluent-kafka: read_committed input, send_offsets_to_transaction,
transactions of 750, deliberate aborts) at the same time with the SAME names: topics
`copy-input` / `copy-output`, group `transactions-test-consumer-group`, transactional ids
`copier-0` / `copier-1`. Each copier is SIGKILLed 3 times after ≥ 20 % progress and restarted —
each restart's InitProducerId bumps the epoch of its own tenant's id only. If the gateway did not
keep the ids apart, the other tenant's copier would be fenced (PRODUCER_FENCED, fatal) or would
complete the other's transactions; instead both copies complete and both outputs are exact
(read_committed = input, no duplicates, per-key order, atomic transactions, a concurrent
read_committed reader seeing exactly the committed output). Every transactional request goes
through the gateway's filters: FindCoordinator (key type 1), InitProducerId, AddPartitionsToTxn,
Produce with a transactional id, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, and Fetch's aborted
transactions. Afterwards ListTransactions / DescribeTransactions as each tenant list exactly its
own two ids, unprefixed, with producer ids of its own, while the broker holds all four, prefixed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.kafka.namespace import TenantNamespace
from tests.e2e.gateway.clients import security_settings
from tests.e2e.gateway.sasl_wire import login
from tests.e2e.raw_wire import RawConnection
from tests.e2e.transactions.copy_run import CopyPlan, CopyRun, bounce_copiers
from tests.e2e.transactions.txn_wire import describe_transactions, list_transactions
from tests.gateway_stack import GatewayStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

TENANTS = {"acme": "PLAIN", "bolt": "SCRAM-SHA-256"}
PLAN = CopyPlan(records=50_000)  # per tenant; 3 kill rounds, transactions of 750
IDS = {"copier-0", "copier-1"}


@pytest.fixture(scope="module")
def gateway_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    root = tmp_path_factory.mktemp("gateway-transactions")
    broker_config = {"group.initial.rebalance.delay.ms": "0"}
    with GatewayStack(root, broker_config=broker_config) as stack:
        yield stack


def tenant_run(stack: GatewayStack, tenant: str, root: Path) -> CopyRun:
    settings = security_settings("confluent-kafka", stack.credentials[tenant], TENANTS[tenant])
    return CopyRun(stack.bootstrap, PLAN, root / tenant, settings=settings)


def test_two_tenants_copy_with_the_same_transactional_ids_without_fencing(
    gateway_stack: GatewayStack, tmp_path: Path
) -> None:
    runs = {tenant: tenant_run(gateway_stack, tenant, tmp_path) for tenant in TENANTS}
    try:
        for run in runs.values():
            run.create_topics()
            run.seed()
        for run in runs.values():
            run.start()
        bounce_copiers([c for run in runs.values() for c in run.copiers], PLAN)
        seconds = {tenant: run.wait_done() for tenant, run in runs.items()}
        reports = {tenant: run.check(seconds[tenant]) for tenant, run in runs.items()}
    finally:
        for run in runs.values():
            run.close()
    for tenant, report in reports.items():
        assert report.kills == PLAN.kill_rounds * PLAN.input_partitions
        print(f"\n{tenant} through the gateway: {report.summary()}")

    producer_ids = {}
    for tenant in TENANTS:
        with login(gateway_stack, tenant) as wire:
            listed = list_transactions(wire)
            assert set(listed) == IDS, f"{tenant} lists {sorted(listed)}"
            described = describe_transactions(wire, sorted(IDS))
        assert {t: s.error_code for t, s in described.items()} == dict.fromkeys(IDS, 0)
        assert all(listed[t][0] == described[t].producer_id for t in IDS)
        producer_ids[tenant] = {listed[t][0] for t in IDS}
    assert not producer_ids["acme"] & producer_ids["bolt"], f"shared producer ids {producer_ids}"
    assert gateway_stack.broker is not None
    namespaces = [TenantNamespace(tenant) for tenant in TENANTS]
    with RawConnection(gateway_stack.broker.host, gateway_stack.broker.port) as broker:
        on_broker = list_transactions(broker)
    tenants_ids = {t for t in on_broker if t.startswith(tuple(n.prefix for n in namespaces))}
    assert tenants_ids == {n.fleet(t) for n in namespaces for t in IDS}
