"""DescribeLogDirs (key 35, v1–4, KIP-113): the broker's log directory and its partitions' sizes.

Owns: answering as Kafka's ReplicaManager.describeLogDirs does for one log dir: `topics` null
means every local log, else the partitions named; a named topic or partition with no local log is
left out, and so is a topic left with no partitions. `partition_size` is the log's bytes on disk
(all segments), `offset_lag` is max(HW − LEO, 0), always 0 for a current log, and no log is a
future log (AlterReplicaLogDirs is not served). v4 adds the volume's total and usable bytes
(KIP-827) from statvfs; a directory that cannot be read is KAFKA_STORAGE_ERROR with no topics.
v0 (removed by KIP-896) is not in kio; v5 (KIP-1066 cordoned dirs) is not served.
Runs on the event loop; statvfs is one short syscall.
"""

from __future__ import annotations

import os
from collections import defaultdict
from types import ModuleType
from typing import Any

from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.services import HostedLog, LogDirs
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 35
UNKNOWN_BYTES = -1


def route(log_dirs: LogDirs) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        wanted = _wanted(request.topics)
        logs = [
            log for log in log_dirs.logs() if wanted is None or (log.topic, log.partition) in wanted
        ]
        result = _result(module, os.path.abspath(log_dirs.log_dir), logs)
        return make(
            module,
            "DescribeLogDirsResponse",
            throttle_time=throttle(),
            error_code=ErrorCode.none,
            results=(result,),
        )

    return Route(API_KEY, 1, 4, handle, name="DescribeLogDirs")


def _wanted(topics: Any) -> set[tuple[str, int]] | None:
    if topics is None:
        return None
    return {(t.topic, int(p)) for t in topics for p in t.partitions}


def _result(module: ModuleType, path: str, logs: list[HostedLog]) -> Any:
    try:
        volume = os.statvfs(path)
    except OSError:
        return make(
            module,
            "DescribeLogDirsResult",
            error_code=ErrorCode.kafka_storage_error,
            log_dir=path,
            topics=(),
            total_bytes=UNKNOWN_BYTES,
            usable_bytes=UNKNOWN_BYTES,
        )
    return make(
        module,
        "DescribeLogDirsResult",
        error_code=ErrorCode.none,
        log_dir=path,
        topics=_topics(module, logs),
        total_bytes=volume.f_blocks * volume.f_frsize,
        usable_bytes=volume.f_bavail * volume.f_frsize,
    )


def _topics(module: ModuleType, logs: list[HostedLog]) -> tuple[Any, ...]:
    by_topic: dict[str, list[HostedLog]] = defaultdict(list)
    for log in logs:
        by_topic[log.topic].append(log)
    return tuple(
        make(
            module,
            "DescribeLogDirsTopic",
            name=topic,
            partitions=tuple(
                make(
                    module,
                    "DescribeLogDirsPartition",
                    partition_index=log.partition,
                    partition_size=log.size_bytes,
                    offset_lag=0,
                    is_future_key=False,
                )
                for log in sorted(members, key=lambda log: log.partition)
            ),
        )
        for topic, members in sorted(by_topic.items())
    )
