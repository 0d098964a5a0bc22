"""Tenancy: the tenant store (tenants, service accounts, API keys, quotas, ACLs, plans, operators,
audit log, change feed) on SQLite or PostgreSQL, and (`tenancy.api`) the operators' admin API.

Entry point: `tenancy.store.TenantStore`. Values returned are in `tenancy.domain`, errors in
`tenancy.errors`; pure rules callers may reuse: `tenancy.quota_chain` (Kafka's quota precedence),
`tenancy.plan_rules` (plan JSON and graduated pricing), `tenancy.scram` (SCRAM verifier checks).
Never imports `brokers` or `gateway`.
"""
