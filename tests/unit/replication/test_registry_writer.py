"""Topic churn does not stall the broker's event loop on fsyncs (issue 25: a bystander producer's
p99 during 100 topics created and deleted): CreateTopics/DeleteTopics queue the registry's write
(and a deletion's log-dir fsync) on the registry's writer thread and await it, so the loop
serves other requests meanwhile, and the answer still comes only once the registry is on disk."""

from __future__ import annotations

import asyncio
import datetime
import json
import threading
from pathlib import Path
from typing import Any, cast

import pytest

from brokers.handlers import delete_topics
from brokers.replication.local_topics import REGISTRY_FILE, LocalTopicRegistry
from brokers.server.context import RequestContext
from brokers.wire.errors import ErrorCode
from brokers.wire.headers import RequestHeader
from tests.polling import wait_until_async
from tests.unit.handlers.admin_harness import entity, standalone_broker
from tests.unit.handlers.test_descriptor_limit import create, log_dirs

pytestmark = pytest.mark.unit
HELD_S = 10.0  # the writer thread is held at most this long (a synchronous write waits it out)


def on_disk(tmp_path: Path) -> set[str]:
    return set(json.loads((tmp_path / "data" / REGISTRY_FILE).read_text())["topics"])


def test_delete_answers_after_the_registry_is_on_disk_and_the_loop_serves_meanwhile(
    tmp_path: Path,
) -> None:
    with standalone_broker(tmp_path) as broker:
        assert create(broker, "doomed", 10).error_code == ErrorCode.none
        assert create(broker, "bystander", 1).error_code == ErrorCode.none
        assert "doomed" in on_disk(tmp_path)
        route = delete_topics.route(broker.config, broker.metadata, broker.topics)
        request = entity(20, 5, "DeleteTopicsRequest", topic_names=("doomed",),
                         timeout=datetime.timedelta(seconds=5))  # fmt: skip
        ctx = RequestContext(RequestHeader(20, 5, 7, "test"), "127.0.0.1", "conn-1")
        release = threading.Event()

        async def scenario() -> Any:
            # Hold the writer thread, as a slow fsync would.
            writer = cast(LocalTopicRegistry, broker.topics)._writer
            assert writer is not None
            held = writer.submit(release.wait, HELD_S)
            deleting: asyncio.Future[Any] = asyncio.ensure_future(route.handler(ctx, request))

            async def forgotten() -> bool:
                return "doomed" not in broker.metadata.topics

            await wait_until_async(forgotten, what="the topic gone from metadata", timeout=5)
            # The loop runs while the registry write waits: the delete is not answered yet,
            # the registry on disk still lists the topic, and another partition takes appends.
            assert not deleting.done()
            assert "doomed" in on_disk(tmp_path)
            assert broker.replicas.get("bystander", 0).log.log_end_offset == 0
            release.set()
            response = await asyncio.wait_for(deleting, 30)
            assert held.done()
            return response

        response = asyncio.run(scenario())
        (result,) = response.responses
        assert result.error_code == ErrorCode.none
        assert on_disk(tmp_path) == {"bystander"}
        assert all(name.endswith("-delete") for name in log_dirs(tmp_path, "doomed"))


def test_a_failed_registry_write_fails_the_request_that_awaited_it_only(tmp_path: Path) -> None:
    with standalone_broker(tmp_path) as broker:
        assert create(broker, "kept", 1).error_code == ErrorCode.none
        registry = tmp_path / "data" / REGISTRY_FILE
        tmp = registry.with_suffix(".tmp")
        tmp.mkdir()  # the temp file cannot be opened: the write fails on the writer thread

        async def failing_then_fine() -> tuple[BaseException | None, BaseException | None]:
            with broker.topics.batch():
                broker.topics.delete_topic("kept")
            first: BaseException | None = None
            try:
                await broker.topics.flushed()
            except OSError as exc:
                first = exc
            second: BaseException | None = None
            try:
                await broker.topics.flushed()  # nothing new queued: no stale error
            except OSError as exc:
                second = exc
            return first, second

        first, second = asyncio.run(failing_then_fine())
        assert isinstance(first, IsADirectoryError) and second is None
        tmp.rmdir()
        assert create(broker, "again", 1).error_code == ErrorCode.none
        assert on_disk(tmp_path) == {"again"}
