"""`TenantPolicy`: what every tenant request passes through, whichever door it came in by.

Owns: the decisions the edges used to make each in their own words — authorization (the tenant's
ACLs under the caller's one principal string), topic-name validity, the tenant's produce limits
(`max_request_bytes`, the storage cap), charging the quota chain (producer and consumer byte rates,
request time) and metering usage under a contract-valid key. Decisions are data: `Refusal` carries
a `Reason`, Kafka's error code and a message; the Kafka edge writes the code into its answer, the
HTTP edge maps the reason to a problem JSON. Checks are a dict lookup or a few comparisons per
topic per request, never per record.

Kafka's order for a produce (its KafkaApis): the transactional id's WRITE, then per topic a legal
name and WRITE, then the request size and the tenant's storage for what is left. The storage check
charges the request's size to the headroom this gateway leased from the tenant store
(`gateway.storage_ledger`: fleet-wide, no store call per request): POLICY_VIOLATION when the
tenant is at its limit, REQUEST_TIMED_OUT (retriable) while more headroom is being leased.

Built once per authenticated caller; reads the tenant's current state on every decision, so ACL
and limit changes apply to open connections. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, Protocol

from brokers.wire.errors import ErrorCode
from gateway.metering.meter import UsageMeter
from gateway.policy.identity import Identity, QuotaSubject
from gateway.policy.names import topic_name_problem
from tenancy.domain import Tenant
from tenancy.usage import is_topic_name


class Access(Protocol):
    """The tenant's ACLs (`gateway.kafka.authorizer.Authorizer` satisfies it)."""

    def allowed(
        self, principal: str, host: str, operation: str, resource_type: str, name: str
    ) -> bool: ...

    def allowed_any(
        self, principal: str, host: str, operation: str, resource_type: str
    ) -> bool: ...


class Namespace(Protocol):
    @property
    def max_topic_length(self) -> int: ...


class TenantView(Protocol):
    """What the policy reads of a tenant's current state (`TenantState` satisfies it)."""

    @property
    def tenant(self) -> Tenant: ...

    @property
    def namespace(self) -> Namespace: ...

    @property
    def access(self) -> Access: ...


class Quotas(Protocol):
    """The quota chain (`gateway.throttling.GatewayThrottling` satisfies it)."""

    def produce(self, subject: QuotaSubject, request_bytes: int, now_ms: int) -> int: ...

    def fetch(self, subject: QuotaSubject, response_bytes: int, now_ms: int) -> int: ...

    def fetch_max_bytes(self, subject: QuotaSubject) -> int | None: ...

    def request_time(self, subject: QuotaSubject, elapsed_ms: float, now_ms: int) -> int: ...

    def mutations(
        self, subject: QuotaSubject, strict: bool, now_ms: int, *, caller_strict: bool = False
    ) -> MutationBudget: ...

    def mutation_throttle_ms(self, subject: QuotaSubject, now_ms: int) -> int: ...

    def config_change_budget(
        self, subject: QuotaSubject, strict: bool, now_ms: int
    ) -> MutationBudget: ...

    def config_change_throttle_ms(self, subject: QuotaSubject, now_ms: int) -> int: ...


class MutationBudget(Protocol):
    """The caller's `controller_mutation_rate` quota for one request (KIP-599)."""

    def exceeded(self) -> bool: ...

    def record(self, partitions: int) -> None: ...


class StorageCharge(Protocol):
    """Why a charge did not fit (`gateway.storage_ledger.StorageRefusal`)."""

    @property
    def full(self) -> bool: ...

    @property
    def message(self) -> str: ...


class StorageUse(Protocol):
    """The tenant's storage headroom leased from the tenant store (`gateway.storage_ledger.
    StorageLedger`): `charge` is local (no store call), `lease` waits for the store."""

    def stored_bytes(self, tenant_id: str) -> int: ...

    def charge(self, tenant_id: str, request_bytes: int, limit: int) -> StorageCharge | None: ...

    async def lease(self, tenant_id: str, request_bytes: int, limit: int) -> None: ...


# CreateTopics, DeleteTopics, CreatePartitions: charged to the controller mutation quota, strict
# (THROTTLING_QUOTA_EXCEEDED instead of a throttle) from these versions on (KIP-599).
STRICT_MUTATIONS_FROM: Final = {19: 6, 20: 5, 37: 3}
# AlterConfigs, IncrementalAlterConfigs: each resource changed is paced per tenant
# (`gateway.quotas.tenant_pacing`).
CONFIG_CHANGES: Final = frozenset({33, 44})


class Reason(enum.Enum):
    NOT_AUTHORIZED = "not_authorized"
    INVALID_NAME = "invalid_name"
    TOO_LARGE = "too_large"
    STORAGE_FULL = "storage_full"
    STORAGE_BUSY = "storage_busy"  # headroom is being leased from the tenant store: retry


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: Reason
    error: ErrorCode  # Kafka's code for this refusal
    message: str | None = None


class TenantPolicy:
    def __init__(
        self,
        identity: Identity,
        state: Callable[[], TenantView],
        *,
        quotas: Quotas,
        storage: StorageUse,
        meter: UsageMeter,
        clock_ms: Callable[[], int],
    ) -> None:
        self.identity = identity
        self._state = state
        self._quotas = quotas
        self._storage = storage
        self._meter = meter
        self._clock_ms = clock_ms

    @property
    def state(self) -> TenantView:
        """The tenant's current state (ACL and limit changes apply at once)."""
        return self._state()

    # -- authorization and names ---------------------------------------------------------------
    def allowed(self, operation: str, resource_type: str, name: str) -> bool:
        """Whether the caller may do `operation` on the tenant resource `name` (tenant's name)."""
        identity = self.identity
        return self._state().access.allowed(
            identity.kafka_principal, identity.host, operation, resource_type, name
        )

    def allowed_any(self, operation: str, resource_type: str) -> bool:
        identity = self.identity
        return self._state().access.allowed_any(
            identity.kafka_principal, identity.host, operation, resource_type
        )

    def topic_name_refusal(self, name: str) -> Refusal | None:
        """INVALID_TOPIC_EXCEPTION unless `name` is legal and its fleet name fits 249 chars."""
        problem = topic_name_problem(name, self._state().namespace.max_topic_length)
        if problem is None:
            return None
        return Refusal(Reason.INVALID_NAME, ErrorCode.invalid_topic_exception, problem)

    # -- produce -------------------------------------------------------------------------------
    def produce_refusals(
        self,
        topics: Iterable[str],
        request_bytes: int,
        transactional_id: str | None = None,
        *,
        largest_bytes: int | None = None,
    ) -> dict[str, Refusal]:
        """Per topic (tenant's names) of a produce request, why it may not be written; topics
        missing from the answer may go upstream. `largest_bytes`: the requests of several
        checked at once (an HTTP stream's chunk) are each at most this big; the size limit
        applies to it, the storage charge to `request_bytes`, their total."""
        names = list(dict.fromkeys(topics))
        if transactional_id is not None and not self.allowed(
            "WRITE", "TRANSACTIONAL_ID", transactional_id
        ):
            refusal = Refusal(
                Reason.NOT_AUTHORIZED, ErrorCode.transactional_id_authorization_failed
            )
            return dict.fromkeys(names, refusal)
        refusals: dict[str, Refusal] = {}
        for name in names:
            refused = self.topic_write_refusal(name)
            if refused is not None:
                refusals[name] = refused
        rest = [name for name in names if name not in refusals]
        limit = self.produce_limit_refusal(request_bytes, largest_bytes) if rest else None
        if limit is not None:
            refusals.update(dict.fromkeys(rest, limit))
        return refusals

    def topic_write_refusal(self, name: str) -> Refusal | None:
        """`produce_refusals`' per-topic part: a legal name, then WRITE on it. A caller that
        decides a request's topic before its size is known (the HTTP produce route, before
        reading the body) asks this once, then `produce_limit_refusal` once the size is known."""
        refused = self.topic_name_refusal(name)
        if refused is None and not self.allowed("WRITE", "TOPIC", name):
            refused = Refusal(Reason.NOT_AUTHORIZED, ErrorCode.topic_authorization_failed)
        return refused

    def produce_limit_refusal(
        self, request_bytes: int, largest_bytes: int | None = None
    ) -> Refusal | None:
        """`produce_refusals`' size and storage part (the storage headroom charged)."""
        tenant = self._state().tenant
        limits = tenant.limits
        largest = request_bytes if largest_bytes is None else largest_bytes
        if largest > limits.max_request_bytes:
            message = (
                f"request of {largest} bytes over the tenant's limit of {limits.max_request_bytes}"
            )
            return Refusal(Reason.TOO_LARGE, ErrorCode.message_too_large, message)
        refused = self._storage.charge(tenant.id, request_bytes, limits.max_storage_bytes)
        if refused is None:
            return None
        if refused.full:
            return Refusal(Reason.STORAGE_FULL, ErrorCode.policy_violation, refused.message)
        return Refusal(Reason.STORAGE_BUSY, ErrorCode.request_timed_out, refused.message)

    async def lease_storage(self, request_bytes: int) -> None:
        """Wait until this gateway holds headroom for `request_bytes` of the tenant's storage
        (or the store said there is none): a path that may wait calls it before
        `produce_refusals`, which then charges without refusing for a lease under way."""
        tenant = self._state().tenant
        await self._storage.lease(tenant.id, request_bytes, tenant.limits.max_storage_bytes)

    # -- quotas --------------------------------------------------------------------------------
    def subject(self, client_id: str | None = None) -> QuotaSubject:
        return self.identity.subject(client_id)

    def charge_produce(self, subject: QuotaSubject, request_bytes: int) -> int:
        """Charge a produce request's size to the producer byte-rate quota; its throttle (ms)."""
        return self._quotas.produce(subject, request_bytes, self._clock_ms())

    def charge_fetch(self, subject: QuotaSubject, response_bytes: int) -> int:
        """Charge a fetch answer's record bytes to the consumer byte-rate quota; > 0 means the
        fetch is throttled and its bytes were taken back (it goes out with no records)."""
        return self._quotas.fetch(subject, response_bytes, self._clock_ms())

    def fetch_max_bytes(self, subject: QuotaSubject, asked: int) -> int:
        """A fetch's `max_bytes`, capped by what the consumer quota allows in its window."""
        cap = self._quotas.fetch_max_bytes(subject)
        return asked if cap is None else min(asked, cap)

    def produce_window_bytes(self, subject: QuotaSubject) -> int | None:
        """The most a produce request may carry in one quota window (None without a quota)."""
        limit = getattr(self._quotas, "produce_max_bytes", None)
        most = None if limit is None else limit(subject)
        return most if isinstance(most, int) else None

    def charge_request_time(self, subject: QuotaSubject, elapsed_ms: float) -> int:
        """Charge time spent on a request (`request_percentage`); its throttle (ms)."""
        return self._quotas.request_time(subject, elapsed_ms, self._clock_ms())

    def mutation_budget(
        self, subject: QuotaSubject, api_key: int, version: int, *, strict: bool = False
    ) -> MutationBudget | None:
        """The controller mutation budget of a request that creates or deletes partitions (the
        KIP-599 quota and the tenant's partition pacing), or the config-change pacing of one
        that alters configs (`strict`: for callers that cannot be muted, the KIP-599 quota
        refuses whatever the version and a pacing as soon as its burst is spent); None for every
        other API."""
        if api_key in CONFIG_CHANGES:
            return self._quotas.config_change_budget(subject, strict, self._clock_ms())
        strict_from = STRICT_MUTATIONS_FROM.get(api_key)
        if strict_from is None:
            return None
        return self._quotas.mutations(
            subject, strict or version >= strict_from, self._clock_ms(), caller_strict=strict
        )

    def mutation_throttle(self, subject: QuotaSubject, api_key: int) -> int:
        """After a request's mutations (or config changes) were charged: its throttle (ms)."""
        if api_key in CONFIG_CHANGES:
            return self._quotas.config_change_throttle_ms(subject, self._clock_ms())
        return self._quotas.mutation_throttle_ms(subject, self._clock_ms())

    # -- usage ---------------------------------------------------------------------------------
    def meter(self, topic: str | None, **counters: int) -> None:
        """Count usage on one of the tenant's topics (None: work tied to no topic). A name that
        is no topic name (a request may name anything, up to 32 KiB) is counted as no topic, so a
        meter key never holds more than a topic name."""
        if topic is not None and not is_topic_name(topic):
            topic = None
        self._meter.record(self.identity.usage_key(topic), **counters)
