"""A gateway in front of a real broker, with a real tenant store holding two tenants, for tests.

`GatewayStack` starts one standalone broker (or uses a given bootstrap), creates a SQLite tenant
store with tenants `acme` and `bolt` (a service account and an API key each), and runs `pier
gateway` in front through `infra.gateway.start_gateway` (the launcher `infra/up` uses). Test
settings shorten the gateway's timers: usage flushed every 500 ms, storage sampled every second,
failed logins answered after 50 ms, and a source address backs off only after 1000 failed logins
(every test client comes from 127.0.0.1; tests/adversarial/test_login.py restores the default to
test the backoff). Optional metrics ports expose the broker's and the gateway's
Prometheus endpoints. `client_config(tenant, mechanism)` gives confluent-kafka
settings; `Credentials` carry the key id and secret for the other clients. Blocking; fixtures
build it on pytest's main thread and `close()` stops every process by PID.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.gateway import GatewayProcess, start_gateway
from infra.stack import BrokerProcess, start_broker
from tenancy.domain import DEFAULT_ENTITY, QuotaEntity
from tenancy.quota_chain import QUOTA_NAMES
from tenancy.store import TenantStore

OPERATOR = "op-tests"
TENANTS = ("acme", "bolt")
TEST_GATEWAY_SETTINGS = {
    "usage.flush.interval.ms": "500",
    "storage.sample.interval.ms": "1000",
    "sasl.failure.delay.ms": "50",
    "sasl.failure.backoff.free.failures": "1000",
    "usage.topic.replication.factor": "1",
    "workers": "1",  # one process per test gateway (the default is the cores); tests that want more say so
}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class Credentials:
    tenant: str
    service_account: str
    key_id: str
    secret: str


class GatewayStack:
    def __init__(
        self,
        root: Path,
        *,
        broker_config: Mapping[str, str] | None = None,
        gateway_settings: Mapping[str, str] | None = None,
        broker_metrics_port: int | None = None,
        gateway_metrics_port: int | None = None,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        self.root = root
        self.broker: BrokerProcess | None = None
        self.gateway: GatewayProcess | None = None
        self.db_url = f"sqlite:///{root / 'tenancy.db'}"
        self._broker_config = dict(broker_config or {})
        self._settings = {**TEST_GATEWAY_SETTINGS, **(gateway_settings or {})}
        self.credentials: dict[str, Credentials] = {}
        self.tls = tls
        self._broker_metrics_port = broker_metrics_port
        self._gateway_metrics_port = gateway_metrics_port

    def __enter__(self) -> GatewayStack:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        with TenantStore.open(self.db_url) as store:
            store.upgrade()
            for tenant in TENANTS:
                self.credentials[tenant] = self.add_tenant(store, tenant)
        self.broker = start_broker(
            self.root / "broker" / "data",
            config=self._broker_config,
            metrics_port=self._broker_metrics_port,
        )
        self.gateway = start_gateway(
            self.root / "gateway",
            self.broker.bootstrap,
            self.db_url,
            node_ids=[self.broker.node_id],
            metrics_port=self._gateway_metrics_port,
            properties=self._settings,
            tls=self.tls,
        )

    @staticmethod
    def add_tenant(store: TenantStore, tenant_id: str, name: str = "app") -> Credentials:
        if not any(t.id == tenant_id for t in store.list_tenants(limit=100).items):
            # "open": the tests' accounts may use what no ACL names (the adversarial tests of
            # tests/adversarial/test_access.py build tenants whose accounts need ACLs).
            store.create_tenant(
                display_name=tenant_id,
                plan="free",
                tenant_id=tenant_id,
                authorization="open",
                actor=OPERATOR,
            )
            # Without the free plan's default quotas: each test sets the quotas it means.
            no_quotas = dict.fromkeys(QUOTA_NAMES, None)
            store.set_quotas(
                tenant_id, QuotaEntity(DEFAULT_ENTITY, None), no_quotas, actor=OPERATOR
            )
        account = store.create_service_account(tenant_id, name=name, actor=OPERATOR)
        key, secret = store.create_api_key(tenant_id, service_account_id=account.id, actor=OPERATOR)
        return Credentials(tenant_id, account.id, key.key_id, str(secret))

    def store(self) -> TenantStore:
        return TenantStore.open(self.db_url)

    def set_quota(
        self, tenant: str, user: str | None, client_id: str | None, **quotas: float
    ) -> None:
        with self.store() as store:
            store.set_quotas(tenant, QuotaEntity(user, client_id), quotas, actor=OPERATOR)

    @property
    def bootstrap(self) -> str:
        assert self.gateway is not None
        return self.gateway.bootstrap

    def client_config(
        self, tenant: str = "acme", mechanism: str = "PLAIN", **extra: Any
    ) -> dict[str, Any]:
        """confluent-kafka settings for a tenant's key through the gateway."""
        creds = self.credentials[tenant]
        tls = {} if self.tls is None else {"ssl.ca.location": str(self.tls[0])}
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_PLAINTEXT" if self.tls is None else "SASL_SSL",
            **tls,
            "sasl.mechanism": mechanism,
            "sasl.username": creds.key_id,
            "sasl.password": creds.secret,
            **extra,
        }

    def close(self) -> None:
        for process in (self.gateway, self.broker):
            if process is not None:
                process.stop()
        self.gateway = self.broker = None
