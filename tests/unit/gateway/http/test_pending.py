"""What waits at the batcher (`gateway.http.pending`): a streamed chunk's run of records has one
future, learns each record's offset from the batch's base, and, split record by record after a
refusal, each record's own outcome."""

from __future__ import annotations

import asyncio

import pytest

from brokers.client.errors import ClientError
from brokers.client.producer import ProduceResult
from brokers.records.builder import Row
from gateway.http import pending as entries

pytestmark = pytest.mark.unit


def _rows(n: int) -> list[Row]:
    return [(None, b"v%d" % i, (), 1000 + i) for i in range(n)]


def test_a_batch_of_records_and_runs_answers_each_at_its_offset() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        single = entries.pending(_rows(1)[0], loop.create_future())
        whole = entries.run(_rows(3), loop.create_future())
        after = entries.pending(_rows(1)[0], loop.create_future())
        batch: list[entries.Entry] = [single, whole, after]
        assert entries.count(batch) == 5
        assert len(entries.rows(batch)) == 5
        entries.answer(batch, ProduceResult(40, -1, 0))
        assert single.done.result().base_offset == 40
        landed = whole.done.result()
        assert [landed.outcome(i) for i in range(3)] == [
            ProduceResult(n, -1, 0) for n in (41, 42, 43)
        ]
        assert after.done.result().base_offset == 44

    asyncio.run(scenario())


def test_a_run_sent_one_by_one_gets_each_records_outcome() -> None:
    async def scenario() -> None:
        whole = entries.run(_rows(3), asyncio.get_running_loop().create_future())
        parts = entries.one_by_one([whole])
        assert len(parts) == 3 and all(part.count == 1 for part in parts)
        refused = ClientError("too large")
        entries.answer([parts[0]], ProduceResult(7, -1, 0))
        entries.fail([parts[1]], refused)
        await asyncio.sleep(0)
        assert not whole.done.done()  # a record still waits
        entries.answer([parts[2]], ProduceResult(8, -1, 0))
        result = await whole.done
        assert result.outcome(0) == ProduceResult(7, -1, 0)
        assert result.outcome(1) is refused
        assert result.outcome(2) == ProduceResult(8, -1, 0)

    asyncio.run(scenario())
