"""Tenant limits as values: the one check shared by tenants and the plans that set their limits.

Every limit is a positive integer below 2**63; the tenant-wide byte-rate caps (Kafka's bytes/s
units) may also be None, for no cap, and the group and transactional-id counts None, for the
gateway's setting; no request may exceed Kafka's `socket.request.max.bytes`.
Pure; safe from any thread.
"""

from __future__ import annotations

from dataclasses import asdict, fields

from tenancy.domain import TenantLimits
from tenancy.errors import ValidationError

RATE_CAPS = ("max_producer_byte_rate", "max_consumer_byte_rate")  # bytes/s, optional (None)
NAME_LIMITS = ("max_groups", "max_transactional_ids")  # optional (None: the gateway's setting)
OPTIONAL_LIMITS = (*RATE_CAPS, *NAME_LIMITS)
LIMIT_NAMES = tuple(f.name for f in fields(TenantLimits))  # also the tenants' and plans' columns


def limits_from(row: object) -> TenantLimits:
    """The limits a tenant or plan row holds (its columns are named as the limits)."""
    return TenantLimits(**{name: getattr(row, name) for name in LIMIT_NAMES})


MAX_REQUEST_BYTES = 100 * 2**20  # Kafka's socket.request.max.bytes: no request may be larger


def check_limits(limits: object, field: str = "limits") -> TenantLimits:
    """Every limit a positive integer below 2**63; the optional ones may also be None."""
    if not isinstance(limits, TenantLimits):
        raise ValidationError(field, "must be TenantLimits")
    for name, value in asdict(limits).items():
        if value is None and name in OPTIONAL_LIMITS:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            nullable = " or None" if name in OPTIONAL_LIMITS else ""
            raise ValidationError(f"{field}.{name}", f"must be a positive integer{nullable}")
        if value >= 2**63:
            raise ValidationError(f"{field}.{name}", "must be below 2**63")
    if limits.max_request_bytes > MAX_REQUEST_BYTES:
        raise ValidationError(
            f"{field}.max_request_bytes",
            f"must be at most {MAX_REQUEST_BYTES} (Kafka's socket.request.max.bytes)",
        )
    return limits
