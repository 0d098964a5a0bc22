"""One tenant client connection: authentication, then every request rewritten, checked, forwarded
upstream and answered in order.

Owns: the connection's lifecycle (pre-auth → authenticated → closed), its paired upstream
connection (one per client connection, opened at login, to the broker behind the port the client
dialled), the request pump and the ordered answers. Requests are taken one at a time on the
request side, so they reach the broker in the client's order (an idempotent producer's
sequence depends on it), while answers arrive asynchronously and leave in request order
(`ResponseQueue`). Produce and Fetch take the synchronous raw paths (`gateway.kafka.produce`,
`gateway.kafka.fetch`); other APIs go through their kio filter (`gateway.kafka.kio_path`). A
throttled client is muted: the pump takes no request until the throttle has passed.

Before authentication only ApiVersions and SASL are answered and frames over 512 KiB close the
connection (docs/security.md); an API the gateway does not serve is refused by closing the
connection, never forwarded. The login's session lifetime (KIP-368) is enforced by a timer: a
client that re-authenticates in time keeps its connection.

Every frame arrives with the `Charge` of its announced size (the connection's byte budget: see
`gateway.kafka.client_connection`); the session gives it back once the request's answer has left
in its turn (or the request needed none), or when the session closes, so a tenant's budget counts
exactly its requests read and not yet answered. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

from brokers.wire.entities import make, response_module
from brokers.wire.errors import ErrorCode
from brokers.wire.framing import PRE_AUTH_MAX_REQUEST_BYTES, size_prefix
from brokers.wire.headers import parse_fixed, parse_request_header
from brokers.wire.messages import (
    MalformedRequestError,
    UnknownMessageError,
    decode_request,
    encode_entity,
    is_flexible_request,
    response_header_is_flexible,
)
from gateway.auth.authenticator import Authenticated, session_lifetime_ms
from gateway.kafka import fetch, kio_path, produce
from gateway.kafka.api_table import (
    API_VERSIONS,
    FETCH,
    PRE_AUTH,
    PRODUCE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    advertised_min,
    client_backs_off,
    features,
)
from gateway.kafka.byte_budget import Charge
from gateway.kafka.exchange import Buffer, Exchange, ResponseQueue, Slot
from gateway.kafka.metrics import GatewayMetrics
from gateway.kafka.request_session import session_policy
from gateway.kafka.sasl_gate import GateAnswer, SaslGate
from gateway.kafka.services import QuotaSubject, SessionServices, TenantState
from gateway.kafka.upstream import Upstream
from gateway.metering.meter import UsageKey
from gateway.policy import TenantPolicy
from tenancy.domain import Principal

log = logging.getLogger("pier.gateway.session")
MAX_IN_FLIGHT = 64  # forwarded requests awaiting the broker before the client is paused
# Request bytes not yet taken by the broker's socket before the client is paused: an acks=0
# Produce has no answer to hold its budget charge, so this bounds what a broker that stops
# reading leaves in the gateway.
MAX_UNSENT_BYTES = 8 * 1024 * 1024
MAX_QUEUED = 64  # requests read but not yet taken (an async filter is running) before pausing


class Channel:
    """What the session needs of the client socket (`ClientConnection` implements it)."""

    def write(self, parts: Sequence[Buffer]) -> None:
        raise NotImplementedError

    def splice_fd(self) -> int | None:
        """A plain socket with nothing queued, for `gateway.kafka.splice_relay`; None: never."""
        return None

    def pause(self) -> None:
        raise NotImplementedError

    def resume(self) -> None:
        raise NotImplementedError

    def authenticated(self, tenant_id: str) -> None:
        """The login succeeded: the connection's frames are the tenant's from now on."""
        raise NotImplementedError

    def take_answer_bytes(self, wanted: int) -> Charge | None:
        """Up to `wanted` bytes of the tenant's budget for an answer (None: none free)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class Session:
    def __init__(
        self,
        services: SessionServices,
        channel: Channel,
        *,
        peer_host: str,
        node_id: int | None,
        metrics: GatewayMetrics,
    ) -> None:
        self.services = services
        self.channel = channel
        self.peer_host = peer_host
        self.node_id = node_id
        self.metrics = metrics
        self.gate = SaslGate(services.authenticator, peer_host)
        self.principal: Principal | None = None
        self.policy: TenantPolicy | None = None  # the policy stage, built at login
        self._tenant: TenantState | None = None  # as at login; `tenant` gives the current one
        self.client_id = ""
        self.upstream: Upstream | None = None
        self.answers = ResponseQueue(self._write_answer, self._mute)
        self._frames: deque[tuple[memoryview, Charge | None]] = deque()
        self._taking: Charge | None = None  # the charge of the frame being handled
        self._answering: deque[Charge | None] = deque()  # one per reserved answer slot, in order
        self._answer_holds: set[Charge] = set()  # budget held for answers still on their way
        self._busy = False
        self._muted_until = 0.0
        self._unmute: asyncio.TimerHandle | None = None
        self._expiry: asyncio.TimerHandle | None = None
        self._closed = False
        self._usage_key: UsageKey | None = None
        self._login_epoch: int | None = None  # the verification cache's, as the login began

    @property
    def tenant(self) -> TenantState | None:
        """The tenant's current state (limits and ACLs follow the store's changes at once, for
        connections already open too); None before login."""
        if self._tenant is None:
            return None
        return self.services.directory.current(self._tenant.tenant.id) or self._tenant

    # -- the request pump ----------------------------------------------------------------------
    def on_frame(self, frame: memoryview, charge: Charge | None = None) -> None:
        if self._closed:
            if charge is not None:
                charge.release()
            return
        self._frames.append((frame, charge))
        self._pump()

    def _pump(self) -> None:
        while self._frames and not self._busy and not self._closed and not self._held():
            frame, self._taking = self._frames.popleft()
            try:
                pending = self._handle(frame)
            except (MalformedRequestError, UnknownMessageError) as exc:
                self.refuse(f"malformed request: {exc}")
                return
            finally:
                self._untake()
            if pending is not None:
                self._busy = True
                task = asyncio.ensure_future(pending)
                task.add_done_callback(self._resumed)
        self._settle()
        self._update_reading()

    def _untake(self) -> None:
        """A frame handled without an answer slot (a bare SASL token, a refusal) is done with."""
        charge, self._taking = self._taking, None
        if charge is not None:
            charge.release()

    def _reserve_slot(self) -> Slot:
        """The answer slot of the frame being handled; its charge is kept until the answer left."""
        slot = self.answers.reserve()
        self._answering.append(self._taking)
        self._taking = None
        return slot

    def _settle(self) -> None:
        """Give back the charges of the requests whose answers have left (in request order)."""
        answering = self._answering
        while len(answering) > len(self.answers):
            charge = answering.popleft()
            if charge is not None:
                charge.release()

    def _write_answer(self, parts: Sequence[Buffer]) -> None:
        self.channel.write(parts)
        self._settle()

    def _held(self) -> bool:
        """Take no request now: the client is muted, or the broker has enough of its requests."""
        if self._muted_until > time.monotonic():
            return True
        upstream = self.upstream
        return upstream is not None and (
            upstream.in_flight >= MAX_IN_FLIGHT or upstream.unsent_bytes >= MAX_UNSENT_BYTES
        )

    def _update_reading(self) -> None:
        """Read from the client only while its requests can be taken soon (KIP-219 muting, and
        back pressure: a bounded queue of read requests and of requests at the broker)."""
        if self._closed:
            return
        if self._held() or len(self._frames) >= MAX_QUEUED:
            self.channel.pause()
        else:
            self.channel.resume()

    def describe(self) -> str:
        in_flight = self.upstream.in_flight if self.upstream is not None else None
        muted = max(0.0, self._muted_until - time.monotonic())
        return (
            f"tenant={self._tenant_id} auth={self.gate.state.value} queued={len(self._frames)}"
            f" busy={self._busy} muted_s={muted:.3f} answers={len(self.answers)}"
            f" upstream_in_flight={in_flight} closed={self._closed}"
        )

    @property
    def idle(self) -> bool:
        """Nothing read and not yet answered: a drain may close the connection now."""
        return not self._frames and not self._busy and len(self.answers) == 0

    def _resumed(self, task: asyncio.Future[None]) -> None:
        self._busy = False
        if not task.cancelled() and task.exception() is not None:
            error = task.exception()
            if isinstance(error, MalformedRequestError | UnknownMessageError):
                self.refuse(f"malformed request: {error}")
            else:
                log.error("event=request_failed tenant=%s error=%r", self._tenant_id, error)
                self.close("internal error")
            return
        self._pump()

    def client_blocked(self, blocked: bool) -> None:
        """The client stopped (or went on) reading its answers: so does the upstream socket."""
        if self.upstream is not None:
            self.upstream.hold_answers(blocked)

    def on_upstream_progress(self) -> None:
        """An answer came back, or the requests waiting for the broker's socket went out: a
        client held for MAX_IN_FLIGHT or MAX_UNSENT_BYTES may go on."""
        self._pump()

    # -- dispatch ------------------------------------------------------------------------------
    def _handle(self, frame: memoryview) -> Awaitable[None] | None:
        if self.gate.raw_tokens:
            return self._raw_token(bytes(frame))
        api_key, version, _correlation = parse_fixed(frame)
        if not self.gate.authenticated and api_key not in PRE_AUTH:
            self.refuse(f"api {api_key} before authentication")
            return None
        table = self.services.fleet.api_table()
        served = table.get(api_key)
        if served is None or not served.serves(version):
            if api_key == API_VERSIONS:
                self._unsupported_api_versions(frame)
                return None
            self.refuse(f"api {api_key} v{version} is not served")
            return None
        header, offset = parse_request_header(frame, is_flexible_request(api_key, version))
        exchange = Exchange(
            api_key,
            version,
            header.correlation_id,
            frame[:offset],
            response_header_is_flexible(api_key, version),
            self._subject(header.client_id),
            time.perf_counter(),
        )
        exchange.slot = self._reserve_slot()
        self.metrics.request(self._tenant_id, api_key)
        if api_key in PRE_AUTH:
            return self._local(exchange, frame, offset, header.client_id)
        if api_key == PRODUCE:
            produce.handle(self, exchange, frame[offset:])
            return None
        if api_key == FETCH:
            fetch.handle(self, exchange, frame, offset)
            return None
        return kio_path.handle(self, exchange, frame, offset)

    def _subject(self, client_id: str | None) -> QuotaSubject | None:
        if self.principal is None:
            return None
        return QuotaSubject(
            self.principal.tenant_id, self.principal.service_account_id, client_id or ""
        )

    # -- answers -------------------------------------------------------------------------------
    def answer(self, exchange: Exchange, response: Any) -> None:
        """Encode a kio response for `exchange` and queue it."""
        body = encode_entity(response)
        self.answers.complete(exchange.slot, exchange.framed([body], len(body)))
        self._settle()

    def forward(
        self,
        exchange: Exchange,
        body: Sequence[Buffer],
        body_size: int,
        on_response: Callable[[memoryview | None], None] | None,
    ) -> None:
        """Send the rewritten request upstream; `on_response` gets the answer frame (or None)."""
        assert self.upstream is not None
        self.upstream.send(
            exchange.correlation_id, exchange.request_frame(body, body_size), on_response
        )

    def finish(self, exchange: Exchange, parts: Sequence[Buffer] | None, throttle_ms: int) -> None:
        """Queue an answer with its throttle: muted after it (KIP-219), or delayed first for
        clients too old to back off by themselves."""
        exchange.slot.throttle_ms = throttle_ms
        delay = 0 if client_backs_off(exchange.api_key, exchange.version) else throttle_ms
        if throttle_ms > 0:
            self.meter(None, throttle_ms=throttle_ms)
        self.answers.complete(exchange.slot, parts, delay_ms=delay)
        self._settle()
        self.on_upstream_progress()

    def answers_next(self, exchange: Exchange) -> bool:
        """Every answer before `exchange`'s has been written: its own may stream out now."""
        return not self._closed and self.answers.first(exchange.slot)

    def write_through(self, parts: Sequence[Buffer]) -> None:
        """Part of a streamed answer (its slot is the first: `answers_next`), written now."""
        if not self._closed:
            self.channel.write(parts)

    def splice_fd(self) -> int | None:
        """The client socket's descriptor while a streamed answer may be spliced into it (plain
        TCP, nothing queued: `ClientConnection.splice_fd`); None otherwise."""
        return None if self._closed else self.channel.splice_fd()

    def meter(self, topic: str | None, **counters: int) -> None:
        if self.policy is not None:  # usage is metered by the policy stage (bounded client id)
            self.policy.meter(topic, **counters)

    def throttled(self, throttle_ms: int) -> None:
        """A request earned `throttle_ms` as it was taken: take no further request from now on.
        Kafka reads nothing more from a connection while it handles a request and mutes it after
        a throttled answer; without this, requests pipelined behind a throttled one would all be
        charged before the mute, letting a burst through. The answer, once sent, mutes the
        channel again for its full throttle."""
        if throttle_ms > 0:
            self._mute(throttle_ms)

    def _mute(self, throttle_ms: int) -> None:
        until = time.monotonic() + throttle_ms / 1000
        if until <= self._muted_until:
            return
        self._muted_until = until
        self._update_reading()
        if self._unmute is not None:
            self._unmute.cancel()
        self._unmute = asyncio.get_running_loop().call_at(
            asyncio.get_running_loop().time() + throttle_ms / 1000, self._unmuted
        )

    def _unmuted(self) -> None:
        self._unmute = None
        self._muted_until = 0.0
        self._pump()  # also settles answers that were held back by a throttle

    # -- authentication ------------------------------------------------------------------------
    def _local(
        self, exchange: Exchange, frame: memoryview, offset: int, client_id: str | None
    ) -> Awaitable[None] | None:
        request = decode_request(exchange.api_key, exchange.version, frame, offset)
        if exchange.api_key == API_VERSIONS:
            self.answer(exchange, self._api_versions(exchange.version))
            return None
        if exchange.api_key == SASL_HANDSHAKE:
            if not self.gate.authenticated:
                self.client_id = client_id or ""
            self._gate_answer(exchange, self.gate.handshake(exchange.version, request))
            return None
        assert exchange.api_key == SASL_AUTHENTICATE
        return self._authenticate(exchange, request)

    async def _authenticate(self, exchange: Exchange, request: Any) -> None:
        if self._login_epoch is None:  # before the key is first read (SCRAM: its first round)
            self._login_epoch = self.services.authenticator.login_epoch()
        answer = await self.gate.authenticate(exchange.version, request, self._lifetime)
        if answer.authenticated is not None:
            epoch, self._login_epoch = self._login_epoch, None
            refused = await self._logged_in(answer.authenticated, epoch)
            if self._closed:
                return
            if refused is not None:  # a valid key, but the tenant may not have this connection
                answer = GateAnswer(self.gate.refusal(exchange.version, refused), close=True)
        self._gate_answer(exchange, answer)

    async def _raw_token(self, token: bytes) -> None:
        epoch = self.services.authenticator.login_epoch()
        answer = await self.gate.raw_token(token)
        if answer.authenticated is not None and await self._logged_in(answer.authenticated, epoch):
            self.close("connection refused")  # bare tokens have no way to say why
            return
        if self._closed:
            return
        body = bytes(answer.response)
        self.channel.write([size_prefix(len(body)), body])
        if answer.close:
            self.close("authentication failed")

    def _gate_answer(self, exchange: Exchange, answer: GateAnswer) -> None:
        self.answer(exchange, answer.response)
        if answer.close:
            self.close("authentication failed")

    def _lifetime(self, identity: Authenticated) -> int:
        now = self.services.clock_ms()
        return session_lifetime_ms(now, self.services.max_reauth_ms, identity.key_expires_at_ms)

    async def _logged_in(self, identity: Authenticated, epoch: int | None = None) -> str | None:
        """A first login or a re-authentication succeeded: admit, connect, arm the expiry. The
        reason when the tenant may not have this connection (the session is then still open, to
        answer it); a session that cannot reach its broker is closed. `epoch`: the verification
        cache's as the key was first read; a change of the key or tenant since then (a
        revocation while the key was checked) has the key read again."""
        lifetime = self._lifetime(identity)
        self._arm_expiry(lifetime)
        if self.principal is not None:  # re-authentication: same principal, nothing else
            return None
        directory = self.services.directory
        principal = identity.principal
        with directory.admitting(self, principal):  # revocations close it meanwhile
            changed = epoch is not None and (
                self.services.authenticator.login_changed_since(principal, epoch)
            )
            if changed and not await directory.key_usable(principal.key_id):
                return "api key revoked or expired"
            state = await directory.state(identity.principal.tenant_id)
            await self.services.throttling.load(state.tenant.id)
            self.principal = identity.principal
            refused = await directory.admit(self, state)
        if refused is not None:
            log.info("event=connection_refused tenant=%s reason=%r", state.tenant.id, refused)
            return refused
        if self._closed:  # the client left while its slot was reserved
            self.services.directory.release(self)
            return "connection closed"
        self._tenant = state  # from here `close()` gives back the slot and the gauge's count
        self.metrics.connected(state.tenant.id, +1)
        self.policy = session_policy(
            self.services, identity.principal, self.peer_host, self.client_id, state
        )
        if not await self._connect_upstream():
            return "broker unavailable"
        self.channel.authenticated(state.tenant.id)
        self._usage_key = self.policy.identity.usage_key(None)
        self.services.meter.connection_opened(self._usage_key)
        log.info(
            "event=authenticated tenant=%s principal=%s mechanism=%s",
            state.tenant.id,
            identity.principal.service_account_id,
            identity.mechanism,
        )
        return None

    async def _connect_upstream(self) -> bool:
        address = self.services.fleet.upstream_address(self.node_id)
        if address is None:
            self.close(f"broker {self.node_id} is not available")
            return False
        try:
            upstream = await Upstream.connect(*address, self._upstream_lost)
        except (OSError, TimeoutError) as exc:
            log.warning("event=upstream_unreachable broker=%s:%s error=%r", *address, exc)
            self.close("upstream broker unreachable")
            return False
        if self._closed:  # the client left while it opened: `close()` ran without it
            upstream.close()
            return False
        self.upstream = upstream
        upstream.on_drained = self.on_upstream_progress
        return True

    def _upstream_lost(self, reason: str) -> None:
        self.close(f"upstream: {reason}")

    def _arm_expiry(self, lifetime_ms: int) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if lifetime_ms > 0:
            loop = asyncio.get_running_loop()
            self._expiry = loop.call_later(lifetime_ms / 1000, self.close, "session expired")

    def _api_versions(self, version: int) -> Any:
        module = response_module(API_VERSIONS, version)
        keys = tuple(
            make(
                module,
                "ApiVersion",
                api_key=r.api_key,
                min_version=advertised_min(r),
                max_version=r.max_version,
            )
            for r in sorted(self.services.fleet.api_table().values(), key=lambda r: r.api_key)
        )
        return make(
            module,
            "ApiVersionsResponse",
            error_code=ErrorCode.none,
            api_keys=keys,
            throttle_time=timedelta(0),
            **features(module, version, self.services.fleet.finalized_features()),
        )

    def _unsupported_api_versions(self, frame: memoryview) -> None:
        """KIP-511: a newer ApiVersions than ours is answered in a v0 body with error 35."""
        _key, _version, correlation_id = parse_fixed(frame)
        module = response_module(API_VERSIONS, 0)
        keys = tuple(
            make(
                module,
                "ApiVersion",
                api_key=r.api_key,
                min_version=advertised_min(r),
                max_version=r.max_version,
            )
            for r in sorted(self.services.fleet.api_table().values(), key=lambda r: r.api_key)
        )
        body = encode_entity(
            make(
                module,
                "ApiVersionsResponse",
                error_code=ErrorCode.unsupported_version,
                api_keys=keys,
            )
        )
        slot = self._reserve_slot()
        head = correlation_id.to_bytes(4, "big", signed=True)
        self.answers.complete(slot, [size_prefix(len(head) + len(body)) + head, body])
        self._settle()

    # -- refusing and closing ------------------------------------------------------------------
    def refuse(self, reason: str) -> None:
        self.metrics.refused(self._tenant_id, reason.split(" ", maxsplit=1)[0])
        log.info(
            "event=request_refused tenant=%s peer=%s reason=%r",
            self._tenant_id,
            self.peer_host,
            reason,
        )
        self.close(reason)

    @property
    def _tenant_id(self) -> str:
        return self.principal.tenant_id if self.principal is not None else ""

    def close(self, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        log.debug("event=session_closed tenant=%s reason=%r", self._tenant_id, reason)
        for timer in (self._expiry, self._unmute):
            if timer is not None:
                timer.cancel()
        if self.upstream is not None:
            self.upstream.close()
        if self._tenant is not None:
            self.services.directory.release(self)
            self.metrics.connected(self._tenant.tenant.id, -1)
        if self._usage_key is not None:
            self.services.meter.connection_closed(self._usage_key)
        self._release_all()
        self.channel.close()

    def hold_answer_bytes(self, wanted: int) -> Charge | None:
        """Hold up to `wanted` bytes of the tenant's budget for an answer on its way (a Fetch's:
        its `max_bytes` is cut to what was held); `release_answer_bytes` once it has left, or
        the session's close gives it back."""
        charge = self.channel.take_answer_bytes(wanted)
        if charge is not None:
            self._answer_holds.add(charge)
        return charge

    def release_answer_bytes(self, charge: Charge) -> None:
        self._answer_holds.discard(charge)
        charge.release()

    def _release_all(self) -> None:
        charges = [charge for _frame, charge in self._frames]
        charges += [*self._answering, self._taking, *self._answer_holds]
        self._answer_holds.clear()
        self._frames.clear()
        self._answering.clear()
        self._taking = None
        for charge in charges:
            if charge is not None:
                charge.release()

    def connection_lost(self) -> None:
        self.close("client disconnected")

    @property
    def pre_auth_limit(self) -> int:
        return PRE_AUTH_MAX_REQUEST_BYTES
