"""Waiting for a topic's metadata: what the HTTP API does for a topic it does not see yet.

Owns `TopicMetadata`, the HTTP side's view of which fleet topics exist and how many partitions
they have. A topic made a moment ago (by this gateway's v3 create route, another gateway or a Kafka
client) reaches the fleet client's metadata only once the brokers have it: in a cluster the
controller creates it, then every broker learns of it. Kafka's producer blocks a send for an
unknown topic's metadata up to `max.block.ms`; this does the same, bounded by `wait_s`:
`partitions` answers at once from the cached metadata, else asks the brokers for that topic alone
(`Cluster.topics_metadata`, which also updates the cached metadata: a wait costs what the topic
holds, not a read of the whole fleet's) with a backoff of 50 ms doubling to 400 ms until the
topic is there, and raises `UnknownTopicError` once `wait_s` has
passed without it (the produce route then answers 404). A topic found missing that way is
remembered for `MISSING_MEMORY_S` (at most `MAX_MISSING` of them): lookups for it meanwhile
refresh once and do not wait again, so a produce stream of many records to a topic that does not
exist is not held `wait_s` per record. `led` waits the same way until every partition of a topic
has a leader: the v3 create route answers once a new topic is led, or after
`CREATED_TOPIC_WAIT_S` (the topic exists either way). Concurrent waiters for a topic share one
Metadata request in flight, so a burst of requests for an unknown topic costs one request per
backoff step, not one each. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from brokers.client import Cluster
from brokers.client.errors import ClientError, UnknownTopicError
from brokers.client.metadata import NO_LEADER, ClusterMetadata, TopicInfo
from brokers.wire.errors import ErrorCode

CREATED_TOPIC_WAIT_S = 5.0  # the v3 create route's bound (Kafka's CreateTopics waits too)
MISSING_MEMORY_S = 10.0  # after a wait ends without the topic, lookups refresh once, not wait
MAX_MISSING = 10_000  # topics remembered as missing (the oldest are forgotten first)
FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 0.4
_Check = Callable[[ClusterMetadata, str], "TopicInfo | None"]


class TopicMetadata:
    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._asking: dict[str, asyncio.Future[ClusterMetadata]] = {}  # fleet name → in flight
        self._missing: dict[str, float] = {}  # fleet name → when a wait ended without it

    async def partitions(self, fleet_name: str, wait_s: float) -> int:
        """The topic's partition count; UnknownTopicError when it is not seen within `wait_s`."""
        found = _known(await self._cluster.metadata(), fleet_name)
        if found is None:
            recently = self._recently_missing(fleet_name)
            found = await self._wait(fleet_name, 0.0 if recently else wait_s, _known)
        if found is None:
            self._remember_missing(fleet_name)
            raise UnknownTopicError(f"unknown topic {fleet_name!r}")
        self._missing.pop(fleet_name, None)
        return len(found.partitions)

    async def led(self, fleet_name: str, wait_s: float) -> bool:
        """Whether every partition of the topic has a leader within `wait_s` (False, too, when
        the fleet does not answer: the caller's answer does not depend on it)."""
        try:
            led = _led(await self._cluster.metadata(), fleet_name) is not None
            led = led or await self._wait(fleet_name, wait_s, _led) is not None
        except ClientError:
            return False
        if led:
            self._missing.pop(fleet_name, None)
        return led

    async def _wait(self, fleet_name: str, wait_s: float, ready: _Check) -> TopicInfo | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        backoff = FIRST_BACKOFF_S
        while True:
            found = ready(await self._asked(fleet_name), fleet_name)
            left = deadline - loop.time()
            if found is not None or left <= 0:
                return found
            await asyncio.sleep(min(backoff, left))
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    def _recently_missing(self, fleet_name: str) -> bool:
        since = self._missing.get(fleet_name)
        return since is not None and asyncio.get_running_loop().time() - since < MISSING_MEMORY_S

    def _remember_missing(self, fleet_name: str) -> None:
        self._missing.pop(fleet_name, None)
        if len(self._missing) >= MAX_MISSING:
            del self._missing[next(iter(self._missing))]  # insertion order: the oldest
        self._missing[fleet_name] = asyncio.get_running_loop().time()

    async def _asked(self, fleet_name: str) -> ClusterMetadata:
        """Fresh metadata of the topic; callers that ask while its request is in flight share
        its answer."""
        asking = self._asking.get(fleet_name)
        if asking is None:
            asking = asyncio.ensure_future(self._cluster.topics_metadata([fleet_name]))
            asking.add_done_callback(lambda done: self._asked_done(fleet_name, done))
            self._asking[fleet_name] = asking
        return await asyncio.shield(asking)

    def _asked_done(self, fleet_name: str, future: asyncio.Future[ClusterMetadata]) -> None:
        if self._asking.get(fleet_name) is future:
            del self._asking[fleet_name]
        if not future.cancelled():
            future.exception()  # retrieved here, so a failure no waiter read is not logged


def _known(metadata: ClusterMetadata, name: str) -> TopicInfo | None:
    found = metadata.topics.get(name)
    if found is None or found.error == ErrorCode.unknown_topic_or_partition:
        return None
    return found if found.partitions else None


def _led(metadata: ClusterMetadata, name: str) -> TopicInfo | None:
    found = _known(metadata, name)
    if found is None or any(p.leader == NO_LEADER for p in found.partitions.values()):
        return None
    return found
