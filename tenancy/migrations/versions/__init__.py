"""Alembic revisions of the tenant store, oldest first (`0001_…`, `0002_…`)."""
