"""Topic churn does not stall the broker's event loop (issue 25: a bystander producer's p99
during 100 topics created and deleted): CreateTopics/DeleteTopics queue the registry's write
(and a deletion's log-dir fsync) on the registry's writer thread and await it, so the loop
serves other requests meanwhile, and the answer still comes only once the registry is on disk;
a new topic's logs are made one per loop turn, its name reserved until it is installed."""

from __future__ import annotations

import asyncio
import datetime
import json
import threading
from pathlib import Path
from typing import Any, cast

import pytest

from brokers.handlers import create_topics, delete_topics
from brokers.replication import local_topics
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


def create_request(name: str, partitions: int) -> Any:
    topic = entity(19, 7, "CreatableTopic", name=name, num_partitions=partitions,
                   replication_factor=1, assignments=(), configs=())  # fmt: skip
    return entity(19, 7, "CreateTopicsRequest", topics=(topic,), validate_only=False,
                  timeout=datetime.timedelta(seconds=5))  # fmt: skip


def test_a_topic_s_logs_are_made_a_turn_at_a_time_its_name_reserved_meanwhile(
    tmp_path: Path,
) -> None:
    with standalone_broker(tmp_path) as broker:
        route = create_topics.route(broker.config, broker.metadata, broker.topics, False)
        ctx = RequestContext(RequestHeader(19, 7, 7, "test"), "127.0.0.1", "conn-1")
        first_log = tmp_path / "data" / "churn.a-0"

        async def scenario() -> tuple[Any, Any, Any, int]:
            creating = asyncio.ensure_future(route.handler(ctx, create_request("churn.a", 10)))
            turns = 0  # this coroutine runs between the creation's steps
            while not first_log.is_dir() and turns < 10_000:
                await asyncio.sleep(0)
                turns += 1
            assert "churn.a" not in broker.metadata.topics and not creating.done()
            same = await route.handler(ctx, create_request("churn.a", 1))
            colliding = await route.handler(ctx, create_request("churn_a", 1))
            return await creating, same, colliding, turns

        created, same, colliding, turns = asyncio.run(scenario())
        assert 0 < turns < 10_000
        assert [t.error_code for t in created.topics] == [ErrorCode.none]
        assert [t.error_code for t in same.topics] == [ErrorCode.topic_already_exists]
        assert [t.error_code for t in colliding.topics] == [ErrorCode.invalid_topic_exception]
        assert len(log_dirs(tmp_path, "churn.a")) == 10 and not log_dirs(tmp_path, "churn_a")
        assert len(broker.metadata.topics["churn.a"].partitions) == 10
        assert broker.replicas.get("churn.a", 9).log.log_end_offset == 0
        assert on_disk(tmp_path) >= {"churn.a"}


def test_prepared_logs_not_taken_are_removed(tmp_path: Path) -> None:
    with standalone_broker(tmp_path) as broker:
        config = broker.topics.log_config({})  # type: ignore[attr-defined]

        async def prepare_then_drop() -> None:
            await broker.replicas.prepare_logs("orphan", range(3), config)
            assert len(log_dirs(tmp_path, "orphan")) == 3
            broker.replicas.drop_prepared("orphan")

        asyncio.run(prepare_then_drop())
        assert not log_dirs(tmp_path, "orphan")
        assert broker.replicas.find("orphan", 0) is None


def test_checked_overrides_and_built_configs_are_remembered_boundedly_and_never_shared(
    tmp_path: Path,
) -> None:
    """A creation asked for the same checks and config four times (~300 µs of the loop); they
    are remembered by the overrides asked for, at most `REMEMBERED_MAX` sets (tenants choose
    them), and a caller's copy of the overrides is its own."""
    with standalone_broker(tmp_path) as broker:
        registry = cast(LocalTopicRegistry, broker.topics)
        first = registry._overrides({"retention.ms": "1000"})
        first["retention.ms"] = "changed by its owner"
        again = registry._overrides({"retention.ms": "1000"})
        assert again == {"retention.ms": "1000"} and again is not first
        assert registry.log_config(again) is registry.log_config(dict(again))
        with pytest.raises(Exception, match=r"retention\.ms"):
            registry._overrides({"retention.ms": "soon"})  # refused every time, not remembered
        with pytest.raises(Exception, match=r"retention\.ms"):
            registry._overrides({"retention.ms": "soon"})
        for ms in range(3 * local_topics.REMEMBERED_MAX):
            registry.log_config(registry._overrides({"retention.ms": str(1000 + ms)}))
        assert len(registry._validated) <= local_topics.REMEMBERED_MAX
        assert len(registry._configs) <= local_topics.REMEMBERED_MAX
        assert registry.log_config({"retention.ms": "1999"}).retention_ms == 1999
