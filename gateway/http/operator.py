"""The operator's view of the tenant HTTP API on one gateway: list and delete a tenant's v2
consumer instances.

Owns the `/operator/v1/...` routes of the gateway's HTTP port: `GET /operator/v1/tenants/{tenant}
/http-consumers` (every instance of the tenant on this gateway process: group, instance id,
format, member id, subscription, assignment, idle time, principal) and `DELETE
.../http-consumers/{group}/{instance}` (closes it: it leaves its group at once). Operators
authenticate with the same bearer tokens as the admin API (`Authorization: Bearer <token>`,
checked with the tenant store's `verify_operator` in a worker thread; a success is remembered for
30 s, keyed by the token's SHA-256, as the admin API does). Tenants' API keys get nothing here
(401). With `--workers N` the list holds every worker's instances (asked over their internal
sockets) and a delete goes to the worker owning the name. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable

from aiohttp import web

from gateway.http.consumers import ConsumerRegistry
from gateway.http.errors import CONSUMER_INSTANCE_NOT_FOUND, ApiError
from gateway.http.v3 import json_response
from gateway.http.worker_routing import WorkerRouter, arrived_internally

log = logging.getLogger("pier.gateway.http.operator")
TOKEN_CACHE_S = 30.0
MAX_TOKEN_LENGTH = 512
VerifyOperator = Callable[[str], str | None]


class OperatorRoutes:
    def __init__(
        self,
        registry: ConsumerRegistry,
        verify: VerifyOperator | None,
        router: WorkerRouter | None = None,
    ) -> None:
        self._registry = registry
        self._verify = verify
        self._router = router  # a worker of `--workers N`: list every worker's, delete at the owner
        self._verified: dict[bytes, tuple[str, float]] = {}

    def routes(self) -> list[web.RouteDef]:
        base = "/operator/v1/tenants/{tenant_id}/http-consumers"
        return [
            web.get(base, self.list_instances),
            web.delete(base + "/{group}/{instance}", self.delete_instance),
        ]

    async def _operator(self, request: web.Request) -> str:
        scheme, _, token = request.headers.get("Authorization", "").strip().partition(" ")
        token = token.strip()
        if self._verify is None or scheme.lower() != "bearer" or not token:
            raise ApiError(401, "an operator bearer token is required", 401)
        if len(token) > MAX_TOKEN_LENGTH:
            raise ApiError(401, "the operator token is not valid", 401)
        digest = hashlib.sha256(token.encode()).digest()
        cached = self._verified.get(digest)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        try:
            operator = await asyncio.to_thread(self._verify, token)
        except Exception as exc:  # the store is down: refuse, never fail open
            log.warning("event=operator_verify_failed error=%s", type(exc).__name__)
            raise ApiError(503, "operator tokens cannot be checked now", 50301, 1) from None
        if operator is None:
            raise ApiError(401, "the operator token is not valid", 401)
        if len(self._verified) >= 1024:
            self._verified.clear()
        self._verified[digest] = (operator, time.monotonic() + TOKEN_CACHE_S)
        return operator

    async def list_instances(self, request: web.Request) -> web.StreamResponse:
        await self._operator(request)
        tenant = request.match_info["tenant_id"]
        found = [i.describe() for i in self._registry.of_tenant(tenant)]
        if self._router is not None and not arrived_internally(request):
            for answer in await self._router.gather_json(request):
                found += answer.get("items", []) if isinstance(answer, dict) else []
        instances = sorted(found, key=lambda d: (d["group"], d["instance_id"]))
        return json_response({"tenant_id": tenant, "items": instances})

    async def delete_instance(self, request: web.Request) -> web.StreamResponse:
        operator = await self._operator(request)
        tenant = request.match_info["tenant_id"]
        group, name = request.match_info["group"], request.match_info["instance"]
        if self._router is not None and not arrived_internally(request):
            owner = self._router.owner(group, name)
            if owner is not None:
                return await self._router.forward(request, owner)
        if not await self._registry.delete(tenant, group, name, f"deleted by operator {operator}"):
            raise ApiError(
                404,
                f"consumer instance {name!r} of group {group!r} not found",
                CONSUMER_INSTANCE_NOT_FOUND,
            )
        return web.Response(status=204)
