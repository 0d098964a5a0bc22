"""The tenant HTTP API's server: aiohttp on `--http-port`, authentication, errors, routes.

Owns: `HttpServer` (start/stop of the aiohttp site, TLS with the gateway's certificate when it
has one), resolving the `Caller` of a request — HTTP Basic with an API key (key id : secret),
checked by the gateway's `Authenticator` exactly as a SASL/PLAIN login (same store, same failure
delay, same `event=sasl_failed` log line, same metrics, the same verification cache, which a
revocation clears before the admin API answers: docs/security.md), then the tenant's state from the
`TenantDirectory` (a tenant that is not active is refused 403) and its quotas loaded into the
`QuotaBook` — and the error middleware: every `ApiError` becomes Confluent's error JSON with its
status (401 with `WWW-Authenticate`, 429/503 with `Retry-After`), aiohttp's own refusals (404,
405, 413) are rewritten to the same shape, and anything unexpected is logged once and answered 500
without a stack trace.

Bodies are read by the routes through `gateway.http.bodies` only, after the caller is
authenticated and authorized for the route (its ACL is known from its path and method), within
its bounds (413 past them, 415 for a coding other than identity/gzip/deflate/zstd, 400 for a body
that is not what it says, 408 when it stops arriving for `http.body.read.timeout.ms`), its bytes
drawn from the tenant's pool of request bytes in flight and given back when the request is
answered; `Expect: 100-continue` is answered by the body's first read, not on arrival. aiohttp
decodes nothing itself (`auto_decompress=False`). An answer that leaves the
body unread (a refusal before it, or a 408/413/400 in the middle of it) says `Connection: close`:
the rest of the body is discarded for at most `LINGER_S` (so the answer is not lost to a reset of
a socket closed with unread bytes), then the connection is closed: a refused caller costs no body
read and no drain past that. `/openapi.json`, `/` and the console's pages (`/console/`,
docs/console.md) need no credentials; `/operator/v1/...` (`gateway.http.operator`) takes the admin
API's operator tokens instead of API keys. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import ssl
from collections.abc import Callable
from typing import Any

from aiohttp import web

from console.serve import console_routes
from gateway.auth.authenticator import FAILED_MESSAGE, Authenticated, AuthenticationFailed
from gateway.http.bodies import (
    BODY_READ_TIMEOUT_S,
    MAX_BODY_BYTES,
    READING_KEY,
    BodyReading,
    defer_continue,
)
from gateway.http.consumers import ConsumerRegistry
from gateway.http.context import Caller, HttpServices, client_id_of
from gateway.http.errors import ApiError
from gateway.http.instance_directory import InstanceDirectory
from gateway.http.logins import Logins
from gateway.http.openapi import openapi_document
from gateway.http.operator import OperatorRoutes
from gateway.http.produce import HttpProducer
from gateway.http.usage import TenantBilling
from gateway.http.v2 import V2
from gateway.http.v3 import V3, json_response
from gateway.http.worker_routing import WorkerRouter
from gateway.kafka.byte_budget import ByteBudget

log = logging.getLogger("pier.gateway.http")
CALLER_KEY = "pier.caller"
PUBLIC = frozenset({"/", "/openapi.json"})
LINGER_S = 2.0  # how long the unread rest of a refused body is discarded before the close


def error_response(error: ApiError) -> web.Response:
    response = web.Response(
        body=json.dumps(error.body()).encode(), status=error.status, content_type="application/json"
    )
    if error.status == 401:
        response.headers["WWW-Authenticate"] = 'Basic realm="pier", charset="UTF-8"'
    if error.retry_after_s > 0:
        response.headers["Retry-After"] = str(error.retry_after_s)
    return response


async def _answer(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except ApiError as error:
        return error_response(error)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(ApiError(exc.status, exc.reason or "error", exc.status))
    except (ConnectionResetError, TimeoutError):
        raise
    except Exception as exc:
        log.error(
            "event=http_request_failed method=%s path=%s error=%r",
            request.method,
            request.path,
            exc,
        )
        return error_response(ApiError(500, "internal error", 500))


def errors_middleware(body_timeout_s: float = BODY_READ_TIMEOUT_S) -> Any:
    """The error middleware; it also gives every request its `BodyReading` (the read timeout;
    the tenant's pool is added once the caller is known) and gives its bytes back when answered.
    An answer that leaves the body unread closes the connection (see the module doc)."""

    @web.middleware
    async def errors(request: web.Request, handler: Any) -> web.StreamResponse:
        reading = BodyReading(timeout_s=body_timeout_s)
        request[READING_KEY] = reading
        try:
            response = await _answer(request, handler)
        finally:
            reading.release()
        if not request.content.is_eof():
            response.force_close()
        return response

    return errors


def _deferring(routes: list[web.RouteDef]) -> list[web.RouteDef]:
    """The routes, with `100 Continue` sent by the body's first read (`bodies.defer_continue`)."""
    return [
        web.RouteDef(r.method, r.path, r.handler, {**r.kwargs, "expect_handler": defer_continue})
        for r in routes
    ]


def _basic(header: str) -> tuple[str, str]:
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic" or not encoded:
        raise ApiError(
            401, "HTTP Basic authentication with an API key (id:secret) is required", 401
        )
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode()
    except (binascii.Error, ValueError):
        raise ApiError(401, FAILED_MESSAGE, 401) from None
    key_id, sep, secret = decoded.partition(":")
    if not sep or not key_id or not secret:
        raise ApiError(401, FAILED_MESSAGE, 401)
    return key_id, secret


class HttpServer:
    def __init__(
        self,
        services: HttpServices,
        *,
        host: str,
        port: int,
        tls: ssl.SSLContext | None = None,
        body_timeout_s: float = BODY_READ_TIMEOUT_S,
        tenant_budget: Callable[[str], ByteBudget] | None = None,
        router: WorkerRouter | None = None,
        directory: InstanceDirectory | None = None,
    ) -> None:
        self.services = services
        self._router = router  # a worker of `--workers N`: also serves its internal socket
        self._body_timeout_s = body_timeout_s
        self._tenant_budget = tenant_budget  # the tenant's `queued.max.request.bytes` pool
        self._host = host
        self._port = port
        self._tls = tls
        self._directory = directory  # with ZooKeeper: the fleet's v2 consumer instances
        self.registry = ConsumerRegistry(
            services.make_cluster,
            timeout_ms=services.settings.consumer_instance_timeout_ms,
            directory=directory,
        )
        self._v2: V2 | None = None
        self._logins = Logins(services.session.authenticator, services.session.clock_ms)
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    def app(self) -> web.Application:
        app = web.Application(
            middlewares=[errors_middleware(self._body_timeout_s)], client_max_size=MAX_BODY_BYTES
        )
        v3 = V3(self.caller_of, HttpProducer(self.services))
        v2 = self._v2 = V2(self.caller_of, self.registry, self._router, self._directory)
        operator = OperatorRoutes(self.registry, self.services.verify_operator, self._router)
        app.add_routes([web.get("/", self._root), web.get("/openapi.json", self._openapi)])
        app.add_routes(_deferring(v3.routes()))
        app.add_routes(_deferring(v2.routes()))
        app.add_routes(operator.routes())
        app.add_routes(TenantBilling(self.caller_of, self.services.billing).routes())
        app.add_routes(console_routes("tenant"))  # the tenant console's pages (docs/console.md)
        return app

    async def start(self, public_host: str | None = None) -> None:
        """Serve; `public_host` is the host other gateways reach this one on (with ZooKeeper)."""
        self.registry.start()
        self._runner = web.AppRunner(
            self.app(),
            access_log=None,
            handle_signals=False,
            auto_decompress=False,  # bodies are decoded by gateway.http.bodies, within bounds
            lingering_time=LINGER_S,
        )
        await self._runner.setup()
        site = web.TCPSite(
            self._runner,
            self._host,
            self._port,
            ssl_context=self._tls,
            reuse_port=self._router is not None or None,  # the workers share the port
        )
        await site.start()
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self._port
        if self._router is not None:  # siblings proxy their requests for our instances here
            await web.UnixSite(self._runner, str(self._router.socket_path)).start()
        if self._directory is not None:  # other gateways proxy requests for our instances here
            scheme = "http" if self._tls is None else "https"
            self._directory.start(f"{scheme}://{public_host or self._host}:{self.port}")
        log.info(
            "event=http_listening host=%s port=%s tls=%s",
            self._host,
            self.port,
            self._tls is not None,
        )

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._router is not None:
            await self._router.close()
        if self._v2 is not None:
            await self._v2.close()
        await self.registry.stop()
        if self._directory is not None:  # after the instances closed: their znodes went first
            await self._directory.stop()

    async def _authenticated(self, key_id: str, secret: str, peer: str = "") -> Authenticated:
        """The key's login, as a SASL/PLAIN login would get it, on every request: the same
        verification cache (a dict lookup for a key verified before, forgotten the moment the
        change feed delivers a revocation, so a key revoked through the admin API is refused by
        the time it answers), failed-login backoff per `peer` address and bounded hashing
        threads."""
        exchange = self.services.session.authenticator.exchange("PLAIN", peer)
        token = b"\0" + key_id.encode() + b"\0" + secret.encode()
        try:
            step = await exchange.evaluate(token)
        except AuthenticationFailed:
            raise ApiError(401, FAILED_MESSAGE, 401) from None
        assert step.authenticated is not None
        return step.authenticated

    async def _root(self, request: web.Request) -> web.StreamResponse:
        return json_response({"service": "pier tenant HTTP API", "openapi": "/openapi.json"})

    async def _openapi(self, request: web.Request) -> web.StreamResponse:
        return json_response(openapi_document(f"{request.scheme}://{request.host}"))

    async def caller_of(self, request: web.Request) -> Caller:
        """The authenticated caller of a request (resolved once per request)."""
        cached = request.get(CALLER_KEY)
        if isinstance(cached, Caller):
            return cached
        authorization = request.headers.get("Authorization", "")
        session = self.services.session
        client_id = client_id_of(request.headers)
        kept = self._logins.reused(request, authorization, client_id)
        if kept is not None:
            caller = kept
        else:
            key_id, secret = _basic(authorization)
            epoch = session.authenticator.login_epoch()  # before the check (see `Logins`)
            login = await self._authenticated(key_id, secret, request.remote or "")
            principal = login.principal
            state = await session.directory.state(principal.tenant_id)
            if state.tenant.status != "active":
                raise ApiError(403, f"tenant {state.tenant.id} is {state.tenant.status}", 40303)
            await session.throttling.load(principal.tenant_id)
            caller = Caller(
                principal=principal,
                tenant_state=state,
                host=request.remote or "",
                client_id=client_id,
                services=self.services,
                login_epoch=epoch,
            )
            self._logins.keep(request, authorization, caller, epoch, login.key_expires_at_ms)
        request[CALLER_KEY] = caller
        reading = request.get(READING_KEY)
        if isinstance(reading, BodyReading) and self._tenant_budget is not None:
            reading.budget = self._tenant_budget(caller.tenant_id)
        return caller
