"""KIP-368 session lifetime: min(connections.max.reauth.ms, key expiry − now), 0 = no limit."""

from __future__ import annotations

import pytest

from gateway.auth import session_lifetime_ms

pytestmark = pytest.mark.unit
NOW = 1_700_000_000_000


@pytest.mark.parametrize(
    ("max_reauth_ms", "expires_at_ms", "lifetime"),
    [
        (None, None, 0),  # neither applies: the client need not re-authenticate
        (0, None, 0),  # Kafka: connections.max.reauth.ms ≤ 0 is "not set"
        (-5, None, 0),
        (3_600_000, None, 3_600_000),
        (None, NOW + 90_000, 90_000),
        (3_600_000, NOW + 90_000, 90_000),  # the key expires first
        (60_000, NOW + 90_000, 60_000),  # re-authentication is due first
        (0, NOW + 90_000, 90_000),
        (None, NOW + 1, 1),
    ],
)
def test_lifetime_is_the_nearest_limit(
    max_reauth_ms: int | None, expires_at_ms: int | None, lifetime: int
) -> None:
    assert session_lifetime_ms(NOW, max_reauth_ms, expires_at_ms) == lifetime


@pytest.mark.parametrize("expires_at_ms", [NOW, NOW - 1, NOW - 86_400_000])
def test_an_expired_key_never_reads_as_no_limit(expires_at_ms: int) -> None:
    """The Authenticator refuses such keys; should one expire between its check and this call,
    the session ends at once instead of getting Kafka's clamped 0 ("no limit")."""
    assert session_lifetime_ms(NOW, None, expires_at_ms) == 1
    assert session_lifetime_ms(NOW, 60_000, expires_at_ms) == 1
