"""A KIP-848 member that joined through another gateway process, taken into this one's member
ledger as its coordinator describes it (docs/gateway.md, "Groups and transactional ids").

A member's connection to its coordinator moves to another gateway process when the gateway
restarts, the client reconnects to another worker, or the coordinator moves; the process it
lands on did not let it join, so its ledger does not know it. Asking such a member to rejoin
(UNKNOWN_MEMBER_ID) costs a KIP-848 consumer its partitions, so its heartbeat and its commits
first look the member up: one ConsumerGroupDescribe of its group at the coordinator (shared by the
group's members asking meanwhile and for two seconds after; a tenant's look-ups are a token bucket,
`member_ledger.LookUps`, large answers costing more), and a KIP-848 member the coordinator holds
is charged from then on for everything it holds there (a KIP-848 description shows all of it:
subscription, regex, rack, instance id, ids; `member_size.described_charge`). When the look-up
cannot be made (the tenant's look-ups spent, no answer), the coordinator does not hold the member
as a KIP-848 one (a classic member, also of a mixed group, is never adopted: the description
shows only its chosen protocol's metadata and the coordinator keeps all of them), a static
member's instance id has rejoined here under another id since, or the tenant has no room, the
caller answers as before: rejoin here and be charged here. Runs on the event loop.
"""

from __future__ import annotations

from gateway.kafka.filter import FilterContext
from gateway.kafka.filters.member_size import described_charge
from gateway.kafka.member_ledger import CONSUMER_HOLD_S


async def adopted(ctx: FilterContext, group: str, member_id: str) -> bool:
    """Whether the member `member_id` of the tenant's `group`, unknown here, is now in this
    process's ledger (looked up at its coordinator and charged)."""
    members = ctx.members
    if members is None or not member_id:
        return False
    tenant = ctx.namespace.tenant_id
    held = await ctx.fleet.consumer_group_members(
        ctx.namespace.fleet(group), members.look_ups(tenant)
    )
    described = None if held is None else held.members.get(member_id)
    if held is None or described is None:
        return False
    parts = described_charge(described, held.assignor)
    instance = described.instance_id or None
    return members.adopt(tenant, group, member_id, instance, parts, CONSUMER_HOLD_S)
