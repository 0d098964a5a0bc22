"""Alembic migrations of the tenant store; run them with `TenantStore.upgrade()` (see `tenancy.schema`)."""
