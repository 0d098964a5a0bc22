"""Answering only once a change that takes access away is in force on every gateway.

Owns: `confirm_in_force(request, response)`, which the routes of ACL changes, API key
revocations and tenant status or setting changes call after the store committed. It reads the
store's current change version (at least the change's own) and polls the gateways' heartbeat rows
(`tenancy.gateway_registry`) until every live gateway has applied that version, or
`Propagation.timeout_s` (1 s by default) has passed, then answers with two headers:
`Pier-Change-Version: <version>` and `Pier-Propagation: confirmed` (every live gateway has applied
it: nothing the new state forbids is allowed after this answer) or `unconfirmed` (the bound
passed; `Pier-Propagation-Pending` names the gateways still behind, and a warning is logged).
A gateway that has not reported for `stale_after_s` (10 s) is not live and not waited for: it
has lost the store. Runs on the event loop; store reads go through the store thread pool.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from aiohttp import web

from tenancy.api.context import context_of

log = logging.getLogger("pier.admin.propagation")
VERSION_HEADER = "Pier-Change-Version"
STATUS_HEADER = "Pier-Propagation"
PENDING_HEADER = "Pier-Propagation-Pending"
CONFIRMED, UNCONFIRMED = "confirmed", "unconfirmed"


@dataclass(frozen=True, slots=True)
class Propagation:
    timeout_s: float = 1.0  # the longest an answer waits for the gateways
    stale_after_s: float = 10.0  # a gateway silent this long is not waited for
    poll_s: float = 0.01


DEFAULT_PROPAGATION = Propagation()
PROPAGATION = web.AppKey("pier.admin.propagation", Propagation)


async def confirm_in_force(request: web.Request, response: web.Response) -> web.Response:
    ctx = context_of(request)
    settings = request.app.get(PROPAGATION) or DEFAULT_PROPAGATION
    version = await ctx.run(ctx.store.current_version)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.timeout_s
    while True:
        positions = await ctx.run(ctx.store.gateway_positions, stale_after_s=settings.stale_after_s)
        pending = [p.gateway_id for p in positions if p.applied_version < version]
        if not pending or loop.time() >= deadline:
            break
        await asyncio.sleep(settings.poll_s)
    response.headers[VERSION_HEADER] = str(version)
    response.headers[STATUS_HEADER] = UNCONFIRMED if pending else CONFIRMED
    if pending:
        response.headers[PENDING_HEADER] = ",".join(pending)
        log.warning(
            "event=change_unconfirmed version=%s pending=%s timeout_s=%s",
            version,
            ",".join(pending),
            settings.timeout_s,
        )
    return response
