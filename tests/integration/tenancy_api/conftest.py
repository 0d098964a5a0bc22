"""Admin API integration tests: the API served over the real tenant store, on SQLite and on a
really started PostgreSQL (the shared fixtures of `tests/tenancy_fixtures.py`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tenancy.store import TenantStore
from tests.tenancy_fixtures import *  # noqa: F403  (fixtures are found by name)
from tests.unit.tenancy_api.harness import ServedApi


@pytest.fixture
def api(store: TenantStore) -> Iterator[ServedApi]:
    token = store.create_operator("alice", actor="test")
    served = ServedApi(store, token=token).start()
    try:
        yield served
    finally:
        served.stop()
