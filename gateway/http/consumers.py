"""The v2 consumer API's instances: created, polled, committed and deleted over HTTP.

Owns: `ConsumerInstance` (one tenant consumer in a group: its format, `auto.offset.reset`,
subscription — a `GroupMember` in the tenant's group — or manual assignment, and its fetch
positions) and `ConsumerRegistry` (every instance of this gateway process, keyed by tenant, owning
service account, group and name; an instance unused for `consumer.instance.timeout.ms` is closed: it leaves its group, so
its membership ends at once; with ZooKeeper each is also recorded there, `gateway.http.
instance_directory`, so the other gateways find it). Instances live in one gateway process: their `base_uri` points at
its gateway, and a client behind a load balancer must stick to that gateway; with `--workers N`
the worker owning an instance is found from its name (`gateway.http.worker_routing`;
docs/gateway-http.md).

Reading applies the Kafka path's rules: READ on each topic (403 otherwise), the fetch size capped
by the consumer byte-rate quota's window and the answer's bytes charged to it (a throttled poll
is answered after its throttle time with no records and positions unchanged, as Kafka answers a
throttled fetch with no data), usage metered as the response body's bytes (`bytes_out`).
Committed offsets and positions without one follow `auto.offset.reset` (earliest, latest, none).
An instance BELONGS to the service account that made it: it is found only under that account's
name (another account of the same tenant gets 404 on every route, as if it did not exist, and may
make an instance of the same name), and it counts as one of the tenant's connections
(`max_connections`, admitted by the same `TenantDirectory` as the Kafka listener's sessions: the
next one past the limit is 429, and a revoked key or a suspended tenant closes it as it closes a
session). Fleet connections are bounded: an instance holds one connection for its group (a
JoinGroup parks in the broker, so members cannot share one), and all the instances of a tenant
share one fleet client for fetches and offset look-ups (another tenant's long poll never queues
behind it). Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from brokers.client import Cluster, TopicPartition
from brokers.client import consumer as fetching
from brokers.client.errors import BrokerResponseError, ClientError
from brokers.client.offsets import EARLIEST, LATEST, list_offsets
from brokers.wire.errors import ErrorCode
from gateway.http import kafka_requests as kr
from gateway.http.context import Caller
from gateway.http.decoding import off_loop
from gateway.http.errors import (
    CONSUMER_ALREADY_EXISTS,
    CONSUMER_INSTANCE_NOT_FOUND,
    INVALID_CONSUMER_CONFIG,
    ApiError,
    from_client,
    from_kafka,
)
from gateway.http.fleet_calls import coordinator, kafka_call
from gateway.http.group_member import GroupMember
from gateway.http.instance_directory import InstanceDirectory
from gateway.http.records import (
    FORMATS,
    Bookmark,
    PollLimits,
    encode_headers,
    encode_value,
    fetched_records,
    next_offset,
)
from gateway.policy.names import valid_instance_name
from tenancy.domain import Principal

log = logging.getLogger("pier.gateway.http.consumers")
TP = tuple[str, int]
RESETS = ("earliest", "latest", "none")
POLL_SLICE_S = 0.5
TOO_MANY_CONNECTIONS = 42901  # the tenant's max_connections is reached (HTTP 429)
DEFAULT_MAX_POLL_RECORDS = 500  # Kafka's max.poll.records
MAX_MAX_POLL_RECORDS = 10_000


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _not_found(group: str, name: str) -> ApiError:
    return ApiError(
        404, f"consumer instance {name!r} of group {group!r} not found", CONSUMER_INSTANCE_NOT_FOUND
    )


@dataclass
class ConsumerInstance:
    tenant: str
    group: str
    name: str
    format: str
    auto_offset_reset: str
    auto_commit: bool
    caller: Caller
    group_cluster: Cluster
    fetch_cluster: Cluster  # shared by the tenant's instances: the registry closes it
    owner: str = ""  # the service account that made the instance; no other may use it
    created_ms: int = field(default_factory=_now_ms)
    last_used_ms: int = field(default_factory=_now_ms)
    member: GroupMember | None = None
    manual: list[TP] | None = None
    positions: dict[TP, int] = field(default_factory=dict)
    pending: dict[TP, int] = field(default_factory=dict)  # positions after the last poll
    max_poll_records: int = DEFAULT_MAX_POLL_RECORDS
    bookmarks: dict[TP, Bookmark] = field(default_factory=dict)  # where the last poll stopped
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    closed: bool = False  # set under the lock by `close`: the instance serves nothing more

    @contextlib.asynccontextmanager
    async def using(self) -> AsyncIterator[None]:
        """The instance's lock for one request's work on it; 404 when the instance was closed
        (a DELETE, its expiry or its key's revocation) after the request looked it up, so a
        closed instance never reopens a group membership or a connection."""
        async with self.lock:
            if self.closed:
                raise _not_found(self.group, self.name)
            yield

    # -- what the instance reads -----------------------------------------------------------------
    def touch(self, caller: Caller) -> None:
        self.caller = caller
        self.last_used_ms = _now_ms()

    @property
    def subscription(self) -> tuple[str, ...]:
        return () if self.member is None else self.member.topics

    def assignment(self) -> list[TP]:
        if self.manual is not None:
            return list(self.manual)
        if self.member is not None and self.member.assigned.is_set():
            return list(self.member.assignment)
        return []

    def describe(self) -> dict[str, Any]:
        return {
            "tenant_id": self.tenant,
            "group": self.group,
            "instance_id": self.name,
            "format": self.format,
            "member_id": self.member.member_id if self.member is not None else None,
            "subscription": list(self.subscription),
            "assignment": [{"topic": t, "partition": p} for t, p in self.assignment()],
            "idle_ms": _now_ms() - self.last_used_ms,
            "principal": self.caller.principal.service_account_id,
        }

    # -- subscription and assignment -----------------------------------------------------------
    async def subscribe(self, topics: Sequence[str]) -> None:
        if self.manual is not None:
            raise ApiError(409, "the instance has a manual assignment: delete it first", 40903)
        for topic in topics:
            self.caller.require("DESCRIBE", "TOPIC", topic)
        await self.unsubscribe()
        self.member = GroupMember(
            lambda: self.caller,
            self.group_cluster,
            self.group,
            topics,
            on_revoke=self._commit_if_auto,
        )
        self.member.start()

    async def unsubscribe(self) -> None:
        if self.member is not None:
            member, self.member = self.member, None
            await self._commit_if_auto()
            await member.stop()
        self.positions.clear()

    async def assign(self, partitions: Sequence[TP]) -> None:
        if self.member is not None:
            raise ApiError(409, "the instance is subscribed: delete the subscription first", 40903)
        self.manual = list(partitions)
        self.positions = {tp: o for tp, o in self.positions.items() if tp in partitions}

    async def close(self) -> None:
        self.closed = True
        await self.unsubscribe()
        self.manual = None
        await self.group_cluster.close()

    # -- offsets ---------------------------------------------------------------------------------
    def _generation(self) -> tuple[int, str]:
        if self.member is not None and self.member.assigned.is_set():
            return self.member.generation, self.member.member_id
        return -1, ""

    async def commit(self, offsets: Mapping[TP, int] | None = None) -> None:
        wanted = dict(self.positions if offsets is None else offsets)
        if not wanted:
            return
        generation, member_id = self._generation()
        request = kr.offset_commit(self.group, generation, member_id, wanted)
        answer = await self._group_call(kr.OFFSET_COMMIT, request)
        for topic in answer.topics:
            for partition in topic.partitions:
                if int(partition.error_code) != ErrorCode.none:
                    raise from_kafka(
                        int(partition.error_code),
                        f"commit {topic.name}-{partition.partition_index}",
                    )

    async def _commit_if_auto(self) -> None:
        if self.auto_commit and self.positions:
            try:
                await self.commit()
            except ApiError as exc:
                log.info("event=auto_commit_failed group=%s error=%s", self.group, exc.message)

    async def committed(self, partitions: Sequence[TP]) -> dict[TP, int]:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        answer = await self._group_call(kr.OFFSET_FETCH, kr.offset_fetch(self.group, by_topic))
        if int(getattr(answer, "error_code", 0)) != ErrorCode.none:
            raise from_kafka(int(answer.error_code), f"group {self.group!r}")
        found: dict[TP, int] = {}
        for topic in answer.topics:
            for partition in topic.partitions:
                code = int(partition.error_code)
                if code != ErrorCode.none:
                    raise from_kafka(code, f"offsets of {topic.name}-{partition.partition_index}")
                found[(str(topic.name), int(partition.partition_index))] = int(
                    partition.committed_offset
                )
        return found

    async def _group_call(self, api: tuple[int, int], request: Any) -> Any:
        route = coordinator(self.caller.fleet(self.group))
        return await kafka_call(
            self.caller, api[0], api[1], request, route, cluster=self.group_cluster
        )

    async def seek_to(self, partitions: Sequence[TP], spec: int) -> None:
        listed = await self._listed(partitions, spec)
        self.positions.update(listed)

    async def _listed(self, partitions: Sequence[TP], spec: int) -> dict[TP, int]:
        if not partitions:
            return {}
        for topic in sorted({t for t, _ in partitions}):  # ListOffsets needs DESCRIBE, as Kafka's
            self.caller.require("DESCRIBE", "TOPIC", topic)
        wanted = {TopicPartition(self.caller.fleet(t), p): spec for t, p in partitions}
        try:
            listed = await list_offsets(self.fetch_cluster, wanted)
        except ClientError as exc:
            raise from_client(exc, "list offsets") from None
        return {
            (t, p): listed[TopicPartition(self.caller.fleet(t), p)].offset for t, p in partitions
        }

    async def _initial_positions(self, partitions: Sequence[TP]) -> None:
        missing = [tp for tp in partitions if tp not in self.positions]
        if not missing:
            return
        committed = await self.committed(missing)
        reset: list[TP] = []
        for tp in missing:
            offset = committed.get(tp, -1)
            if offset >= 0:
                self.positions[tp] = offset
            else:
                reset.append(tp)
        if reset and self.auto_offset_reset == "none":
            raise ApiError(
                409, f"no committed offset for {reset[0][0]}-{reset[0][1]} and reset is none", 40904
            )
        spec = EARLIEST if self.auto_offset_reset == "earliest" else LATEST
        self.positions.update(await self._listed(reset, spec))

    # -- reading ---------------------------------------------------------------------------------
    async def poll(
        self, timeout_ms: int, max_bytes: int, max_records: int | None = None
    ) -> list[dict[str, Any]]:
        """Records (JSON-ready), at most `max_records` (default `max.poll.records`) and about
        `max_bytes`; `advance()` once they are delivered."""
        deadline = time.monotonic() + timeout_ms / 1000
        partitions = await self._wait_assignment(deadline)
        self.pending = {}
        if not partitions:
            return []
        for topic in sorted({t for t, _ in partitions}):
            self.caller.require("READ", "TOPIC", topic)
        await self._initial_positions(partitions)
        policy = self.caller.policy
        fetch_bytes = max(1, policy.fetch_max_bytes(policy.subject(), max_bytes))
        limits = PollLimits(max_records or self.max_poll_records, max_bytes)
        while True:
            remaining = deadline - time.monotonic()
            wait_s = max(0.0, min(POLL_SLICE_S, remaining))
            records = await self._fetch_once(partitions, wait_s, fetch_bytes, limits)
            if records or remaining <= POLL_SLICE_S:
                return records

    async def _wait_assignment(self, deadline: float) -> list[TP]:
        if self.manual is not None:
            return list(self.manual)
        if self.member is None:
            raise ApiError(409, "the instance has no subscription or assignment", 40905)
        if not self.member.assigned.is_set():
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    await self.member.assigned.wait()
            except TimeoutError:
                return []
        if self.member.last_error is not None and self.member.last_error.status == 403:
            raise self.member.last_error
        return self.assignment()

    async def _fetch_once(
        self, partitions: Sequence[TP], wait_s: float, fetch_bytes: int, limits: PollLimits
    ) -> list[dict[str, Any]]:
        fleet = {TopicPartition(self.caller.fleet(t), p): (t, p) for t, p in partitions}
        offsets = {ftp: self.positions[tp] for ftp, tp in fleet.items()}
        fetch_limits = fetching.FetchLimits(max_wait_s=wait_s, min_bytes=1, max_bytes=fetch_bytes)
        try:
            answer = await fetching.fetch(self.fetch_cluster, offsets, fetch_limits)
        except BrokerResponseError as exc:
            if exc.code == ErrorCode.offset_out_of_range:
                await self._reset_out_of_range(partitions)
                return []
            raise from_kafka(exc.code, "fetch") from None
        except ClientError as exc:
            raise from_client(exc, "fetch") from None
        parts = [(fleet[ftp], offsets[ftp], part.records) for ftp, part in answer.items()]
        out, self.pending, bookmarks = await off_loop(
            self.tenant, self._decoded, parts, limits, self.bookmarks
        )
        self.bookmarks.update(bookmarks)
        return out

    def _decoded(
        self,
        parts: list[tuple[TP, int, bytes]],
        limits: PollLimits,
        bookmarks: dict[TP, Bookmark],
    ) -> tuple[list[dict[str, Any]], dict[TP, int], dict[TP, Bookmark]]:
        """The fetched records within `limits` as JSON-ready dicts, the positions after them and
        where in their batches they stopped (runs on a decoding thread: reads only its
        arguments and the instance's format; the instance's lock keeps them unchanged)."""
        out: list[dict[str, Any]] = []
        used = 0
        advanced: dict[TP, int] = {}
        stopped: dict[TP, Bookmark] = {}
        for (topic, partition), start, raw in parts:
            left = PollLimits(
                limits.max_records - len(out),
                max(0, limits.max_bytes - used) if out else limits.max_bytes,
                limits.max_decompressed_bytes,
            )
            polled = fetched_records(raw, start, left, bookmarks.get((topic, partition)))
            if polled.bookmark is not None:
                stopped[(topic, partition)] = polled.bookmark
            if not polled.records:
                advanced[(topic, partition)] = next_offset(raw, start)
                continue
            for record in polled.records:
                where = f"topic {topic!r} partition {partition} offset {record.offset}"
                out.append(
                    {
                        "topic": topic,
                        "partition": partition,
                        "offset": record.offset,
                        "timestamp": record.timestamp_ms,
                        "key": encode_value(self.format, record.key, where, part="key"),
                        "value": encode_value(self.format, record.value, where, part="value"),
                        "headers": encode_headers(record.headers),
                    }
                )
            used += polled.used_bytes
            advanced[(topic, partition)] = polled.records[-1].offset + 1
            if len(out) >= limits.max_records or used >= limits.max_bytes:
                break
        return out, advanced, stopped

    def advance(self) -> None:
        """The polled records were delivered: move the positions past them."""
        self.positions.update(self.pending)
        self.pending = {}

    async def _reset_out_of_range(self, partitions: Sequence[TP]) -> None:
        earliest = await self._listed(partitions, EARLIEST)
        latest = await self._listed(partitions, LATEST)
        for tp in partitions:
            position = self.positions.get(tp, 0)
            if earliest[tp] <= position <= latest[tp]:
                continue
            if self.auto_offset_reset == "none":
                raise ApiError(416, f"offset {position} of {tp[0]}-{tp[1]} is out of range", 416)
            self.positions[tp] = (
                earliest[tp] if self.auto_offset_reset == "earliest" else latest[tp]
            )


Key = tuple[str, str, str, str]  # tenant, owning service account, group, instance name


@dataclass(eq=False)
class _Connection:
    """An instance as one of its tenant's connections (`TenantDirectory.admit`): closing it (a
    revoked key, a suspended tenant) closes the instance."""

    principal: Principal | None
    closer: Callable[[str], None]
    closed: str | None = None  # why, once closed (before its instance exists, too)

    def close(self, reason: str) -> None:
        self.closed = reason
        self.closer(reason)


class ConsumerRegistry:
    """Every consumer instance of this process; idle ones expire."""

    def __init__(
        self,
        make_cluster: Callable[[str], Cluster],
        *,
        timeout_ms: int,
        clock_ms: Callable[[], int] = _now_ms,
        directory: InstanceDirectory | None = None,
    ) -> None:
        self._directory = directory  # where the fleet's gateways find each other's instances
        self._make_cluster = make_cluster
        self._timeout_ms = timeout_ms
        self._clock_ms = clock_ms
        self._instances: dict[Key, ConsumerInstance] = {}
        self._connections: dict[Key, _Connection] = {}
        self._fetch_clients: dict[str, tuple[Cluster, set[Key]]] = {}  # per tenant
        self._closing: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._sweeper = asyncio.create_task(self._sweep(), name="http-consumer-expiry")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
        for key in list(self._instances):
            await self._close(key, "gateway stopping")
        await asyncio.gather(*list(self._closing), return_exceptions=True)

    async def create(
        self, caller: Caller, group: str, config: Mapping[str, Any]
    ) -> ConsumerInstance:
        name = str(config.get("name") or f"rest-consumer-{secrets.token_hex(8)}")
        fmt = str(config.get("format", "binary")).lower()
        reset = str(config.get("auto.offset.reset", "latest")).lower()
        auto_commit = str(config.get("auto.commit.enable", "false")).lower()
        max_poll_records = _max_poll_records(config.get("max.poll.records"))
        if fmt not in FORMATS:
            raise ApiError(
                422, f"format must be one of {', '.join(FORMATS)}", INVALID_CONSUMER_CONFIG
            )
        if reset not in RESETS:
            raise ApiError(
                422,
                f"auto.offset.reset must be one of {', '.join(RESETS)}",
                INVALID_CONSUMER_CONFIG,
            )
        if auto_commit not in ("true", "false"):
            raise ApiError(422, "auto.commit.enable must be true or false", INVALID_CONSUMER_CONFIG)
        if not valid_instance_name(name):
            raise ApiError(422, "name must be 1-200 of [A-Za-z0-9._-]", INVALID_CONSUMER_CONFIG)
        key = (caller.tenant_id, caller.principal.service_account_id, group, name)
        if key in self._instances:
            raise ApiError(
                409, f"consumer instance {name!r} already exists", CONSUMER_ALREADY_EXISTS
            )
        connection = await self._admit(caller, key)
        if self._directory is not None and not await self._directory.claim(key):
            self._connections.pop(key, None)
            caller.services.session.directory.release(connection)
            raise ApiError(
                409, f"consumer instance {name!r} already exists", CONSUMER_ALREADY_EXISTS
            )
        if connection.closed is not None:  # its key revoked or its tenant changed meanwhile
            self._connections.pop(key, None)
            caller.services.session.directory.release(connection)
            raise ApiError(401, f"the consumer instance was not made: {connection.closed}", 401)
        client_id = caller.client_id or "pier-http"
        instance = ConsumerInstance(
            tenant=caller.tenant_id,
            group=group,
            name=name,
            format=fmt,
            auto_offset_reset=reset,
            auto_commit=auto_commit == "true",
            caller=caller,
            group_cluster=self._make_cluster(client_id),
            fetch_cluster=self._fetch_client(caller.tenant_id, key),
            owner=caller.principal.service_account_id,
            max_poll_records=max_poll_records,
        )
        self._instances[key] = instance
        log.info("event=consumer_created tenant=%s group=%s instance=%s", key[0], group, name)
        return instance

    async def _admit(self, caller: Caller, key: Key) -> _Connection:
        """Count the instance among its tenant's connections (a slot held in the tenant store,
        fleet-wide); 429 past `max_connections` or while the store cannot be asked."""
        connection = _Connection(caller.principal, lambda reason: self._close_soon(key, reason))
        directory = caller.services.session.directory
        with directory.admitting(connection, caller.principal):
            refused = await directory.admit(connection, caller.state)
        if refused is not None:
            log.info("event=consumer_refused tenant=%s reason=%r", key[0], refused)
            raise ApiError(429, refused, TOO_MANY_CONNECTIONS, retry_after_s=1)
        if key in self._connections or key in self._instances:  # made while this one waited
            directory.release(connection)
            raise ApiError(
                409, f"consumer instance {key[3]!r} already exists", CONSUMER_ALREADY_EXISTS
            )
        self._connections[key] = connection
        return connection

    def _fetch_client(self, tenant: str, key: Key) -> Cluster:
        """The tenant's shared fleet client for fetches (made with its first instance)."""
        entry = self._fetch_clients.get(tenant)
        if entry is None:
            entry = self._fetch_clients[tenant] = (self._make_cluster(f"pier-http-{tenant}"), set())
        entry[1].add(key)
        return entry[0]

    def holds(self, key: Key) -> bool:
        return key in self._instances

    def get(self, caller: Caller, group: str, name: str) -> ConsumerInstance:
        """The caller's own instance; 404 for a name only another service account uses."""
        instance = self._instances.get(
            (caller.tenant_id, caller.principal.service_account_id, group, name)
        )
        if instance is None:
            raise _not_found(group, name)
        instance.touch(caller)
        return instance

    async def delete(
        self, tenant: str, group: str, name: str, reason: str, *, owner: str | None = None
    ) -> bool:
        """Close the instance `name` of `owner` (None: of any service account, for operators)."""
        keys = [
            k
            for k in self._instances
            if (k[0], k[2], k[3]) == (tenant, group, name) and owner in (None, k[1])
        ]
        for key in keys:
            await self._close(key, reason)
        return bool(keys)

    def of_tenant(self, tenant: str) -> list[ConsumerInstance]:
        return [i for key, i in self._instances.items() if key[0] == tenant]

    def _close_soon(self, key: Key, reason: str) -> None:
        task = asyncio.get_running_loop().create_task(self._close(key, reason))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close(self, key: Key, reason: str) -> None:
        instance = self._instances.pop(key, None)
        if instance is None:
            return
        tenant, owner, group, name = key
        log.info(
            "event=consumer_closed tenant=%s owner=%s group=%s instance=%s reason=%s",
            tenant,
            owner,
            group,
            name,
            reason,
        )
        connection = self._connections.pop(key, None)
        if connection is not None:
            instance.caller.services.session.directory.release(connection)
        if self._directory is not None:
            await self._directory.release(key)
        try:
            async with instance.lock:
                await instance.close()
        except (ApiError, ClientError) as exc:
            log.info("event=consumer_close_failed instance=%s error=%s", name, exc)
        await self._release_fetch_client(tenant, key)

    async def _release_fetch_client(self, tenant: str, key: Key) -> None:
        entry = self._fetch_clients.get(tenant)
        if entry is None:
            return
        cluster, users = entry
        users.discard(key)
        if not users:
            del self._fetch_clients[tenant]
            await cluster.close()

    def expired(self, now_ms: int) -> list[Key]:
        return [
            key
            for key, instance in self._instances.items()
            if now_ms - instance.last_used_ms >= self._timeout_ms and not instance.lock.locked()
        ]

    async def _sweep(self) -> None:
        interval = min(1.0, self._timeout_ms / 4000)
        while True:
            await asyncio.sleep(interval)
            for key in self.expired(_now_ms()):
                await self._close(key, "idle")


def _max_poll_records(raw: Any) -> int:
    """The instance's `max.poll.records` (Kafka's consumer setting: default 500, at most
    `MAX_MAX_POLL_RECORDS`)."""
    if raw is None:
        return DEFAULT_MAX_POLL_RECORDS
    try:
        value = int(str(raw))
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_MAX_POLL_RECORDS:
        raise ApiError(
            422,
            f"max.poll.records must be an integer from 1 to {MAX_MAX_POLL_RECORDS}",
            INVALID_CONSUMER_CONFIG,
        )
    return value


def records_body(records: list[dict[str, Any]]) -> bytes:
    return json.dumps(records, separators=(",", ":")).encode()
