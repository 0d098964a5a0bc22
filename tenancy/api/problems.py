"""The one place that turns typed errors into RFC 9457 `application/problem+json` responses.

Owns: the middleware every request passes through first, and the table from exception type to
HTTP status. Handlers and other middlewares only raise (`tenancy.errors` from the store,
`tenancy.api.errors` from the HTTP layer, aiohttp's own 404/405/413); nothing else builds an
error response. Bodies carry type, title, status, detail, instance (the request path) and, for
validation failures, `errors: [{field, message}]` — never a stack trace or a secret. Anything
unexpected is a 500 with a generic detail and one log line. Runs on the event loop.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from tenancy import errors as store_errors
from tenancy.api import errors as api_errors

CONTENT_TYPE = "application/problem+json"
CHALLENGE = 'Bearer realm="pier-admin"'
_log = logging.getLogger("pier.admin_api")


@dataclass(frozen=True, slots=True)
class Problem:
    status: int
    slug: str
    title: str
    detail: str
    errors: list[dict[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)

    def body(self, instance: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": f"urn:pier:problem:{self.slug}",
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "instance": instance,
        }
        if self.errors:
            body["errors"] = self.errors
        return body


# (status, slug, title) by exception type; the first matching entry (in MRO order) wins.
_TABLE: dict[type[BaseException], tuple[int, str, str]] = {
    api_errors.UnauthorizedError: (401, "unauthorized", "Unauthorized"),
    api_errors.PayloadTooLargeError: (413, "payload-too-large", "Payload too large"),
    api_errors.UnsupportedMediaTypeError: (415, "unsupported-media-type", "Unsupported media type"),
    api_errors.MalformedBodyError: (400, "malformed-body", "Malformed body"),
    api_errors.RequestValidationError: (400, "validation", "Invalid request"),
    api_errors.IdempotencyMismatchError: (422, "idempotency-key-reused", "Idempotency key reused"),
    api_errors.IdempotencyInFlightError: (409, "idempotency-in-flight", "Request in progress"),
    store_errors.ValidationError: (400, "validation", "Invalid request"),
    store_errors.NotFoundError: (404, "not-found", "Not found"),
    store_errors.ConflictError: (409, "conflict", "Conflict"),
    store_errors.ForbiddenError: (403, "forbidden", "Forbidden"),
    store_errors.TenancyError: (400, "bad-request", "Bad request"),
}


def problem_for(exc: BaseException) -> Problem:
    """The problem describing `exc` (a 500 for anything not in the table)."""
    if isinstance(exc, web.HTTPException):
        return _from_http(exc)
    for kind in type(exc).__mro__:
        if kind in _TABLE:
            status, slug, title = _TABLE[kind]
            return Problem(status, slug, title, str(exc) or title, _fields(exc), _headers(exc))
    return Problem(500, "internal", "Internal server error", "an unexpected error occurred")


def _fields(exc: BaseException) -> list[dict[str, str]]:
    if isinstance(exc, api_errors.RequestValidationError):
        return [{"field": p.field, "message": p.message} for p in exc.problems]
    if isinstance(exc, store_errors.ValidationError):
        name = getattr(exc, "field", None) or "request"
        message = getattr(exc, "message", None) or str(exc)
        return [{"field": str(name), "message": str(message)}]
    return []


def _headers(exc: BaseException) -> dict[str, str]:
    if isinstance(exc, api_errors.UnauthorizedError):
        return {"WWW-Authenticate": CHALLENGE}
    return {}


def _from_http(exc: web.HTTPException) -> Problem:
    status = exc.status
    slug = {404: "not-found", 405: "method-not-allowed", 413: "payload-too-large"}.get(
        status, "http-error"
    )
    headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else {}
    return Problem(status, slug, exc.reason, exc.reason, headers=headers)


def problem_response(problem: Problem, instance: str) -> web.Response:
    return web.Response(
        status=problem.status,
        text=json.dumps(problem.body(instance)),
        content_type=CONTENT_TYPE,
        headers=problem.headers,
    )


@web.middleware
async def problem_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise  # redirects and the like are not problems
        return problem_response(problem_for(exc), request.path)
    except Exception as exc:
        problem = problem_for(exc)
        if problem.status >= 500:
            _log.error(
                "event=unhandled_error method=%s path=%s error=%s",
                request.method,
                request.path,
                type(exc).__name__,
                exc_info=exc,
            )
        return problem_response(problem, request.path)
    return response
