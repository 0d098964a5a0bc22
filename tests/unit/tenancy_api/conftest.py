"""Fixtures for the admin API's HTTP-layer tests: the API over the in-memory fake store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.tenancy_api.fake_store import FakeStore
from tests.unit.tenancy_api.harness import ServedApi


@pytest.fixture
def api() -> Iterator[ServedApi]:
    store = FakeStore()
    token = store.create_operator("alice", actor="test")
    served = ServedApi(store, token=token).start()
    try:
        yield served
    finally:
        served.stop()
