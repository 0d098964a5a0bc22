"""Confluent REST v3 routes: clusters, topics, topic configs, partitions, records, groups.

Owns the v3 paths and their JSON shapes (Confluent's `kind` / `metadata` / `data` envelopes; each
resource links to itself under the request's own host). Everything that touches the fleet goes
through `kafka_call` (the Kafka path's filters) or `HttpProducer` (produce rules), so a tenant sees
only its own names: the cluster is the tenant's virtual cluster (the same id a Kafka client sees
in Metadata), and any other cluster id is 404. Produce takes one JSON record per request, or a
stream of them on one request (chunked, or several objects back to back): each record is
answered by one JSON result line, in order, errors included as `{"error_code", "message"}`
lines, as Confluent's streaming produce does. Every route that reads a body authorizes first
(produce: WRITE on the topic; topic creation: CREATE on the cluster or on some topic, the topic's
own ACL checked by CreateTopics' filter once its name is read; configs: ALTER_CONFIGS on the
topic), and bodies are read within `gateway.http.bodies`' bounds (a body that does not start as JSON
is answered 400/413 before any line). Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp import web

from brokers.client import TopicPartition
from brokers.client.errors import ClientError
from brokers.client.offsets import LATEST, list_offsets
from brokers.wire.errors import ErrorCode
from gateway.http import kafka_requests as kr
from gateway.http.bodies import (
    MAX_BODY_BYTES,
    TRAILING,
    body_values,
    json_chunks,
    one_value,
    read_body,
    read_json,
)
from gateway.http.context import Caller
from gateway.http.errors import (
    GROUP_NOT_FOUND,
    TOPIC_NOT_FOUND,
    ApiError,
    from_client,
    from_kafka,
)
from gateway.http.fleet_calls import any_broker, controller, coordinator, kafka_call
from gateway.http.produce import HttpProducer
from gateway.http.produce_stream import ProduceStream
from gateway.http.records import produce_record
from gateway.http.topic_metadata import CREATED_TOPIC_WAIT_S
from gateway.kafka.filters.cluster_view import CLUSTER_NAME

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
    )


def _base(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


class V3:
    def __init__(
        self, caller_of: Callable[[web.Request], Awaitable[Caller]], producer: HttpProducer
    ) -> None:
        self._caller_of = caller_of
        self._producer = producer

    def routes(self) -> list[web.RouteDef]:
        c = "/v3/clusters/{cluster_id}"
        t = c + "/topics/{topic_name}"
        g = c + "/consumer-groups/{consumer_group_id}"
        return [  # produce first: aiohttp tries a path's resources in order, and it is the hot one
            web.post(t + "/records", self.produce),
            web.get("/v3/clusters", self.list_clusters),
            web.get(c, self.get_cluster),
            web.get(c + "/topics", self.list_topics),
            web.post(c + "/topics", self.create_topic),
            web.get(t, self.get_topic),
            web.delete(t, self.delete_topic),
            web.get(t + "/configs", self.list_configs),
            web.post(t + "/configs:alter", self.alter_configs),
            web.get(t + "/configs/{name}", self.get_config),
            web.put(t + "/configs/{name}", self.set_config),
            web.delete(t + "/configs/{name}", self.reset_config),
            web.get(t + "/partitions", self.list_partitions),
            web.get(t + "/partitions/{partition_id}", self.get_partition),
            web.get(c + "/consumer-groups", self.list_groups),
            web.get(g, self.get_group),
            web.get(g + "/consumers", self.list_consumers),
            web.get(g + "/lag-summary", self.lag_summary),
            web.get(g + "/lags", self.list_lags),
        ]

    # -- clusters --------------------------------------------------------------------------------
    async def _caller(self, request: web.Request) -> tuple[Caller, str]:
        caller = await self._caller_of(request)
        cluster_id = caller.cluster_id()
        asked = request.match_info.get("cluster_id")
        if asked is not None and asked != cluster_id:
            raise ApiError(404, f"cluster {asked!r} not found", 40404)
        return caller, cluster_id

    def _cluster(self, request: web.Request, cluster_id: str) -> dict[str, Any]:
        url = f"{_base(request)}/v3/clusters/{cluster_id}"
        return {
            "kind": "KafkaCluster",
            "metadata": {"self": url, "resource_name": f"crn:///kafka={cluster_id}"},
            "cluster_id": cluster_id,
            "topics": {"related": url + "/topics"},
            "consumer_groups": {"related": url + "/consumer-groups"},
        }

    async def list_clusters(self, request: web.Request) -> web.StreamResponse:
        _caller, cluster_id = await self._caller(request)
        return json_response(
            {
                "kind": "KafkaClusterList",
                "metadata": {"self": f"{_base(request)}/v3/clusters", "next": None},
                "data": [self._cluster(request, cluster_id)],
            }
        )

    async def get_cluster(self, request: web.Request) -> web.StreamResponse:
        _caller, cluster_id = await self._caller(request)
        return json_response(self._cluster(request, cluster_id))

    # -- topics ----------------------------------------------------------------------------------
    def _topic(
        self, request: web.Request, cluster_id: str, name: str, partitions: int, replicas: int
    ) -> dict[str, Any]:
        url = f"{_base(request)}/v3/clusters/{cluster_id}/topics/{name}"
        return {
            "kind": "KafkaTopic",
            "metadata": {
                "self": url,
                "resource_name": f"crn:///kafka={cluster_id}/topic={name}",
            },
            "cluster_id": cluster_id,
            "topic_name": name,
            "is_internal": False,
            "replication_factor": replicas,
            "partitions_count": partitions,
            "partitions": {"related": url + "/partitions"},
            "configs": {"related": url + "/configs"},
        }

    async def _metadata(self, caller: Caller, topics: list[str] | None) -> Any:
        return await kafka_call(caller, *kr.METADATA, kr.metadata(topics), any_broker)

    async def _one_topic(self, caller: Caller, name: str) -> Any:
        answer = await self._metadata(caller, [name])
        for topic in answer.topics:
            if topic.name == name:
                code = int(topic.error_code)
                if code == ErrorCode.unknown_topic_or_partition:
                    raise ApiError(404, f"topic {name!r} not found", TOPIC_NOT_FOUND)
                if code != ErrorCode.none:
                    raise from_kafka(code, f"topic {name!r}")
                return topic
        raise ApiError(404, f"topic {name!r} not found", TOPIC_NOT_FOUND)

    async def list_topics(self, request: web.Request) -> web.StreamResponse:
        caller, cluster_id = await self._caller(request)
        answer = await self._metadata(caller, None)
        data = [
            self._topic(request, cluster_id, t.name, len(t.partitions), _replicas(t))
            for t in sorted(answer.topics, key=lambda t: t.name)
            if int(t.error_code) == ErrorCode.none and not t.is_internal
        ]
        return json_response(
            {
                "kind": "KafkaTopicList",
                "metadata": {
                    "self": f"{_base(request)}/v3/clusters/{cluster_id}/topics",
                    "next": None,
                },
                "data": data,
            }
        )

    async def create_topic(self, request: web.Request) -> web.StreamResponse:
        caller, cluster_id = await self._caller(request)
        # before a byte of the body is read: CREATE on the cluster or on some topic (the topic's
        # own ACL is checked by CreateTopics' filter once its name is known)
        if not (
            caller.allowed("CREATE", "CLUSTER", CLUSTER_NAME)
            or caller.policy.allowed_any("CREATE", "TOPIC")
        ):
            raise ApiError(403, "not authorized to create topics", 40301)
        body = await read_json(request)
        if not isinstance(body, dict) or not isinstance(body.get("topic_name"), str):
            raise ApiError(400, "topic_name is required", 40002)
        name = body["topic_name"]
        partitions = _int(body.get("partitions_count", -1), "partitions_count", low=-1)
        replication = _int(body.get("replication_factor", -1), "replication_factor", low=-1)
        configs = _configs(body.get("configs"))
        request_entity = kr.create_topic(name, partitions, replication, configs)
        answer = await kafka_call(caller, *kr.CREATE_TOPICS, request_entity, controller)
        (result,) = answer.topics
        code = int(result.error_code)
        if code != ErrorCode.none:
            raise from_kafka(code, f"topic {name!r}", result.error_message)
        # Answer once this gateway sees the topic led, so a produce right after it finds it.
        await self._producer.topics.led(caller.fleet(name), CREATED_TOPIC_WAIT_S)
        return json_response(
            self._topic(
                request,
                cluster_id,
                name,
                int(result.num_partitions),
                int(result.replication_factor),
            ),
            status=201,
        )

    async def get_topic(self, request: web.Request) -> web.StreamResponse:
        caller, cluster_id = await self._caller(request)
        topic = await self._one_topic(caller, request.match_info["topic_name"])
        return json_response(
            self._topic(request, cluster_id, topic.name, len(topic.partitions), _replicas(topic))
        )

    async def delete_topic(self, request: web.Request) -> web.StreamResponse:
        caller, _cluster_id = await self._caller(request)
        name = request.match_info["topic_name"]
        answer = await kafka_call(caller, *kr.DELETE_TOPICS, kr.delete_topic(name), controller)
        for result in answer.responses:
            code = int(result.error_code)
            if code != ErrorCode.none:
                raise from_kafka(code, f"topic {name!r}")
        return web.Response(status=204)

    # -- configs ---------------------------------------------------------------------------------
    async def _configs(self, caller: Caller, topic: str) -> list[Any]:
        answer = await kafka_call(
            caller, *kr.DESCRIBE_CONFIGS, kr.describe_configs(topic), any_broker
        )
        (result,) = answer.results
        code = int(result.error_code)
        if code != ErrorCode.none:
            raise from_kafka(code, f"topic {topic!r}")
        return list(result.configs)

    def _config(
        self, request: web.Request, cluster_id: str, topic: str, entry: Any
    ) -> dict[str, Any]:
        url = f"{_base(request)}/v3/clusters/{cluster_id}/topics/{topic}/configs/{entry.name}"
        source = CONFIG_SOURCES.get(int(entry.config_source), "UNKNOWN")
        return {
            "kind": "KafkaTopicConfig",
            "metadata": {"self": url},
            "cluster_id": cluster_id,
            "topic_name": topic,
            "name": entry.name,
            "value": None if entry.is_sensitive else entry.value,
            "is_default": source == "DEFAULT_CONFIG",
            "is_read_only": bool(entry.read_only),
            "is_sensitive": bool(entry.is_sensitive),
            "source": source,
            "synonyms": [
                {
                    "name": s.name,
                    "value": s.value,
                    "source": CONFIG_SOURCES.get(int(s.source), "UNKNOWN"),
                }
                for s in entry.synonyms
            ],
        }

    async def list_configs(self, request: web.Request) -> web.StreamResponse:
        caller, cluster_id = await self._caller(request)
        topic = request.match_info["topic_name"]
        entries = await self._configs(caller, topic)
        return json_response(
            {
                "kind": "KafkaTopicConfigList",
                "metadata": {
                    "self": f"{_base(request)}/v3/clusters/{cluster_id}/topics/{topic}/configs",
                    "next": None,
                },
                "data": [self._config(request, cluster_id, topic, e) for e in entries],
            }
        )

    async def get_config(self, request: web.Request) -> web.StreamResponse:
        caller, cluster_id = await self._caller(request)
        topic, name = request.match_info["topic_name"], request.match_info["name"]
        for entry in await self._configs(caller, topic):
            if entry.name == name:
                return json_response(self._config(request, cluster_id, topic, entry))
        raise ApiError(404, f"config {name!r} of topic {topic!r} not found", 40404)

    async def _alter(
        self, caller: Caller, topic: str, changes: list[tuple[str, int, str | None]]
    ) -> None:
        answer = await kafka_call(
            caller, *kr.ALTER_CONFIGS, kr.alter_configs(topic, changes), any_broker
        )
        for result in answer.responses:
            code = int(result.error_code)
            if code != ErrorCode.none:
                raise from_kafka(code, f"configs of topic {topic!r}", result.error_message)

    async def alter_configs(self, request: web.Request) -> web.StreamResponse:
        caller, _cluster_id = await self._caller(request)
        caller.require("ALTER_CONFIGS", "TOPIC", request.match_info["topic_name"])  # body unread
        body = await read_json(request)
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise ApiError(400, "data must be a list of {name, value, operation}", 40002)
        changes: list[tuple[str, int, str | None]] = []
        for entry in data:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise ApiError(400, "each config needs a name", 40002)
            operation = str(entry.get("operation", "SET")).upper()
            if operation not in ("SET", "DELETE"):
                raise ApiError(400, "operation must be SET or DELETE", 40002)
            value = entry.get("value")
            if operation == "SET" and not isinstance(value, str):
                raise ApiError(400, f"config {entry['name']!r} needs a string value", 40002)
            changes.append((entry["name"], kr.SET if operation == "SET" else kr.DELETE, value))
        await self._alter(caller, request.match_info["topic_name"], changes)
        return web.Response(status=204)

    async def set_config(self, request: web.Request) -> web.StreamResponse:
        caller, _cluster_id = await self._caller(request)
        caller.require("ALTER_CONFIGS", "TOPIC", request.match_info["topic_name"])  # body unread
        body = await read_json(request)
        value = body.get("value") if isinstance(body, dict) else None
        if not isinstance(value, str):
            raise ApiError(400, "value must be a string", 40002)
        change = (request.match_info["name"], kr.SET, value)
        await self._alter(caller, request.match_info["topic_name"], [change])
        return web.Response(status=204)

    async def reset_config(self, request: web.Request) -> web.StreamResponse:
        caller, _cluster_id = await self._caller(request)
        change = (request.match_info["name"], kr.DELETE, None)
        await self._alter(caller, request.match_info["topic_name"], [change])
        return web.Response(status=204)

    # -- partitions ------------------------------------------------------------------------------
    def _partition(
        self, request: web.Request, cluster_id: str, topic: str, p: Any
    ) -> dict[str, Any]:
        url = f"{_base(request)}/v3/clusters/{cluster_id}/topics/{topic}/partitions/{p.partition_index}"
        return {
            "kind": "KafkaPartition",
            "metadata": {"self": url},
            "cluster_id": cluster_id,
            "topic_name": topic,
            "partition_id": int(p.partition_index),
            "leader_id": int(p.leader_id),
            "replicas": [int(r) for r in p.replica_nodes],
            "isr": [int(r) for r in p.isr_nodes],
        }

    async def list_partitions(self, request: web.Request) -> web.StreamResponse:
        caller, cluster_id = await self._caller(request)
        topic = await self._one_topic(caller, request.match_info["topic_name"])
        url = f"{_base(request)}/v3/clusters/{cluster_id}/topics/{topic.name}/partitions"
        return json_response(
            {
                "kind": "KafkaPartitionList",
                "metadata": {"self": url, "next": None},
                "data": [
                    self._partition(request, cluster_id, topic.name, p)
                    for p in sorted(topic.partitions, key=lambda p: p.partition_index)
                ],
            }
        )

    async def get_partition(self, request: web.Request) -> web.StreamResponse:
        caller, cluster_id = await self._caller(request)
        topic = await self._one_topic(caller, request.match_info["topic_name"])
        wanted = request.match_info["partition_id"]
        for p in topic.partitions:
            if str(p.partition_index) == wanted:
                return json_response(self._partition(request, cluster_id, topic.name, p))
        raise ApiError(404, f"partition {wanted} of topic {topic.name!r} not found", 40402)

    # -- records ---------------------------------------------------------------------------------
    async def produce(self, request: web.Request) -> web.StreamResponse:
        caller, cluster_id = await self._caller(request)
        topic = request.match_info["topic_name"]
        self._producer.authorize(caller, topic)  # before a byte of the body is read
        if request.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = json_chunks(request)
            head: list[tuple[Any, int]] = []
            async for head in chunks:  # a body that is not JSON: 400/413, not a stream
                if head:
                    break
            return await self._produce_stream(
                request, caller, cluster_id, topic, _chunks_chained(head, chunks)
            )
        raw = await read_body(request, MAX_BODY_BYTES)
        single = one_value(raw)  # the usual body: one record, decoded without the splitter
        if single is None:
            values = body_values(raw)
            first, second = await anext(values, None), await anext(values, None)
            if first is None or first[0] is TRAILING:
                raise ApiError(400, "the request body is empty", 400)
            if second is not None and second[0] is not TRAILING:
                return await self._produce_stream(
                    request, caller, cluster_id, topic, _one_by_one([first, second], values)
                )
            single = first[0]
        record = produce_record(single)
        prepared, throttle = await self._producer.prepare(
            caller, topic, record, len(raw), authorized=True
        )
        answer = await self._producer.send(caller, cluster_id, prepared)
        if throttle > 0:
            await asyncio.sleep(throttle / 1000)
        return web.Response(body=answer, content_type="application/json")

    async def _produce_stream(
        self,
        request: web.Request,
        caller: Caller,
        cluster_id: str,
        topic: str,
        chunks: AsyncIterator[list[tuple[Any, int]]],
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=200)
        response.content_type = "application/json"
        response.enable_chunked_encoding()
        await response.prepare(request)
        await ProduceStream(self._producer, caller, cluster_id, topic, response).run(chunks)
        await response.write_eof()
        return response

    # -- consumer groups -------------------------------------------------------------------------
    def _group(
        self, request: web.Request, cluster_id: str, group_id: str, state: str, protocol: str
    ) -> dict[str, Any]:
        url = f"{_base(request)}/v3/clusters/{cluster_id}/consumer-groups/{group_id}"
        return {
            "kind": "KafkaConsumerGroup",
            "metadata": {"self": url},
            "cluster_id": cluster_id,
            "consumer_group_id": group_id,
            "is_simple": protocol == "",
            "partition_assignor": protocol,
            "state": (state or "UNKNOWN")
            .upper()
            .replace("PREPARINGREBALANCE", "PREPARING_REBALANCE")
            .replace("COMPLETINGREBALANCE", "COMPLETING_REBALANCE"),
            "consumers": {"related": url + "/consumers"},
            "lag_summary": {"related": url + "/lag-summary"},
        }

    async def list_groups(self, request: web.Request) -> web.StreamResponse:
        caller, cluster_id = await self._caller(request)
        metadata = await self._metadata(caller, [])
        seen: dict[str, Any] = {}
        for broker in metadata.brokers:
            node = int(broker.node_id)

            async def route(cluster: Any, node: int = node) -> Any:
                return await cluster.node(node)

            answer = await kafka_call(caller, *kr.LIST_GROUPS, kr.list_groups(), route)
            for group in answer.groups:
                seen[str(group.group_id)] = group
        data = []
        for group_id in sorted(seen):
            described = await self._describe(caller, group_id)
            data.append(
                self._group(
                    request, cluster_id, group_id, described.group_state, described.protocol_data
                )
            )
        return json_response(
            {
                "kind": "KafkaConsumerGroupList",
                "metadata": {
                    "self": f"{_base(request)}/v3/clusters/{cluster_id}/consumer-groups",
                    "next": None,
                },
                "data": data,
            }
        )

    async def _describe(self, caller: Caller, group_id: str) -> Any:
        route = coordinator(caller.fleet(group_id))
        answer = await kafka_call(caller, *kr.DESCRIBE_GROUPS, kr.describe_group(group_id), route)
        (group,) = answer.groups
        code = int(group.error_code)
        if code != ErrorCode.none:
            raise from_kafka(code, f"group {group_id!r}")
        return group

    async def _existing_group(self, caller: Caller, group_id: str) -> Any:
        group = await self._describe(caller, group_id)
        if group.group_state in ("Dead", ""):
            raise ApiError(404, f"consumer group {group_id!r} not found", GROUP_NOT_FOUND)
        return group

    async def get_group(self, request: web.Request) -> web.StreamResponse:
        caller, cluster_id = await self._caller(request)
        group_id = request.match_info["consumer_group_id"]
        group = await self._existing_group(caller, group_id)
        return json_response(
            self._group(request, cluster_id, group_id, group.group_state, group.protocol_data)
        )

    async def list_consumers(self, request: web.Request) -> web.StreamResponse:
        caller, cluster_id = await self._caller(request)
        group_id = request.match_info["consumer_group_id"]
        group = await self._existing_group(caller, group_id)
        url = f"{_base(request)}/v3/clusters/{cluster_id}/consumer-groups/{group_id}/consumers"
        return json_response(
            {
                "kind": "KafkaConsumerList",
                "metadata": {"self": url, "next": None},
                "data": [
                    {
                        "kind": "KafkaConsumer",
                        "metadata": {"self": f"{url}/{m.member_id}"},
                        "cluster_id": cluster_id,
                        "consumer_group_id": group_id,
                        "consumer_id": m.member_id,
                        "instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                    }
                    for m in group.members
                ],
            }
        )

    async def _lags(self, caller: Caller, group_id: str) -> list[dict[str, Any]]:
        group = await self._existing_group(caller, group_id)
        owners = _owners(group)
        answer = await kafka_call(
            caller,
            *kr.OFFSET_FETCH,
            kr.offset_fetch(group_id, None),
            coordinator(caller.fleet(group_id)),
        )
        if int(answer.error_code) != ErrorCode.none:
            raise from_kafka(int(answer.error_code), f"group {group_id!r}")
        committed = {
            (str(t.name), int(p.partition_index)): int(p.committed_offset)
            for t in answer.topics
            for p in t.partitions
            if int(p.committed_offset) >= 0
        }
        for topic in {t for t, _ in committed}:
            caller.require("DESCRIBE", "TOPIC", topic)
        committed = await self._existing(caller, committed)
        wanted = {TopicPartition(caller.fleet(t), p): LATEST for t, p in committed}
        try:
            ends = await list_offsets(caller.services.cluster, wanted) if wanted else {}
        except ClientError as exc:
            raise from_client(exc, "log end offsets") from None
        lags = []
        for (topic, partition), offset in sorted(committed.items()):
            end = ends[TopicPartition(caller.fleet(topic), partition)].offset
            member = owners.get((topic, partition))
            lags.append(
                {
                    "topic_name": topic,
                    "partition_id": partition,
                    "current_offset": offset,
                    "log_end_offset": end,
                    "lag": max(0, end - offset),
                    "consumer_id": member.member_id if member else "",
                    "instance_id": member.group_instance_id if member else None,
                    "client_id": member.client_id if member else "",
                }
            )
        return lags

    async def _existing(
        self, caller: Caller, committed: dict[tuple[str, int], int]
    ) -> dict[tuple[str, int], int]:
        """The committed offsets of partitions that still exist (a deleted topic has no lag)."""
        cluster = caller.services.cluster
        try:
            metadata = await cluster.metadata()
            unseen = {caller.fleet(t) for t, _ in committed} - metadata.topics.keys()
            if unseen:  # asked alone (the kept metadata learns them), not the whole fleet
                await cluster.topics_metadata(sorted(unseen))
                metadata = await cluster.metadata()
        except ClientError as exc:
            raise from_client(exc, "metadata") from None

        def exists(topic: str, partition: int) -> bool:
            found = metadata.topics.get(caller.fleet(topic))
            return found is not None and partition in found.partitions

        return {tp: offset for tp, offset in committed.items() if exists(*tp)}

    async def list_lags(self, request: web.Request) -> web.StreamResponse:
        caller, cluster_id = await self._caller(request)
        group_id = request.match_info["consumer_group_id"]
        url = f"{_base(request)}/v3/clusters/{cluster_id}/consumer-groups/{group_id}/lags"
        lags = await self._lags(caller, group_id)
        return json_response(
            {
                "kind": "KafkaConsumerLagList",
                "metadata": {"self": url, "next": None},
                "data": [
                    {
                        "kind": "KafkaConsumerLag",
                        "metadata": {
                            "self": f"{url}/{lag['topic_name']}/partitions/{lag['partition_id']}"
                        },
                        "cluster_id": cluster_id,
                        "consumer_group_id": group_id,
                        **lag,
                    }
                    for lag in lags
                ],
            }
        )

    async def lag_summary(self, request: web.Request) -> web.StreamResponse:
        caller, cluster_id = await self._caller(request)
        group_id = request.match_info["consumer_group_id"]
        lags = await self._lags(caller, group_id)
        top = max(lags, key=lambda lag: lag["lag"], default=None)
        url = f"{_base(request)}/v3/clusters/{cluster_id}/consumer-groups/{group_id}/lag-summary"
        return json_response(
            {
                "kind": "KafkaConsumerGroupLagSummary",
                "metadata": {"self": url},
                "cluster_id": cluster_id,
                "consumer_group_id": group_id,
                "max_lag_consumer_id": top["consumer_id"] if top else "",
                "max_lag_instance_id": top["instance_id"] if top else None,
                "max_lag_client_id": top["client_id"] if top else "",
                "max_lag_topic_name": top["topic_name"] if top else "",
                "max_lag_partition_id": top["partition_id"] if top else 0,
                "max_lag": top["lag"] if top else 0,
                "total_lag": sum(lag["lag"] for lag in lags),
            }
        )


# -- helpers -----------------------------------------------------------------------------------
def _replicas(topic: Any) -> int:
    return max((len(p.replica_nodes) for p in topic.partitions), default=0)


def _int(value: Any, name: str, *, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low or value > 2**31 - 1:
        raise ApiError(400, f"{name} must be an integer ≥ {low}", 40002)
    return value


def _configs(raw: Any) -> dict[str, str | None]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ApiError(400, "configs must be a list of {name, value}", 40002)
    out: dict[str, str | None] = {}
    for entry in raw:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ApiError(400, "each config needs a name", 40002)
        value = entry.get("value")
        if value is not None and not isinstance(value, str):
            raise ApiError(400, f"config {entry['name']!r}: value must be a string", 40002)
        out[entry["name"]] = value
    return out


def _owners(group: Any) -> dict[tuple[str, int], Any]:
    from gateway.kafka.filters.consumer_protocol import MalformedConsumerProtocol, parse_assignment

    owners: dict[tuple[str, int], Any] = {}
    for member in group.members:
        if not member.member_assignment:
            continue
        try:
            assignment = parse_assignment(bytes(member.member_assignment))
        except MalformedConsumerProtocol:
            continue
        for topic, partitions in assignment.assigned_partitions:
            for partition in partitions:
                owners[(topic, partition)] = member
    return owners


def _json_line(body: dict[str, Any]) -> str:
    return json.dumps(body, separators=(",", ":")) + "\n"


async def _chunks_chained(
    head: list[tuple[Any, int]], rest: AsyncIterator[list[tuple[Any, int]]]
) -> AsyncIterator[list[tuple[Any, int]]]:
    """The values of the chunk already read off a body, then the chunks after it."""
    yield head
    async for chunk in rest:
        yield chunk


async def _one_by_one(
    head: list[tuple[Any, int]], rest: AsyncIterator[tuple[Any, int]]
) -> AsyncIterator[list[tuple[Any, int]]]:
    """The values already read off a whole body, then the rest of them, one per list."""
    for value in head:
        yield [value]
    async for value in rest:
        yield [value]
