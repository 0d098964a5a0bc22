"""Errors of the admin HTTP layer itself (auth, body limits, media types, idempotency, validation).

Owns: the exceptions raised by `tenancy.api` before or around a store call. Like the store's
`tenancy.errors`, they carry no HTTP status: `problems.py` is the one place that maps both
families to `application/problem+json` responses. Plain data; safe from any thread.
"""

from __future__ import annotations

from dataclasses import dataclass


class ApiError(Exception):
    """Base of every admin API error; `str()` is the human-readable detail."""


class UnauthorizedError(ApiError):
    """No bearer token, a malformed `Authorization` header, or a token no operator holds."""


class PayloadTooLargeError(ApiError):
    """The request body exceeds the configured limit (checked before it is read)."""


class UnsupportedMediaTypeError(ApiError):
    """A body was sent with a media type other than JSON."""


class MalformedBodyError(ApiError):
    """The body is not parseable JSON (or not UTF-8)."""


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One failing field: `field` is a location such as `body.display_name` or `query.limit`."""

    field: str
    message: str


class RequestValidationError(ApiError):
    """The request does not match the OpenAPI document; `problems` names every failing field."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        self.problems = problems
        first = problems[0] if problems else FieldProblem("request", "invalid")
        super().__init__(f"{first.field}: {first.message}")


class IdempotencyMismatchError(ApiError):
    """An `Idempotency-Key` was reused with a different request (draft-ietf-httpapi-idempotency-key)."""


class IdempotencyInFlightError(ApiError):
    """A request with the same `Idempotency-Key` is still being processed."""
