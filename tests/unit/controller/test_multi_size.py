"""Partition states are written in multis of at most `MAX_OPS_PER_MULTI` partitions (issue 25:
ZooKeeper keeps its last 500 proposals in memory, each with all its ops; with 500-partition
multis that was every create of 10,000 new partitions)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from brokers.controller.context import ControllerContext
from brokers.controller.controller_store import MAX_OPS_PER_MULTI, ControllerStore
from brokers.controller.state import LeaderAndIsr, ReplicaAssignment
from brokers.controller.zk_client import CheckOp, CreateOp, Op

pytestmark = pytest.mark.unit


class Result:
    version = 0


class RecordingZk:
    def __init__(self) -> None:
        self.multis: list[list[Op]] = []

    async def multi(self, ops: Sequence[Op]) -> list[Any]:
        self.multis.append(list(ops))
        return [Result() for _ in ops]


def test_new_partitions_go_in_small_fenced_multis() -> None:
    async def scenario() -> None:
        zk = RecordingZk()
        store = ControllerStore(zk)  # type: ignore[arg-type]
        ctx = ControllerContext(epoch=1)
        count = 2 * MAX_OPS_PER_MULTI + 5
        keys = ctx.add_topic("t", uuid.uuid4(), {p: ReplicaAssignment((1,)) for p in range(count)})
        state = LeaderAndIsr(1, 0, (1,), 1)
        written = await store.write_states(
            CheckOp("/controller_epoch", 0), ctx, {tp: state for tp in keys}
        )
        assert len(written) == count
        states = [[op for op in m if isinstance(op, CreateOp) and op.path.endswith("/state")]
                  for m in zk.multis]  # fmt: skip
        assert [len(s) for s in states] == [MAX_OPS_PER_MULTI, MAX_OPS_PER_MULTI, 5]
        assert all(isinstance(m[0], CheckOp) for m in zk.multis)
        assert MAX_OPS_PER_MULTI * 500 <= 10_000  # ZooKeeper's 500 kept proposals: <= 10,000 ops

    asyncio.run(scenario())
