"""Tenant-store integration tests: each scenario runs against SQLite and a real PostgreSQL."""

from tests.tenancy_fixtures import *  # noqa: F403  (fixtures are found by name)
