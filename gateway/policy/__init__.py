"""The policy stage: one place where every tenant request is authorized, its names and client id
checked, its limits applied, its quotas charged and its usage metered (docs/gateway.md, "The policy
stage").

`TenantPolicy` is built once per authenticated caller (a Kafka session at login, an HTTP request's
`Caller`); the edges — the raw Produce and Fetch paths, the kio filters and the HTTP API — ask it
and map its answers (`Refusal`, throttle times) to Kafka error codes or HTTP problems. This package
imports nothing of `gateway.kafka` or `gateway.http`: the edges depend on it, never the reverse.
"""

from gateway.policy.identity import Identity, QuotaSubject, kafka_principal
from gateway.policy.names import topic_name_problem, valid_topic_name
from gateway.policy.policy import Reason, Refusal, TenantPolicy

__all__ = [
    "Identity",
    "QuotaSubject",
    "Reason",
    "Refusal",
    "TenantPolicy",
    "kafka_principal",
    "topic_name_problem",
    "valid_topic_name",
]
