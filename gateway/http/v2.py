"""Confluent REST v2 consumer routes: instances, subscription, assignment, records, offsets.

Owns the `/consumers/...` paths and their JSON shapes (Confluent's v2 API; request and response
content type `application/vnd.kafka.v2+json`, plain `application/json` accepted; records are
answered as `application/vnd.kafka.<format>.v2+json`). An `Accept` naming another embedded format
than the instance's is 406 (40601). Offsets committed through `POST .../offsets` name the last
record consumed, as Confluent's do (the group's committed position is that offset + 1); without a
body the instance's current positions are committed. A poll's answer is charged to the consumer
byte-rate quota and metered as the body's bytes; a throttled poll is answered, empty, after its
throttle. With `--workers N`, an instance lives in the worker that owns its name and any worker
answers for it (`gateway.http.worker_routing`). A route that reads a body authorizes before
it reads (creating an instance: READ on the group; an instance's routes: the instance is the
caller's own, else 404, and the caller may still READ its group, else 403). Runs on the event
loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web

from brokers.client.offsets import EARLIEST, LATEST
from gateway.http.bodies import read_json
from gateway.http.consumers import (
    MAX_MAX_POLL_RECORDS,
    ConsumerInstance,
    ConsumerRegistry,
    records_body,
)
from gateway.http.context import Caller
from gateway.http.decoding import off_loop
from gateway.http.errors import CONSUMER_FORMAT_MISMATCH, ApiError
from gateway.http.instance_directory import InstanceDirectory
from gateway.http.worker_routing import (
    GATEWAY_HOP,
    WorkerRouter,
    arrived_internally,
    gateways_session,
    to_gateway,
)

V2_JSON = "application/vnd.kafka.v2+json"
MAX_MAX_BYTES = 64 * 1024 * 1024


def v2_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(), status=status, content_type=V2_JSON
    )


def _partitions(body: Any, key: str, *, offsets: bool) -> list[tuple[tuple[str, int], int]]:
    entries = body.get(key) if isinstance(body, dict) else None
    if not isinstance(entries, list):
        raise ApiError(422, f"{key} must be a list", 42202)
    out: list[tuple[tuple[str, int], int]] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise ApiError(422, f"each of {key} is an object", 42202)
        topic, partition, offset = (
            entry.get("topic"),
            entry.get("partition"),
            entry.get("offset", 0),
        )
        if not isinstance(topic, str) or not topic:
            raise ApiError(422, "topic must be a non-empty string", 42202)
        for name, value in (("partition", partition), ("offset", offset)):
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63 - 1:
                raise ApiError(422, f"{name} must be a non-negative integer", 42202)
        if offsets and "offset" not in entry:
            raise ApiError(422, "offset is required", 42202)
        assert isinstance(partition, int) and isinstance(offset, int)
        out.append(((topic, partition), offset))
    return out


def _query_int(request: web.Request, name: str, default: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"{name} must be an integer", 400) from None
    if value < 0:
        raise ApiError(400, f"{name} must not be negative", 400)
    return min(value, high)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class V2:
    def __init__(
        self,
        caller_of: Callable[[web.Request], Awaitable[Caller]],
        registry: ConsumerRegistry,
        router: WorkerRouter | None = None,
        directory: InstanceDirectory | None = None,
    ) -> None:
        self._caller_of = caller_of
        self._registry = registry
        self._router = router  # set in a worker of `--workers N`
        self._directory = directory  # set with ZooKeeper: instances of the other gateways
        self._gateways: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._gateways is not None:
            await self._gateways.close()

    def routes(self) -> list[web.RouteDef]:
        i = "/consumers/{group_name}/instances/{instance}"
        at = self._at_owner
        return [
            web.post("/consumers/{group_name}", self._with_client_address(self.create)),
            web.delete(i, at(self.delete)),
            web.post(i + "/subscription", at(self.subscribe)),
            web.get(i + "/subscription", at(self.get_subscription)),
            web.delete(i + "/subscription", at(self.unsubscribe)),
            web.post(i + "/assignments", at(self.assign)),
            web.get(i + "/assignments", at(self.get_assignment)),
            web.post(i + "/offsets", at(self.commit)),
            web.get(i + "/offsets", at(self.committed)),
            web.post(i + "/positions", at(self.seek)),
            web.post(i + "/positions/beginning", at(self.seek_beginning)),
            web.post(i + "/positions/end", at(self.seek_end)),
            web.get(i + "/records", at(self.records)),
        ]

    def _with_client_address(self, handler: Handler) -> Handler:
        if self._router is None:
            return handler

        async def addressed(request: web.Request) -> web.StreamResponse:
            return await handler(WorkerRouter.with_client_address(request))

        return addressed

    def _at_owner(self, handler: Handler) -> Handler:
        """`handler` where the instance lives: here, or proxied to the worker that owns it, or
        to the gateway that holds it, once the caller is authenticated here (a refusal costs no
        proxying)."""
        router, directory = self._router, self._directory
        if router is None and directory is None:
            return handler

        async def routed(request: web.Request) -> web.StreamResponse:
            group, name = request.match_info["group_name"], request.match_info["instance"]
            if router is not None and not arrived_internally(request):
                owner = router.owner(group, name)
                if owner is not None:
                    await self._caller_of(request)
                    return await router.forward(request, owner)
            request = WorkerRouter.with_client_address(request)
            if directory is not None and GATEWAY_HOP not in request.headers:
                caller = await self._caller_of(request)
                key = (caller.tenant_id, caller.principal.service_account_id, group, name)
                if not self._registry.holds(key):
                    url = await directory.lookup(key)
                    if url is not None and url != directory.url:
                        return await to_gateway(self._gateway_client(), request, url)
            return await handler(request)

        return routed

    def _gateway_client(self) -> aiohttp.ClientSession:
        if self._gateways is None or self._gateways.closed:
            self._gateways = gateways_session()
        return self._gateways

    async def _instance(self, request: web.Request) -> tuple[Caller, ConsumerInstance]:
        caller = await self._caller_of(request)
        group = request.match_info["group_name"]
        instance = self._registry.get(caller, group, request.match_info["instance"])
        return caller, instance

    async def _reading_instance(self, request: web.Request) -> tuple[Caller, ConsumerInstance]:
        """The caller's own instance, for a route that reads a body: the instance is the
        caller's (else 404) and the caller may still READ its group (else 403), both before a
        byte of the body is read."""
        caller, instance = await self._instance(request)
        caller.require("READ", "GROUP", instance.group)
        return caller, instance

    async def create(self, request: web.Request) -> web.StreamResponse:
        caller = await self._caller_of(request)
        group = request.match_info["group_name"]
        caller.require("READ", "GROUP", group)
        body = await read_json(request) or {}
        if not isinstance(body, dict):
            raise ApiError(422, "the body is a JSON object of consumer settings", 42204)
        scheme, host = request.scheme, request.host
        if self._router is not None:
            if not body.get("name"):
                body = {**body, "name": self._router.local_name(group)}
            owner = self._router.owner(group, str(body["name"]))
            if owner is not None and not arrived_internally(request):
                data = json.dumps(body).encode()
                return await self._router.forward(request, owner, body=data, create=True)
            scheme, host = self._router.origin(request)
        instance = await self._registry.create(caller, group, body)
        base = f"{scheme}://{host}/consumers/{group}/instances/{instance.name}"
        return v2_response({"instance_id": instance.name, "base_uri": base})

    async def delete(self, request: web.Request) -> web.StreamResponse:
        caller, instance = await self._instance(request)
        await self._registry.delete(
            caller.tenant_id, instance.group, instance.name, "deleted", owner=instance.owner
        )
        return web.Response(status=204)

    async def subscribe(self, request: web.Request) -> web.StreamResponse:
        _caller, instance = await self._reading_instance(request)
        body = await read_json(request)
        topics = body.get("topics") if isinstance(body, dict) else None
        if (
            not isinstance(topics, list)
            or not topics
            or not all(isinstance(t, str) and t for t in topics)
        ):
            raise ApiError(422, "topics must be a non-empty list of topic names", 42202)
        async with instance.using():
            await instance.subscribe(sorted(set(topics)))
        return web.Response(status=204)

    async def get_subscription(self, request: web.Request) -> web.StreamResponse:
        _caller, instance = await self._instance(request)
        return v2_response({"topics": list(instance.subscription)})

    async def unsubscribe(self, request: web.Request) -> web.StreamResponse:
        _caller, instance = await self._instance(request)
        async with instance.using():
            await instance.unsubscribe()
        return web.Response(status=204)

    async def assign(self, request: web.Request) -> web.StreamResponse:
        caller, instance = await self._reading_instance(request)
        partitions = [
            tp for tp, _ in _partitions(await read_json(request), "partitions", offsets=False)
        ]
        for topic in {t for t, _ in partitions}:
            caller.require("DESCRIBE", "TOPIC", topic)
        async with instance.using():
            await instance.assign(partitions)
        return web.Response(status=204)

    async def get_assignment(self, request: web.Request) -> web.StreamResponse:
        _caller, instance = await self._instance(request)
        return v2_response(
            {"partitions": [{"topic": t, "partition": p} for t, p in instance.assignment()]}
        )

    async def commit(self, request: web.Request) -> web.StreamResponse:
        _caller, instance = await self._reading_instance(request)
        body = await read_json(request)
        async with instance.using():
            if body is None or (isinstance(body, dict) and not body.get("offsets")):
                await instance.commit()
            else:
                offsets = {
                    tp: offset + 1 for tp, offset in _partitions(body, "offsets", offsets=True)
                }
                await instance.commit(offsets)
        return web.Response(status=204)

    async def committed(self, request: web.Request) -> web.StreamResponse:
        _caller, instance = await self._reading_instance(request)
        body = await read_json(request)
        if body is None:
            partitions = instance.assignment()
        else:
            partitions = [tp for tp, _ in _partitions(body, "partitions", offsets=False)]
        async with instance.using():
            found = await instance.committed(partitions) if partitions else {}
        return v2_response(
            {
                "offsets": [
                    {"topic": t, "partition": p, "offset": found.get((t, p), -1), "metadata": ""}
                    for t, p in partitions
                ]
            }
        )

    async def seek(self, request: web.Request) -> web.StreamResponse:
        _caller, instance = await self._reading_instance(request)
        wanted = _partitions(await read_json(request), "offsets", offsets=True)
        async with instance.using():
            instance.positions.update(dict(wanted))
        return web.Response(status=204)

    async def _seek_to(self, request: web.Request, spec: int) -> web.StreamResponse:
        _caller, instance = await self._reading_instance(request)
        partitions = [
            tp for tp, _ in _partitions(await read_json(request), "partitions", offsets=False)
        ]
        async with instance.using():
            await instance.seek_to(partitions, spec)
        return web.Response(status=204)

    async def seek_beginning(self, request: web.Request) -> web.StreamResponse:
        return await self._seek_to(request, EARLIEST)

    async def seek_end(self, request: web.Request) -> web.StreamResponse:
        return await self._seek_to(request, LATEST)

    async def records(self, request: web.Request) -> web.StreamResponse:
        caller, instance = await self._instance(request)
        accept = request.headers.get("Accept", "")
        for fmt in ("binary", "json", "string", "avro", "protobuf", "jsonschema"):
            if f"vnd.kafka.{fmt}." in accept and fmt != instance.format:
                raise ApiError(
                    406,
                    f"the instance reads the {instance.format} format, not {fmt}",
                    CONSUMER_FORMAT_MISMATCH,
                )
        settings = caller.services.settings
        timeout = _query_int(
            request, "timeout", settings.default_poll_wait_ms, settings.max_poll_wait_ms
        )
        max_bytes = _query_int(request, "max_bytes", settings.default_max_bytes, MAX_MAX_BYTES)
        max_records = _query_int(
            request, "max_records", instance.max_poll_records, MAX_MAX_POLL_RECORDS
        )
        async with instance.using():
            records = await instance.poll(timeout, max(1, max_bytes), max(1, max_records))
            body = await off_loop(caller.tenant_id, records_body, records)
            throttle = caller.policy.charge_fetch(caller.subject, len(body))
            if throttle > 0:  # as Kafka answers a throttled fetch: no data, after the throttle
                body = records_body([])
                await asyncio.sleep(throttle / 1000)
            else:
                instance.advance()
            topics = {r["topic"] for r in records} if throttle <= 0 else set()
            topic = topics.pop() if len(topics) == 1 else None
            caller.meter(topic, bytes_out=len(body), requests=1, throttle_ms=max(0, throttle))
            instance.touch(caller)
        return web.Response(
            body=body, content_type=f"application/vnd.kafka.{instance.format}.v2+json"
        )
