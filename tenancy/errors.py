"""Domain errors of the tenant store.

Every failure a caller can cause raises one of these; the admin API maps them to HTTP statuses in one
place (NotFound → 404, Conflict → 409, Validation → 400, Forbidden → 403). They never carry transport
codes. Pure data: safe from any thread.
"""

from __future__ import annotations


class TenancyError(Exception):
    """Base of every tenant-store error."""


class NotFoundError(TenancyError):
    """The named tenant, service account, key, ACL, plan or quota entity does not exist."""


class ConflictError(TenancyError):
    """The change clashes with the current state (duplicate name, deleted tenant, ...)."""


class ValidationError(TenancyError):
    """An argument is malformed; `field` names it (dotted for nested values, e.g. `limits.max_connections`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class ForbiddenError(TenancyError):
    """The change reaches across tenants (e.g. another tenant's service account as a principal)."""


class TenantDeletedError(ForbiddenError):
    """A change under a deleted tenant: deleted tenants are read-only (403, not a conflict)."""
