"""The admin API's resource routes, one module per resource; `add_routes` registers them all.

Every route here must be described in `tenancy/api/openapi.py` (a unit test checks both ways).
"""

from __future__ import annotations

from aiohttp import web

from tenancy.api.routes import (
    acls,
    api_keys,
    billing,
    gateways,
    http_consumers,
    plans,
    quotas,
    service_accounts,
    tenants,
)

MODULES = (
    tenants,
    service_accounts,
    api_keys,
    quotas,
    acls,
    plans,
    billing,
    http_consumers,
    gateways,
)


def add_routes(app: web.Application) -> None:
    for module in MODULES:
        app.router.add_routes(module.routes)
