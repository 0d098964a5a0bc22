"""Identifiers: generation and syntax of tenant ids, service account ids, key ids and ACL ids.

Tenant ids are short and immutable because the fleet stores every tenant resource under the
tenant's prefix; the rest are opaque, prefixed so a reader can tell them apart (key ids look like
Confluent Cloud's: 16 upper-case alphanumerics). All randomness comes from `secrets`. Stateless;
safe from any thread.
"""

from __future__ import annotations

import re
import secrets
import string

from tenancy.errors import ValidationError

TENANT_ID = re.compile(r"[a-z][a-z0-9-]{2,15}")
SERVICE_ACCOUNT_ID = re.compile(r"sa-[a-z0-9]{10}")
KEY_ID = re.compile(r"[A-Z0-9]{16}")
_LOWER = string.ascii_lowercase + string.digits
_UPPER = string.ascii_uppercase + string.digits
SECRET_ALPHABET = string.ascii_letters + string.digits
SECRET_LENGTH = 64  # 64 × log2(62) ≈ 381 bits, above the 32 bytes asked for; no `:` for HTTP Basic


def _random(alphabet: str, length: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(length))


def new_tenant_id() -> str:
    """`t` + 9 lower-case alphanumerics: matches TENANT_ID and never collides with a word."""
    return "t" + _random(_LOWER, 9)


def new_service_account_id() -> str:
    return "sa-" + _random(_LOWER, 10)


def new_key_id() -> str:
    return _random(_UPPER, 16)


def new_acl_id() -> str:
    return "acl-" + _random(_LOWER, 12)


def new_secret() -> str:
    return _random(SECRET_ALPHABET, SECRET_LENGTH)


def check_tenant_id(tenant_id: str) -> str:
    """Validate a caller-chosen tenant id: `[a-z][a-z0-9-]{2,15}`, no trailing or double dash."""
    if not isinstance(tenant_id, str) or TENANT_ID.fullmatch(tenant_id) is None:
        raise ValidationError("tenant_id", "must match [a-z][a-z0-9-]{2,15}")
    # A trailing or doubled dash would make `<tenant>-` prefixes ambiguous to read in the fleet.
    if tenant_id.endswith("-") or "--" in tenant_id:
        raise ValidationError("tenant_id", "must not end with '-' or contain '--'")
    return tenant_id
