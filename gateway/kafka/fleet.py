"""The gateway's view of the fleet behind it: brokers, their API versions, and the gateway
endpoints standing for them.

Owns: the brokers' addresses (from Metadata, refreshed every `refresh_s` and on demand), the
brokers' API version ranges and finalized features (a broker's ApiVersions answer, so the
gateway advertises only what the fleet serves), the port that stands for each broker (`port_base + node id`), the virtual
cluster id each tenant sees (a digest of the fleet's id and the tenant id: stable, and telling a
tenant nothing about the fleet), and a tenant's current partition count for its limits. Talks to
the brokers through the project's client. Runs on the event loop; not thread-safe.

What a tenant's request makes it look up (a topic's partition count, the name of a topic id) is
asked of a broker naming those topics only (`partition_counts`, `topic_names`: one Metadata
request for all the names or ids of a request), so its cost follows the request, not the fleet:
a full answer for a fleet of 17,000 partitions cost the gateway ~130 ms of its loop, and a tenant
naming 20 unknown ids in one Metadata request used to pay that 20 times (2.6 s). The periodic
refresh (every `refresh_s`) asks for the brokers alone (a Metadata request naming no topic, whose
cost does not grow with the fleet); every topic is read at start, by `tenant_partitions` (the
partition ledger's count of whole tenants, one snapshot for a whole round of tenants) and by the
periodic refresh once `FULL_READ_S` passed since the last full read, which rebuilds the id cache
(ids of deleted topics go; new ones are also learnt on a miss). `coordinated_names` lists every
broker's groups or transactional ids for `coordinated_names.CoordinatedNames` (whose listings
are rare: at start and when a tenant is at its limit).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import random
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from brokers.client import Cluster
from brokers.client.errors import BrokerResponseError, ClientError, UnsupportedVersionError
from brokers.client.metadata import ClusterMetadata, TopicInfo
from brokers.wire.entities import make, request_module
from brokers.wire.errors import ErrorCode
from gateway.kafka.api_table import ApiRange, advertised, finalized_features
from gateway.kafka.coordinated_names import NameKind
from gateway.kafka.filter import HeldGroup, LookupBudget
from gateway.kafka.namespace import tenant_of

log = logging.getLogger("pier.gateway.fleet")
API_VERSIONS = 18
LIST_GROUPS = 16
LIST_TRANSACTIONS = 66
CONSUMER_GROUP_DESCRIBE = 69
MEMBER_LOOKUP_TIMEOUT_S = 2.0  # past it the member is asked to rejoin instead
MEMBER_LOOKUP_FRESH_S = 2.0  # a group's description answers its members' look-ups this long
MAX_DESCRIBED_GROUPS = 1_024  # descriptions remembered; the oldest go first
# The largest description a member look-up reads (its own connections: one larger fails only
# them, and the member is asked to rejoin): ~1,000 members of a thousand subscribed topics.
MEMBER_LOOKUP_MAX_BYTES = 32 << 20
CLASSIC_MEMBER = 0  # ConsumerGroupDescribe v1's MemberType of a classic member in a mixed group
# A group coordinator that moved or is loading: forgotten and asked again (also HTTP's calls).
COORDINATOR_MOVED = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
    }
)
ID_REFRESH_S = 1.0  # at most one look-up a second of the topic ids the gateway does not know
MAX_MISSED_IDS = 1_000  # ids one look-up asks for (the rest of a flood wait for the next)
MAX_REMEMBERED_IDS = 1_000_000
FULL_READ_S = 60.0  # the periodic refresh reads every topic at most this often (module doc)


class FleetDirectory:
    def __init__(
        self,
        cluster: Cluster,
        *,
        advertised_host: str,
        port_base: int,
        default_partitions: int = 1,
        refresh_s: float = 10.0,
        on_brokers: Callable[[set[int]], None] | None = None,
        members_cluster: Cluster | None = None,
    ) -> None:
        self._cluster = cluster
        self._members_cluster = members_cluster or cluster  # where member look-ups go
        self._host = advertised_host
        self._port_base = port_base
        self.default_partitions = default_partitions
        self._refresh_s = refresh_s
        self._on_brokers = on_brokers
        self._metadata: ClusterMetadata | None = None
        self._table: dict[int, ApiRange] = {}
        self._features: dict[str, int] = {}  # the brokers' finalized feature levels
        self._task: asyncio.Task[None] | None = None
        # topic id → fleet name, for Produce v13 / Fetch v13+ on the hot path (`known_topic_name`)
        self._ids: dict[uuid.UUID, str] = {}
        self._id_refresh: asyncio.Task[None] | None = None
        self._id_refresh_at = 0.0
        self._missed: set[uuid.UUID] = set()  # ids asked for on the hot path, not known
        self._full_read_at = float("-inf")  # loop time of the last read of every topic
        self._member_lookups: dict[str, asyncio.Future[HeldGroup | None]] = {}  # by fleet group
        self._described: dict[str, tuple[float, HeldGroup | None]] = {}  # (loop time, answer)

    async def start(self) -> None:
        """Learn the fleet once (raises ClientError when no broker answers), then keep current."""
        await self.refresh()
        self._task = asyncio.create_task(self._keep_current(), name="fleet-refresh")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def refresh(self) -> ClusterMetadata:
        """Read every topic: the brokers, and the id cache rebuilt."""
        metadata = await self._cluster.metadata(refresh=True)
        self._full_read_at = asyncio.get_running_loop().time()
        self._ids = {t.topic_id: n for n, t in metadata.topics.items() if t.topic_id}
        await self._learnt(metadata)
        return metadata

    async def refresh_brokers(self) -> ClusterMetadata:
        """The brokers and the fleet's id alone (a Metadata request naming no topic)."""
        metadata = await self._cluster.topics_metadata((), ())
        await self._learnt(metadata)
        return metadata

    async def _learnt(self, metadata: ClusterMetadata) -> None:
        known = set(self._metadata.brokers) if self._metadata else set()
        self._metadata = metadata
        if not self._table:
            self._table = advertised(await self._broker_ranges())
        if self._on_brokers is not None and set(metadata.brokers) != known:
            self._on_brokers(set(metadata.brokers))

    async def _keep_current(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self._refresh_s)
            try:
                if loop.time() - self._full_read_at >= FULL_READ_S:
                    await self.refresh()
                else:
                    await self.refresh_brokers()
            except ClientError as exc:
                log.warning("event=fleet_refresh_failed error=%r", str(exc))

    async def _broker_ranges(self) -> dict[int, tuple[int, int]]:
        connection = await self._cluster.any_connection()
        request = make(
            request_module(API_VERSIONS, 3),
            "ApiVersionsRequest",
            client_software_name="pier-gateway",
            client_software_version="0.1.0",
        )
        response: Any = await connection.send(request)
        self._features = {
            str(f.name): int(f.max_version_level) for f in response.finalized_features
        }
        return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}

    # -- what sessions and filters ask ---------------------------------------------------------
    def api_table(self) -> dict[int, ApiRange]:
        return self._table

    def finalized_features(self) -> dict[str, int]:
        """The feature levels tenants see (`api_table.finalized_features`)."""
        return finalized_features(self._features, self._table)

    def port_for(self, node_id: int) -> int:
        return self._port_base + node_id

    def endpoint(self, node_id: int) -> tuple[str, int] | None:
        if self._metadata is None or node_id not in self._metadata.brokers:
            return None
        return self._host, self.port_for(node_id)

    def upstream_address(self, node_id: int | None) -> tuple[str, int] | None:
        if self._metadata is None or not self._metadata.brokers:
            return None
        if node_id is None:
            broker = random.choice(list(self._metadata.brokers.values()))
        else:
            found = self._metadata.brokers.get(node_id)
            if found is None:
                return None
            broker = found
        return broker.host, broker.port

    def cluster_id(self, tenant_id: str) -> str:
        fleet_id = (self._metadata.cluster_id if self._metadata else None) or "pier"
        digest = hashlib.sha256(f"{fleet_id}/{tenant_id}".encode()).digest()[:16]
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    async def tenant_partitions(self, tenants: Sequence[str]) -> dict[str, int]:
        """Each tenant's partitions on the fleet now, from one fresh read of every topic."""
        metadata = await self.refresh()
        counts = dict.fromkeys(tenants, 0)
        for name, topic in metadata.topics.items():
            owner = tenant_of(name)
            if owner is not None and owner[0] in counts:
                counts[owner[0]] += len(topic.partitions)
        return counts

    async def partition_counts(self, fleet_topics: Iterable[str]) -> dict[str, int | None]:
        """Each fleet topic's partition count now, None when the fleet has no such topic (one
        Metadata request naming only these topics)."""
        names = list(dict.fromkeys(fleet_topics))
        if not names:
            return {}
        metadata = await self._describe(names, ())
        return {name: _partition_count(metadata.topics.get(name)) for name in names}

    async def topic_names(self, topic_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str | None]:
        """The fleet name of each topic id now, None for an id no topic has (one Metadata v12
        request naming only these ids; ids are the brokers')."""
        ids = list(dict.fromkeys(topic_ids))
        wanted = [topic_id for topic_id in ids if topic_id.int != 0]
        found: dict[uuid.UUID, str] = {}
        if wanted:
            metadata = await self._describe((), wanted)
            found = {t.topic_id: n for n, t in metadata.topics.items() if t.topic_id is not None}
        return {topic_id: found.get(topic_id) for topic_id in ids}

    async def _describe(self, names: Sequence[str], ids: Sequence[uuid.UUID]) -> ClusterMetadata:
        """Metadata of the named topics and ids only. A broker too old to look ids up (before
        v12) is asked for every topic instead."""
        try:
            metadata = await self._cluster.topics_metadata(names, ids)
        except UnsupportedVersionError:
            return await self.refresh()
        for name, topic in metadata.topics.items():
            if topic.topic_id is not None:
                self.remember_topic_id(name, topic.topic_id)
        return metadata

    def known_topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The fleet name of the topic with `topic_id` as last seen, without waiting (the hot
        path's look-up). A miss is looked up in the background with the others of the moment
        (those ids alone, at most `MAX_MISSED_IDS`, one look-up per `ID_REFRESH_S`), so a topic
        made since is known shortly (ids are never reused) and unknown ids cost a tenant's
        requests what they name, not a read of the whole fleet."""
        if topic_id.int == 0:
            return None
        name = self._ids.get(topic_id)
        if name is None:
            if len(self._missed) < MAX_MISSED_IDS:
                self._missed.add(topic_id)
            self._refresh_ids()
        return name

    def remember_topic_id(self, fleet_name: str, topic_id: uuid.UUID) -> None:
        """An id the brokers just answered (a Metadata answer), until the next refresh."""
        if topic_id.int != 0 and len(self._ids) < MAX_REMEMBERED_IDS:
            self._ids[topic_id] = fleet_name

    def _refresh_ids(self) -> None:
        now = asyncio.get_running_loop().time()
        running = self._id_refresh is not None and not self._id_refresh.done()
        if running or now - self._id_refresh_at < ID_REFRESH_S:
            return
        self._id_refresh_at = now
        self._id_refresh = asyncio.create_task(self._quiet_refresh(), name="fleet-id-refresh")

    async def _quiet_refresh(self) -> None:
        missed, self._missed = self._missed, set()
        try:
            await self.topic_names(missed)  # remembers each id found
        except ClientError as exc:
            log.warning("event=fleet_refresh_failed error=%r", str(exc))

    async def consumer_group_members(
        self, fleet_group: str, budget: LookupBudget
    ) -> HeldGroup | None:
        """`Fleet.consumer_group_members`: one ConsumerGroupDescribe v1 to the group's coordinator,
        shared by the requests asking about the same group meanwhile and for
        `MEMBER_LOOKUP_FRESH_S` after (the members of a group all moving at once, after a restart,
        cost one), bounded by `MEMBER_LOOKUP_TIMEOUT_S`; a moved coordinator is looked up again."""
        loop = asyncio.get_running_loop()
        remembered = self._described.get(fleet_group)
        if remembered is not None and loop.time() - remembered[0] < MEMBER_LOOKUP_FRESH_S:
            return remembered[1]
        pending = self._member_lookups.get(fleet_group)
        if pending is None:
            if not budget.take():
                return None
            pending = asyncio.ensure_future(self._describe_consumer_group(fleet_group, budget))
            self._member_lookups[fleet_group] = pending
            pending.add_done_callback(lambda done: self._described_now(fleet_group, done))
        return await asyncio.shield(pending)

    def _described_now(self, fleet_group: str, done: asyncio.Future[HeldGroup | None]) -> None:
        self._member_lookups.pop(fleet_group, None)
        if done.cancelled() or done.exception() is not None:
            return
        described = self._described
        described.pop(fleet_group, None)
        described[fleet_group] = (asyncio.get_running_loop().time(), done.result())
        while len(described) > MAX_DESCRIBED_GROUPS:
            del described[next(iter(described))]  # the oldest

    async def _describe_consumer_group(
        self, fleet_group: str, budget: LookupBudget
    ) -> HeldGroup | None:
        request = make(
            request_module(CONSUMER_GROUP_DESCRIBE, 1),
            "ConsumerGroupDescribeRequest",
            group_ids=(fleet_group,),
            include_authorized_operations=False,
        )

        cluster = self._members_cluster

        async def attempt() -> Any:
            connection = await cluster.coordinator(fleet_group)
            answer: Any = await connection.send(request)
            for group in answer.groups:
                if group.error_code in COORDINATOR_MOVED:  # forget it, ask again
                    raise BrokerResponseError(ErrorCode(group.error_code), fleet_group)
            return answer

        try:
            async with asyncio.timeout(MEMBER_LOOKUP_TIMEOUT_S):
                answer = await cluster.call(attempt)
        except (ClientError, TimeoutError, OSError) as exc:
            log.info("event=member_lookup_failed error=%r", type(exc).__name__)
            return None
        groups = [g for g in answer.groups if g.group_id == fleet_group]
        if len(groups) != 1 or groups[0].error_code != ErrorCode.none:
            return None
        group = groups[0]
        budget.spend(sum(_described_bytes(m) for m in group.members))
        members = {str(m.member_id): m for m in group.members if m.member_type != CLASSIC_MEMBER}
        return HeldGroup(str(group.assignor_name), members)

    def broker_ids(self) -> set[int]:
        return set(self._metadata.brokers) if self._metadata else set()

    async def coordinated_names(self, kind: NameKind, prefix: str = "") -> tuple[set[str], bool]:
        """`NameLister`: every group (ListGroups v4) or transactional id (ListTransactions v0)
        each broker coordinates (those starting with `prefix`, sent as the requests' name
        scope), asked of all brokers at once; whether all of them answered."""
        brokers = sorted(self.broker_ids())
        answers = await asyncio.gather(
            *(self._names_of(node, kind, prefix) for node in brokers), return_exceptions=True
        )
        names: set[str] = set()
        failed = 0
        for answer in answers:
            if isinstance(answer, BaseException):
                if not isinstance(answer, ClientError):
                    raise answer
                failed += 1
                continue
            names.update(answer)
        if brokers and failed == len(brokers):
            raise ClientError(f"no broker listed its {kind.value}s")
        return names, failed == 0

    async def _names_of(self, node_id: int, kind: NameKind, prefix: str) -> list[str]:
        connection = await self._cluster.node(node_id)
        scope = prefix or None
        if kind is NameKind.GROUP:
            request = make(request_module(LIST_GROUPS, 4), "ListGroupsRequest", states_filter=())
            answer: Any = await connection.send(request, name_scope=scope)
            return [str(g.group_id) for g in answer.groups if g.group_id.startswith(prefix)]
        request = make(
            request_module(LIST_TRANSACTIONS, 0),
            "ListTransactionsRequest",
            state_filters=(),
            producer_id_filters=(),
        )
        answer = await connection.send(request, name_scope=scope)
        states = answer.transaction_states
        return [str(t.transactional_id) for t in states if t.transactional_id.startswith(prefix)]


def _described_bytes(member: Any) -> int:
    """About what a described member weighs in the answer (its strings and assignments)."""
    texts = (member.member_id, member.client_id, member.instance_id, member.rack_id)
    size = sum(len(t) for t in texts if t) + len(member.subscribed_topic_regex or "")
    size += sum(len(name) for name in member.subscribed_topic_names)
    for assignment in (member.assignment, member.target_assignment):
        size += sum(32 + 4 * len(t.partitions) for t in assignment.topic_partitions)
    return size


def _partition_count(topic: TopicInfo | None) -> int | None:
    return None if topic is None or not topic.partitions else len(topic.partitions)
