"""The decoding threads: work off the event loop, one lane per tenant."""

from __future__ import annotations

import asyncio
import threading

import pytest

from gateway.http.decoding import _LANES, off_loop

pytestmark = pytest.mark.unit


def test_a_tenants_jobs_take_one_thread_and_leave_the_other_to_others() -> None:
    release = threading.Event()
    started: list[str] = []

    def job(name: str) -> str:
        started.append(name)
        if name == "acme-1":
            assert release.wait(10)
        return name

    async def run() -> None:
        loop_thread = threading.get_ident()
        first = asyncio.ensure_future(off_loop("acme", job, "acme-1"))
        second = asyncio.ensure_future(off_loop("acme", job, "acme-2"))
        while started != ["acme-1"]:
            await asyncio.sleep(0.01)  # the event loop is free while acme-1 runs
        assert await off_loop("bolt", job, "bolt-1") == "bolt-1"  # not behind acme's jobs
        assert "acme-2" not in started  # acme's second job waits for its first
        release.set()
        assert list(await asyncio.gather(first, second)) == ["acme-1", "acme-2"]
        assert await off_loop("acme", threading.get_ident) != loop_thread
        assert _LANES.busy() == 0  # no lane is kept once its work is done

    asyncio.run(asyncio.wait_for(run(), 20))
