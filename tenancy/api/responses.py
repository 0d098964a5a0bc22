"""Building successful JSON responses: timestamps, pages with `next_cursor` and a `Link` header.

Owns: the response conventions shared by every resource module — RFC 3339 UTC timestamps
(`...Z`; a naive datetime from the store is read as UTC, since SQLite drops the offset),
`{"items": [...], "next_cursor": ...}` pages with an RFC 8288 `rel="next"` link that keeps the
request's other query parameters. Pure functions; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from aiohttp import web

from tenancy.api.validation import PARAMS

T = TypeVar("T")


class PageLike(Protocol[T]):
    @property
    def items(self) -> list[T]: ...
    @property
    def next_cursor(self) -> str | None: ...


def iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_time(text: str | None) -> datetime | None:
    """An RFC 3339 timestamp (naive ones are UTC); ValueError when unparseable."""
    if text is None:
        return None
    moment = datetime.fromisoformat(text.replace("z", "Z"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def json_ok(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status)


def page_response(
    request: web.Request, page: PageLike[T], render: Callable[[T], dict[str, Any]]
) -> web.Response:
    body = {"items": [render(item) for item in page.items], "next_cursor": page.next_cursor}
    response = web.json_response(body)
    if page.next_cursor is not None:
        following = request.rel_url.update_query({"cursor": page.next_cursor})
        response.headers["Link"] = f'<{following}>; rel="next"'
    return response


def page_args(request: web.Request) -> dict[str, Any]:
    """`cursor`/`limit` keyword arguments for a store `list_*` call (validated already)."""
    params = request[PARAMS]
    args: dict[str, Any] = {"cursor": params.get("cursor")}
    if "limit" in params:
        args["limit"] = params["limit"]
    return args
