"""The tenant's partition limit as the filters that create partitions use it (CreateTopics,
CreatePartitions; HTTP v3 topic creation goes through the same filters): reserve in the tenant
store before forwarding, refuse what does not fit, settle with what the broker created.

`reserve` asks `ctx.partitions` (`gateway.reservations.PartitionLedger`) for all the sizes of one
request at once (one store transaction); without a ledger, or when the store cannot be asked,
nothing is granted (fail closed: UNKNOWN_SERVER_ERROR with a retry hint, never a creation past the
limit). `refusals` gives, per size, None (granted) or the (error, message) to answer. Runs on the
event loop.
"""

from __future__ import annotations

from collections.abc import Sequence

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext
from gateway.reservations import LedgerUnavailable, refusal_message
from tenancy.reservations import PartitionGrant

UNAVAILABLE = "The tenant's partition limit could not be checked; try again."


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
