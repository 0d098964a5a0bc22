"""console.serve over aiohttp's in-process test server: the pages, their content types and
security headers, revalidation, and requests that try to reach files outside the table."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from aiohttp.typedefs import Handler

from console.serve import (
    CONTENT_SECURITY_POLICY,
    PAGE_TEMPLATE,
    STATIC_DIR,
    ConsoleAssets,
    console_middleware,
    console_routes,
    render_page,
)

pytestmark = pytest.mark.unit
Check = Callable[[TestClient[web.Request, web.Application]], Awaitable[None]]
TRAVERSALS = (
    "/console/static/../serve.py",
    "/console/static/..%2Fserve.py",
    "/console/static/%2e%2e%2f__init__.py",
    "/console/static/%2Fetc%2Fpasswd",
    "/console/static/serve.py",
    "/console/static/",
    "/console/static/static",
    "/console/secret.html",
)


def run(app: web.Application, check: Check) -> None:
    async def main() -> None:
        async with TestClient(TestServer(app)) as client:
            await check(client)

    asyncio.run(main())


def routed(page: str = "tenant", directory: Path = STATIC_DIR) -> web.Application:
    app = web.Application()
    app.add_routes(console_routes(page, directory))  # type: ignore[arg-type]
    return app


def guarded() -> web.Application:
    """A host like the admin API: a later middleware refuses every request without a token."""

    @web.middleware
    async def deny(request: web.Request, handler: Handler) -> web.StreamResponse:
        raise web.HTTPUnauthorized()

    async def api(request: web.Request) -> web.Response:
        return web.json_response({"secret": "data"})

    app = web.Application(middlewares=[console_middleware("operator"), deny])
    app.router.add_get("/v1/things", api)
    return app


@pytest.mark.parametrize("host", [routed, guarded])
def test_pages_and_files_have_their_types_and_the_policy(
    host: Callable[[], web.Application],
) -> None:
    async def check(client: TestClient[web.Request, web.Application]) -> None:
        page = await client.get("/console/")
        assert page.status == 200
        assert page.headers["Content-Type"] == "text/html; charset=utf-8"
        body = await page.text()
        assert ("tenant.js" if host is routed else "operator.js") in body
        for name, kind in (
            ("common.js", "text/javascript; charset=utf-8"),
            ("console.css", "text/css; charset=utf-8"),
            ("pier.svg", "image/svg+xml"),
        ):
            answer = await client.get(f"/console/static/{name}")
            assert answer.status == 200 and answer.headers["Content-Type"] == kind
            assert answer.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
            assert answer.headers["X-Content-Type-Options"] == "nosniff"
            assert answer.headers["Cache-Control"] == "no-cache"
            assert await answer.read() == (STATIC_DIR / name).read_bytes()
        assert "default-src 'self'" in page.headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
        redirect = await client.get("/console", allow_redirects=False)
        assert redirect.status == 308 and redirect.headers["Location"] == "/console/"

    run(host(), check)


@pytest.mark.parametrize("host", [routed, guarded])
def test_no_request_reaches_a_file_outside_the_table(host: Callable[[], web.Application]) -> None:
    async def check(client: TestClient[web.Request, web.Application]) -> None:
        for path in TRAVERSALS:
            answer = await client.get(path)
            assert answer.status == 404, path
            assert "import" not in await answer.text(), path

    run(host(), check)


def test_an_unchanged_file_is_revalidated_with_its_etag() -> None:
    async def check(client: TestClient[web.Request, web.Application]) -> None:
        first = await client.get("/console/static/common.js")
        etag = first.headers["ETag"]
        again = await client.get("/console/static/common.js", headers={"If-None-Match": etag})
        assert again.status == 304 and await again.read() == b""
        other = await client.get("/console/static/common.js", headers={"If-None-Match": '"x"'})
        assert other.status == 200

    run(routed(), check)


def test_the_middleware_answers_only_console_paths_and_only_reads() -> None:
    async def check(client: TestClient[web.Request, web.Application]) -> None:
        assert (await client.get("/v1/things")).status == 401  # the host's guard still runs
        assert (await client.get("/consoles")).status == 401  # not the console's prefix
        assert (await client.post("/console/")).status == 405
        assert (await client.head("/console/static/common.js")).status == 200

    run(guarded(), check)


def test_only_known_file_kinds_are_loaded(tmp_path: Path) -> None:
    for name in ("app.js", "app.css"):
        (tmp_path / name).write_text(name)
    (tmp_path / "notes.py").write_text("import os")
    (tmp_path / ".hidden").write_text("x")
    assert sorted(ConsoleAssets("operator", tmp_path).files) == ["app.css", "app.js"]

    async def check(client: TestClient[web.Request, web.Application]) -> None:
        assert (await client.get("/console/static/notes.py")).status == 404
        assert (await client.get("/console/static/page.html")).status == 404  # not a file

    run(routed("tenant", tmp_path), check)


@pytest.mark.parametrize("page", ["operator", "tenant"])
def test_both_pages_share_one_head_and_differ_only_in_their_script(page: str) -> None:
    """One template (`console/page.html`): the shared stylesheet and scripts in both pages, in
    order, then the page's own; no inline script or style (the policy allows none)."""
    other = "tenant" if page == "operator" else "operator"
    html = render_page(page).decode()  # type: ignore[arg-type]
    assert f"<title>Pier console · {page}</title>" in html
    assert f'data-console="{page}"' in html and "$" not in html
    scripts = re.findall(r'<script src="/console/static/([a-z]+\.js)" defer></script>', html)
    assert scripts == ["common.js", "chart.js", "billing.js", f"{page}.js"]
    assert html.count("<script") == len(scripts) and "<style" not in html
    assert 'href="/console/static/console.css"' in html and f"{other}.js" not in html
    assert (STATIC_DIR / f"{page}.js").is_file()
    assert render_page(other).replace(other.encode(), page.encode()) == html.encode()  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no console page"):
        render_page("admin")  # type: ignore[arg-type]


def test_no_asset_comes_from_another_origin() -> None:
    """No CDN: every script, style and image is one of ours (the CSP would block others)."""
    for path in [*STATIC_DIR.iterdir(), PAGE_TEMPLATE]:
        text = path.read_text().replace("http://www.w3.org/2000/svg", "")  # the SVG namespace
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, path
