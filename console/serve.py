"""Serving the console's pages: `/console/` (the host's page) and `/console/static/{name}`.

Owns: `ConsoleAssets` (every file of `console/static/` read once, at construction, into memory:
a request names a file only by looking it up in that table, so no path from a request ever reaches
the file system and `..`, `%2F` or absolute names find nothing), the response headers of every
console answer (a strict `Content-Security-Policy` — `default-src 'self'`, no inline script or
style, no framing —, `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`, and
`Cache-Control: no-cache` with a strong `ETag`, so a browser revalidates and an upgrade is seen at
once), the host's page rendered once from `console/page.html` (the one page head both consoles
share: the stylesheet, the icon, the shared scripts, then `<page>.js`), `console_routes` (aiohttp
routes for a host whose routes authenticate themselves, like the gateway's tenant HTTP API) and
`console_middleware` (for a host whose middlewares authenticate every routed path, like the admin
API: it answers the console's paths before them; the pages are public, the API calls they make
carry the user's credentials). Two pages: `operator` (the admin API,
operator token) and `tenant` (the gateway, an API key). See docs/console.md.

Immutable after construction; handlers run on the event loop.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from string import Template
from typing import Literal, get_args

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

Page = Literal["operator", "tenant"]
PREFIX = "/console"
STATIC_DIR = Path(__file__).resolve().parent / "static"
PAGE_TEMPLATE = Path(__file__).resolve().parent / "page.html"
CONTENT_TYPES: Mapping[str, str] = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS: Mapping[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


class Asset:
    """One file's bytes, content type and strong ETag."""

    __slots__ = ("body", "content_type", "etag")

    def __init__(self, body: bytes, content_type: str) -> None:
        self.body = body
        self.content_type = content_type
        self.etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'

    def response(self, request: web.Request) -> web.Response:
        headers = {**SECURITY_HEADERS, "ETag": self.etag}
        if self.etag in request.headers.get("If-None-Match", ""):
            return web.Response(status=304, headers=headers)
        headers["Content-Type"] = self.content_type
        return web.Response(body=self.body, headers=headers)


def render_page(page: Page, template: Path = PAGE_TEMPLATE) -> bytes:
    """The host's page: the shared head with `$page` (a `Page`, never request data) filled in."""
    if page not in get_args(Page):
        raise ValueError(f"no console page {page!r}")
    return Template(template.read_text(encoding="utf-8")).substitute(page=page).encode()


class ConsoleAssets:
    """The static files by name, and the page `/console/` answers for this host."""

    def __init__(
        self, page: Page, directory: Path = STATIC_DIR, template: Path = PAGE_TEMPLATE
    ) -> None:
        self.files: dict[str, Asset] = {
            path.name: Asset(path.read_bytes(), CONTENT_TYPES[path.suffix])
            for path in sorted(directory.iterdir())
            if path.is_file() and path.suffix in CONTENT_TYPES
        }
        self.index = Asset(render_page(page, template), CONTENT_TYPES[".html"])

    async def index_page(self, request: web.Request) -> web.StreamResponse:
        return self.index.response(request)

    async def static_file(self, request: web.Request) -> web.StreamResponse:
        asset = self.files.get(request.match_info.get("name", ""))
        if asset is None:
            raise web.HTTPNotFound(reason="no such console file")
        return asset.response(request)

    async def to_index(self, request: web.Request) -> web.StreamResponse:
        return web.Response(status=308, headers={**SECURITY_HEADERS, "Location": PREFIX + "/"})

    async def answer(self, request: web.Request) -> web.StreamResponse | None:
        """The console's answer to `request`, or None when its path is not the console's."""
        path = request.path
        if path != PREFIX and not path.startswith(PREFIX + "/"):
            return None
        if request.method not in ("GET", "HEAD"):
            raise web.HTTPMethodNotAllowed(request.method, ["GET", "HEAD"])
        if path == PREFIX:
            return await self.to_index(request)
        if path == PREFIX + "/":
            return await self.index_page(request)
        name = path.removeprefix(PREFIX + "/static/")
        asset = self.files.get(name) if name != path else None
        if asset is None:
            raise web.HTTPNotFound(reason="no such console file")
        return asset.response(request)


def console_routes(page: Page, directory: Path = STATIC_DIR) -> list[web.RouteDef]:
    """`GET /console`, `/console/` and `/console/static/{name}` (HEAD too) for `page`."""
    assets = ConsoleAssets(page, directory)
    return [
        web.get(PREFIX, assets.to_index),
        web.get(PREFIX + "/", assets.index_page),
        web.get(PREFIX + "/static/{name}", assets.static_file),
    ]


def add_console(app: web.Application, page: Page) -> None:
    """Add the console's routes to `app` (a host whose routes authenticate themselves)."""
    app.router.add_routes(console_routes(page))


def console_middleware(page: Page, directory: Path = STATIC_DIR) -> Middleware:
    """Answers the console's paths before the host's later middlewares (authentication,
    validation) run: the pages are public; the API requests they make carry credentials."""
    assets = ConsoleAssets(page, directory)

    @web.middleware
    async def serve_console(request: web.Request, handler: Handler) -> web.StreamResponse:
        answer = await assets.answer(request)
        return answer if answer is not None else await handler(request)

    return serve_console
