"""The transaction APIs' handlers over a real standalone Broker (no listener): FindCoordinator key
type 1, InitProducerId, AddPartitionsToTxn (v0–3 from clients, v4 batched and verify-only),
AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions. Every served version's
response must encode and decode losslessly and carry the coordinator's answer, with
PRODUCER_FENCED turned into INVALID_PRODUCER_EPOCH for the versions before it existed."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from kio.serial import entity_reader

from brokers.app.runtime import Broker
from brokers.app.standalone import build_standalone
from brokers.common.clock import ManualClock
from brokers.common.config import BrokerConfig
from brokers.coordinator.transactions import TRANSACTION_STATE_TOPIC
from brokers.server.context import RequestContext
from brokers.wire.errors import ErrorCode
from brokers.wire.headers import RequestHeader
from brokers.wire.messages import encode_entity
from tests.unit.handlers.admin_harness import entity

pytestmark = pytest.mark.unit
E = ErrorCode
FIND, INIT, ADD_PARTITIONS, ADD_OFFSETS, END = 10, 22, 24, 25, 26
DESCRIBE, LIST = 65, 66
TIMEOUT = datetime.timedelta(seconds=60)


@dataclasses.dataclass
class Api:
    broker: Broker

    async def call(self, api_key: int, version: int, name: str, **fields: Any) -> Any:
        route = self.broker.routes.get(api_key)
        assert route is not None and route.serves(version), (api_key, version)
        request = entity(api_key, version, name, **fields)
        ctx = RequestContext(RequestHeader(api_key, version, 1, "tester"), "10.0.0.1", "c1")
        response: Any = await route.handler(ctx, request)
        assert type(response).__version__ == version
        decoded, _ = entity_reader(type(response))(encode_entity(response), 0)
        assert decoded == response
        return response

    async def init(self, tid: str, version: int = 5, **fields: Any) -> Any:
        return await self.call(
            INIT, version, "InitProducerIdRequest",
            transactional_id=tid, transaction_timeout=TIMEOUT, **fields,
        )  # fmt: skip

    async def add(self, version: int, tid: str, pid: int, epoch: int, *parts: int) -> Any:
        topic = entity(ADD_PARTITIONS, version, "AddPartitionsToTxnTopic", name="t",
                       partitions=parts)  # fmt: skip
        return await self.call(
            ADD_PARTITIONS, version, "AddPartitionsToTxnRequest",
            v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch, v3_and_below_topics=(topic,),
        )  # fmt: skip

    async def end(self, version: int, tid: str, pid: int, epoch: int, commit: bool) -> Any:
        return await self.call(
            END, version, "EndTxnRequest",
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit,
        )  # fmt: skip

    async def settle(self) -> None:
        await asyncio.wait_for(self.broker.transactions.coordinator.completion.wait_idle(), 10)


@asynccontextmanager
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    properties = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"}
    config = BrokerConfig(data_dir=tmp_path / "data", port=0, properties=properties)
    broker = build_standalone(config, clock=ManualClock(time_ms=1_700_000_000_000))
    broker.log_manager.startup()
    broker.replicas.startup()
    broker.topics.load()
    broker.topics.create_topic("t", 2, 1, {})
    broker.transactions.topic.ensure_created()
    broker.groups.topic.ensure_created()
    broker.transactions.start()
    await broker.transactions.loaded()
    try:
        yield Api(broker)
    finally:
        await broker.transactions.stop()
        broker.log_manager.shutdown()


def run(tmp_path: Path, scenario: Callable[[Api], Awaitable[None]]) -> None:
    async def main() -> None:
        async with api(tmp_path) as a:
            await scenario(a)

    asyncio.run(main())


def partition_errors(response: Any) -> dict[tuple[str, int], ErrorCode]:
    return {
        (topic.name, p.partition_index): p.partition_error_code
        for topic in response.results_by_topic_v3_and_below
        for p in topic.results_by_partition
    }


def test_find_transaction_coordinator_every_version(tmp_path: Path) -> None:
    async def scenario(a: Api) -> None:
        for version in range(1, 4):
            found = await a.call(FIND, version, "FindCoordinatorRequest", key="tx", key_type=1)
            assert (found.error_code, found.node_id) == (E.none, 0)
        for version in range(4, 7):
            found = await a.call(
                FIND, version, "FindCoordinatorRequest", key_type=1, coordinator_keys=("a", "b")
            )
            assert [(c.key, c.error_code, c.node_id) for c in found.coordinators] == [
                ("a", E.none, 0),
                ("b", E.none, 0),
            ]
        topic = a.broker.metadata.topic(TRANSACTION_STATE_TOPIC)
        assert topic is not None and topic.is_internal and len(topic.partitions) == 3
        assert topic.configs["cleanup.policy"] == "compact"
        assert topic.configs["min.insync.replicas"] == "1"  # standalone: capped by the brokers
        assert topic.configs["segment.bytes"] == str(100 * 1024 * 1024)

    run(tmp_path, scenario)


@pytest.mark.parametrize("version", range(6))
def test_init_producer_id(tmp_path: Path, version: int) -> None:
    async def scenario(a: Api) -> None:
        first = await a.init("tx", version, producer_id=-1, producer_epoch=-1)
        assert (first.error_code, first.producer_epoch) == (E.none, 0)
        again = await a.init("tx", version)
        assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)
        assert (await a.init("", version)).error_code == E.invalid_request
        idempotent = await a.init(None, version)  # type: ignore[arg-type]
        assert idempotent.error_code == E.none and idempotent.producer_id > first.producer_id
        if version >= 3:  # KIP-360: the caller's epoch is stale
            stale = await a.init("tx", version, producer_id=first.producer_id, producer_epoch=0)
            fenced = E.producer_fenced if version >= 4 else E.invalid_producer_epoch
            assert stale.error_code == fenced

    run(tmp_path, scenario)


@pytest.mark.parametrize("version", range(4))
def test_add_partitions_and_end_txn_by_version(tmp_path: Path, version: int) -> None:
    async def scenario(a: Api) -> None:
        init = await a.init("tx")
        pid, epoch = init.producer_id, init.producer_epoch
        added = await a.add(version, "tx", pid, epoch, 0, 1)
        assert partition_errors(added) == {("t", 0): E.none, ("t", 1): E.none}
        fenced = E.producer_fenced if version >= 2 else E.invalid_producer_epoch
        stale = await a.add(version, "tx", pid, epoch + 1, 0)
        assert partition_errors(stale) == {("t", 0): fenced}
        unknown = await a.add(version, "tx", pid, epoch, 0, 9)
        assert partition_errors(unknown) == {
            ("t", 0): E.operation_not_attempted,
            ("t", 9): E.unknown_topic_or_partition,
        }
        assert (await a.end(version, "tx", pid, epoch + 1, True)).error_code == fenced
        assert (await a.end(version, "tx", pid, epoch, True)).error_code == E.none
        await a.settle()
        described = a.broker.transactions.coordinator.describe("tx")
        assert described.state == "CompleteCommit"

    run(tmp_path, scenario)


def test_add_partitions_v4_batches_transactions_and_verifies(tmp_path: Path) -> None:
    async def scenario(a: Api) -> None:
        init = await a.init("tx")
        pid, epoch = init.producer_id, init.producer_epoch
        await a.add(3, "tx", pid, epoch, 0)

        def txn(verify: bool, *parts: int) -> Any:
            topic = entity(ADD_PARTITIONS, 4, "AddPartitionsToTxnTopic", name="t",
                           partitions=parts)  # fmt: skip
            return entity(
                ADD_PARTITIONS, 4, "AddPartitionsToTxnTransaction", transactional_id="tx",
                producer_id=pid, producer_epoch=epoch, verify_only=verify, topics=(topic,),
            )  # fmt: skip

        response = await a.call(
            ADD_PARTITIONS, 4, "AddPartitionsToTxnRequest", transactions=(txn(True, 0, 1),)
        )
        assert response.error_code == E.none
        [result] = response.results_by_transaction
        errors = {
            (t.name, p.partition_index): p.partition_error_code
            for t in result.topic_results
            for p in t.results_by_partition
        }
        assert errors == {("t", 0): E.none, ("t", 1): E.transaction_abortable}

    run(tmp_path, scenario)


@pytest.mark.parametrize("version", range(5))
def test_add_offsets_to_txn(tmp_path: Path, version: int) -> None:
    async def scenario(a: Api) -> None:
        init = await a.init("tx")
        pid, epoch = init.producer_id, init.producer_epoch

        async def add_offsets(epoch: int) -> ErrorCode:
            response = await a.call(
                ADD_OFFSETS, version, "AddOffsetsToTxnRequest", transactional_id="tx",
                producer_id=pid, producer_epoch=epoch, group_id="g",
            )  # fmt: skip
            return ErrorCode(response.error_code)

        assert await add_offsets(epoch) == E.none
        fenced = E.producer_fenced if version >= 2 else E.invalid_producer_epoch
        assert await add_offsets(epoch + 1) == fenced
        partitions = a.broker.transactions.coordinator.describe("tx").partitions
        group_partition = a.broker.groups.coordinator.partition_for("g")
        assert partitions == (("__consumer_offsets", group_partition),)

    run(tmp_path, scenario)


def test_describe_and_list_transactions(tmp_path: Path) -> None:
    async def scenario(a: Api) -> None:
        init = await a.init("tx")
        pid = init.producer_id
        await a.add(3, "tx", pid, init.producer_epoch, 1)
        await a.init("idle")
        described = await a.call(
            DESCRIBE, 0, "DescribeTransactionsRequest", transactional_ids=("tx", "nobody", "")
        )
        tx, nobody, empty = described.transaction_states
        assert (tx.error_code, tx.transaction_state, tx.producer_id) == (E.none, "Ongoing", pid)
        assert tx.transaction_timeout == TIMEOUT
        assert [(t.topic, t.partitions) for t in tx.topics] == [("t", (1,))]
        assert tx.transaction_start_time is not None
        assert nobody.error_code == E.transactional_id_not_found
        assert empty.error_code == E.invalid_request
        for version in (0, 1):
            listed = await a.call(
                LIST, version, "ListTransactionsRequest",
                state_filters=("Ongoing", "Nope"), producer_id_filters=(),
            )  # fmt: skip
            assert listed.error_code == E.none
            assert [
                (t.transactional_id, t.transaction_state) for t in listed.transaction_states
            ] == [("tx", "Ongoing")]
            assert listed.unknown_state_filters == ("Nope",)

    run(tmp_path, scenario)


def test_an_empty_id_is_described_with_start_time_minus_one(tmp_path: Path) -> None:
    async def scenario(a: Api) -> None:
        await a.init("idle")
        route = a.broker.routes.get(DESCRIBE)
        assert route is not None
        request = entity(DESCRIBE, 0, "DescribeTransactionsRequest", transactional_ids=("idle",))
        ctx = RequestContext(RequestHeader(DESCRIBE, 0, 1, "tester"), "10.0.0.1", "c1")
        response: Any = await route.handler(ctx, request)
        [state] = response.transaction_states
        assert state.transaction_state == "Empty"
        assert round(state.transaction_start_time.timestamp() * 1000) == -1  # Kafka's "none"
        assert encode_entity(response)  # what goes on the wire

    run(tmp_path, scenario)
