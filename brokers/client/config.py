"""Client settings: immutable, validated when built, named after the Java client's where one exists.

Owns: `ClientConfig`. Pure; thread-safe (frozen).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from brokers.client.errors import ClientConfigError
from brokers.client.protocol import DEFAULT_MAX_RESPONSE_BYTES
from brokers.client.versions import CLIENT_VERSIONS

SOFTWARE_NAME = "pier-client"  # KIP-511 client_software_name; must match [a-zA-Z0-9._-]
SOFTWARE_VERSION = "0.1.0"


@dataclass(frozen=True, slots=True)
class ClientConfig:
    client_id: str = "pier-client"  # client.id
    request_timeout_s: float = 30.0  # request.timeout.ms
    connect_timeout_s: float = 10.0  # socket.connection.setup.timeout.ms
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    retries: int = 5  # attempts after the first, for retriable errors
    retry_backoff_s: float = 0.1  # retry.backoff.ms
    retry_backoff_max_s: float = 1.0  # retry.backoff.max.ms (KIP-580)
    # The versions the client may use per API: a sub-range of CLIENT_VERSIONS pins a version
    # (tests; a broker with one broken version). An API left out is never used.
    api_versions: Mapping[int, tuple[int, int]] = field(default_factory=lambda: CLIENT_VERSIONS)

    def __post_init__(self) -> None:
        for name in ("request_timeout_s", "connect_timeout_s"):
            if getattr(self, name) <= 0:
                raise ClientConfigError(f"{name} must be positive")
        if self.max_response_bytes < 8:
            raise ClientConfigError("max_response_bytes must be at least 8")
        if self.retries < 0:
            raise ClientConfigError("retries must not be negative")
        if not 0 <= self.retry_backoff_s <= self.retry_backoff_max_s:
            raise ClientConfigError("need 0 <= retry_backoff_s <= retry_backoff_max_s")
        for api_key, (low, high) in self.api_versions.items():
            known = CLIENT_VERSIONS.get(api_key)
            if known is None or not known[0] <= low <= high <= known[1]:
                raise ClientConfigError(f"api {api_key}: versions {low}-{high} not supported")
