"""Review of session 34's coordinator change (ccfd592): what a client's group ids cost the broker.

`offsets_topic.partition_for` became `functools.lru_cache(maxsize=4096)` (now only for ids of at
most 255 characters), and FindCoordinator
(any key, any number of keys per request, v4), OffsetCommit, TxnOffsetCommit and the transaction
coordinator's ids all go through it: the cache keeps the last 4096 ids a client sent, however
long (a compact string in a flexible request is bounded only by the request's size), so a client
pins up to 4096 requests' worth of memory for the life of the process. A real broker in this
process (tests/integration/inproc.py), real FindCoordinator v4 requests over a socket, and
`tracemalloc` counting what the broker's process still holds afterwards.
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import pytest
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.static.primitive import i8

from tests.integration.inproc import raw_call, running_broker

pytestmark = pytest.mark.integration

KEY_BYTES = 64 * 1024
REQUESTS = 32  # 2 MiB of group ids in all


def test_the_broker_does_not_keep_the_group_ids_clients_ask_about(tmp_path: Path) -> None:
    with running_broker(tmp_path, {"offsets.topic.replication.factor": "1"}) as bootstrap:
        raw_call(bootstrap, FindCoordinatorRequest(key_type=i8(0), coordinator_keys=("warm",)))
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for index in range(REQUESTS):
                key = f"{index:04d}".ljust(KEY_BYTES, "g")
                request = FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(key,))
                raw_call(bootstrap, request, correlation_id=index + 2)
            del key, request
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
    assert held < REQUESTS * KEY_BYTES // 4, f"{held / 2**20:.1f} MiB still held"
