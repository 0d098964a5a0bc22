"""Every endpoint scenario of `tests/unit/tenancy_api/test_endpoints.py`, re-run against the real
store on SQLite and PostgreSQL (the `api` fixture of this folder's conftest)."""

from __future__ import annotations

import pytest

from tests.unit.tenancy_api.test_endpoints import *  # noqa: F403  (the scenarios, collected here too)

pytestmark = pytest.mark.integration
