"""The operators' admin HTTP API (aiohttp): `create_app(store)` builds it; see `app.py`."""

from tenancy.api.app import create_app

__all__ = ["create_app"]
