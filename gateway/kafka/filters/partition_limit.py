"""The tenant's partition limit as the filters that create partitions use it (CreateTopics,
CreatePartitions; HTTP v3 topic creation goes through the same filters): reserve in the tenant
store before forwarding, refuse what does not fit, settle with what the broker created.

`reserve` asks `ctx.partitions` (`gateway.reservations.PartitionLedger`) for all the sizes of one
request at once (one store transaction); without a ledger, or when the store cannot be asked,
nothing is granted (fail closed: UNKNOWN_SERVER_ERROR with a retry hint, never a creation past the
limit). `refusals` gives, per size, None (granted) or the (error, message) to answer.

`settle_on_failure` is the `Forward.on_failure` of a request that holds a grant: the broker's
answer will never come (its connection failed or timed out, or the client went away), so the
reservation is settled without waiting for `partition.reservation.timeout.ms`: once the broker's
own deadline for the request has passed (its `timeout`, at most `MAX_FAILURE_GRACE_S`) — so a
creation the broker was still making is seen, and a client that drops its connection right after
asking cannot have its partitions given back before they exist — with what the fleet then shows
was created (`created`, asked of the fleet, at most `FLEET_CHECK_S`; nothing when it cannot
answer: the reconcile counts a late creation). Runs on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import Failure, FilterContext
from gateway.reservations import LedgerUnavailable, refusal_message
from tenancy.reservations import PartitionGrant

log = logging.getLogger("pier.gateway.partitions")
UNAVAILABLE = "The tenant's partition limit could not be checked; try again."
MAX_FAILURE_GRACE_S = 30.0  # the longest wait for a broker's own deadline after a failure
DEFAULT_FAILURE_GRACE_S = 5.0  # for a request without a deadline of its own (Metadata)
FLEET_CHECK_S = 10.0  # how long the fleet is asked what was created
CreatedCount = Callable[[], Awaitable[int]]  # partitions of the request that exist now
_settling: set[asyncio.Task[None]] = set()  # failure settlements under way (kept referenced)


async def reserve(ctx: FilterContext, sizes: Sequence[int]) -> PartitionGrant | None:
    """A grant for `sizes`, or None when nothing could be reserved (no ledger, store down)."""
    if not sizes:
        return PartitionGrant(None, (), 0, ctx.limits.max_partitions)
    if ctx.partitions is None:
        return None
    try:
        return await ctx.partitions.reserve(ctx.namespace.tenant_id, sizes)
    except LedgerUnavailable:
        return None


def refusals(
    grant: PartitionGrant | None, sizes: Sequence[int]
) -> list[tuple[ErrorCode, str] | None]:
    """Per size: None when granted, else the error code and message to answer."""
    if grant is None:
        return [(ErrorCode.unknown_server_error, UNAVAILABLE)] * len(sizes)
    out: list[tuple[ErrorCode, str] | None] = []
    in_use = grant.in_use  # what the tenant used before, plus the sizes granted before this one
    for ok, size in zip(grant.granted, sizes, strict=True):
        if ok:
            out.append(None)
            in_use += size
        else:
            out.append((ErrorCode.policy_violation, refusal_message(grant.limit, in_use, size)))
    return out


def settle(ctx: FilterContext, grant: PartitionGrant | None, created: int) -> None:
    """The broker answered: end the reservation with what it really created."""
    if grant is not None and ctx.partitions is not None:
        ctx.partitions.settle(ctx.namespace.tenant_id, grant, created)


def release(ctx: FilterContext, partitions: int) -> None:
    """Topics were deleted: give their partitions back."""
    if ctx.partitions is not None:
        ctx.partitions.release(ctx.namespace.tenant_id, partitions)


def grace_s(timeout: timedelta | int | None) -> float:
    """How long after a failure the broker may still complete the request: its `timeout`
    (kio's timedelta, or milliseconds), at most `MAX_FAILURE_GRACE_S`."""
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else (timeout or 0) / 1000
    if seconds <= 0:
        return DEFAULT_FAILURE_GRACE_S
    return min(seconds, MAX_FAILURE_GRACE_S)


def settle_on_failure(
    ctx: FilterContext, grant: PartitionGrant | None, created: CreatedCount, grace: float
) -> Failure:
    """The `Forward.on_failure` of a request holding `grant` (see the module doc)."""

    def failed() -> None:
        if grant is None or grant.reservation_id is None or ctx.partitions is None:
            return
        task = asyncio.get_running_loop().create_task(_settle_failed(ctx, grant, created, grace))
        _settling.add(task)
        task.add_done_callback(_settling.discard)

    return failed


async def _settle_failed(
    ctx: FilterContext, grant: PartitionGrant, created: CreatedCount, grace: float
) -> None:
    tenant = ctx.namespace.tenant_id
    await asyncio.sleep(grace)  # the broker's own deadline for the request
    try:
        async with asyncio.timeout(FLEET_CHECK_S):
            count = await created()
    except Exception as exc:  # the fleet cannot tell: the reconcile counts a late creation
        log.warning("event=partition_failure_check_failed tenant=%s error=%r", tenant, exc)
        count = 0
    log.info(
        "event=partition_reservation_unanswered tenant=%s reservation=%s created=%d",
        tenant,
        grant.reservation_id,
        count,
    )
    settle(ctx, grant, count)
