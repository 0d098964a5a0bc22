"""Fixtures of the adversarial tests: attacks a hostile tenant would try, against the real stack.

Each module holds the attacks on one part of the tenant boundary (see docs/security.md). They use
the gateway end-to-end fixtures: `gateway_stack` (module scope, one broker + a SQLite tenant store
with tenants `acme` and `bolt` + `pier gateway`) and the log tails attached to a failing test's
report. A module that needs other gateway settings builds its own `GatewayStack`. Fixtures run on
pytest's main thread.
"""

from __future__ import annotations

from tests.e2e.gateway.conftest import _attach_gateway_logs, gateway_stack

__all__ = ["_attach_gateway_logs", "gateway_stack"]
