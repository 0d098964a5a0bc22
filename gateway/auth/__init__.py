"""SASL authentication of tenant clients at the gateway (docs/gateway.md; docs/security.md, logins).

Owns: the sans-io PLAIN parser (`plain`) and SCRAM-SHA-256/512 server state machine (`scram`), the
async `Authenticator` the connection session drives (the verification cache first, credential
look-ups in worker threads, one uniform failure, a delay per failure, the KIP-368 session
lifetime), the failed-login backoff per source address and key id (`backoff`), the bounded
password-hashing threads (`hashing`) and the Prometheus counters.
A principal is a tenant's service account, reached through one of its API keys (key id as the
username, secret as the password). The parsers are pure; the authenticator runs on the event loop
and is not thread-safe.
"""

from gateway.auth.authenticator import (
    FAILED_MESSAGE,
    MECHANISMS,
    Authenticated,
    AuthenticationFailed,
    Authenticator,
    CredentialStore,
    SaslExchange,
    SaslStep,
    UnsupportedMechanismError,
    session_lifetime_ms,
)
from gateway.auth.backoff import BackoffPolicy, LoginBackoff
from gateway.auth.hashing import HashingBusy, HashingPool
from gateway.auth.metrics import AuthMetrics
from gateway.auth.plain import PlainCredentials, PlainError, parse_plain
from gateway.auth.scram import ScramError, ScramServer, ScramState

__all__ = [
    "FAILED_MESSAGE",
    "MECHANISMS",
    "AuthMetrics",
    "Authenticated",
    "AuthenticationFailed",
    "Authenticator",
    "BackoffPolicy",
    "CredentialStore",
    "HashingBusy",
    "HashingPool",
    "LoginBackoff",
    "PlainCredentials",
    "PlainError",
    "SaslExchange",
    "SaslStep",
    "ScramError",
    "ScramServer",
    "ScramState",
    "UnsupportedMechanismError",
    "parse_plain",
    "session_lifetime_ms",
]
