"""The local stack launcher: the one way `infra/up` and the test fixtures start Pier's processes.

`Stack` starts what is asked (a ZooKeeper, brokers, the admin API, the gateway) under one
root directory and, on exit from its `with` block (also on error, also when starting fails half
way), stops every process it started by PID with SIGTERM so they shut down cleanly: the gateway,
the admin API, then brokers, newest first, then ZooKeeper. The building blocks (`start_broker`, `start_zookeeper`,
`start_admin_api`, `free_port`) are re-exported here so callers import from one place. Blocking; a
`Stack` belongs to one thread.

Layout under `root`: `zookeeper/` (zoo.cfg, snapshots, zookeeper.log), per broker N
`broker-N/data/` (its log dir) beside `broker-N/broker-N.properties` and `broker-N/broker-N.log`,
unless the caller names the data dir (as `infra/up --standalone` does for its broker), and
`admin-api.log`, and `gateway/` (`gateway.log`, `gateway.properties`). The tenant store is the
caller's (`infra/up` keeps a SQLite file here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from infra.admin_api import AdminApiProcess, init_tenant_store, start_admin_api
from infra.billing_loop import BillingStreamProcess, start_billing_stream
from infra.broker import PIER_PROGRAM, BrokerProcess, start_broker
from infra.errors import LaunchError, NotReadyError, ProcessExitedError
from infra.gateway import GatewayProcess, start_gateway
from infra.probes import free_port, http_ok, kafka_ready, port_in_use, zookeeper_ready
from infra.zookeeper import ZooKeeperProcess, start_zookeeper

__all__ = [
    "AdminApiProcess",
    "BrokerProcess",
    "GatewayProcess",
    "LaunchError",
    "NotReadyError",
    "ProcessExitedError",
    "Stack",
    "ZooKeeperProcess",
    "free_port",
    "http_ok",
    "init_tenant_store",
    "kafka_ready",
    "port_in_use",
    "start_admin_api",
    "start_broker",
    "start_zookeeper",
    "zookeeper_ready",
]


class Stack:
    """Processes of one local deployment, stopped together.

    `Stack(root, zookeeper=True, brokers=3)` starts a ZooKeeper and three brokers on `with`; more
    can be added with `start_zookeeper()` / `add_broker()` / `start_admin_api()`. Brokers get
    `zookeeper.connect` when a ZooKeeper is running.
    """

    def __init__(
        self,
        root: Path,
        *,
        zookeeper: bool = False,
        brokers: int = 0,
        host: str = "127.0.0.1",
        broker_config: Mapping[str, str] | None = None,
        broker_program: Sequence[str] = PIER_PROGRAM,
        admin_program: Sequence[str] = PIER_PROGRAM,
        wait: float = 30.0,
    ) -> None:
        self.root = root
        self.host = host
        self.zookeeper: ZooKeeperProcess | None = None
        self.brokers: list[BrokerProcess] = []
        self.admin_api: AdminApiProcess | None = None
        self.gateway: GatewayProcess | None = None
        self.billing: BillingStreamProcess | None = None
        self._want_zookeeper = zookeeper
        self._want_brokers = brokers
        self._broker_config = dict(broker_config or {})
        self._broker_program = tuple(broker_program)
        self._admin_program = tuple(admin_program)
        self._wait = wait

    def __enter__(self) -> Stack:
        try:
            if self._want_zookeeper:
                self.start_zookeeper()
            for _ in range(self._want_brokers):
                self.add_broker()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def bootstrap(self) -> str:
        """Comma-separated `host:port` of every broker, for `bootstrap.servers`."""
        return ",".join(broker.bootstrap for broker in self.brokers)

    def start_zookeeper(self, *, port: int | None = None) -> ZooKeeperProcess:
        if self.zookeeper is not None:
            raise LaunchError(f"this stack already runs ZooKeeper on {self.zookeeper.connect}")
        self.zookeeper = start_zookeeper(
            self.root / "zookeeper", port=port, host=self.host, wait=self._wait
        )
        return self.zookeeper

    def add_broker(
        self,
        *,
        node_id: int | None = None,
        port: int | None = None,
        data_dir: Path | None = None,
        config: Mapping[str, str] | None = None,
        metrics_port: int | None = None,
    ) -> BrokerProcess:
        """Start one more broker; node ids count up from 0 unless given."""
        node_id = node_id if node_id is not None else len(self.brokers)
        if any(broker.node_id == node_id for broker in self.brokers):
            raise LaunchError(f"broker {node_id} already runs in this stack")
        broker = start_broker(
            data_dir or self.root / f"broker-{node_id}" / "data",
            port=port,
            host=self.host,
            node_id=node_id,
            config={**self._broker_config, **(config or {})},
            metrics_port=metrics_port,
            zookeeper=self.zookeeper.connect if self.zookeeper else None,
            wait=self._wait,
            program=self._broker_program,
        )
        self.brokers.append(broker)
        return broker

    def start_admin_api(
        self, db_url: str, *, port: int | None = None, gateway_http: Sequence[str] = ()
    ) -> AdminApiProcess:
        """Start the admin API on a tenant store that `pier tenancy init` has prepared;
        `gateway_http` are the gateways' HTTP base URLs its operator view asks. In cluster mode
        it reads the gateways' fleet registrations from this stack's ZooKeeper."""
        if self.admin_api is not None:
            raise LaunchError(f"this stack already runs the admin API on {self.admin_api.url}")
        self.admin_api = start_admin_api(
            db_url,
            self.root / "admin-api.log",
            port=port,
            gateway_http=gateway_http,
            zookeeper=self.zookeeper.connect if self.zookeeper is not None else None,
            host=self.host,
            wait=self._wait,
            program=self._admin_program,
        )
        return self.admin_api

    def start_gateway(
        self,
        db_url: str,
        *,
        port: int | None = None,
        broker_port_base: int | None = None,
        metrics_port: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> GatewayProcess:
        """Start the tenant gateway in front of this stack's brokers."""
        if self.gateway is not None:
            raise LaunchError(f"this stack already runs a gateway on {self.gateway.bootstrap}")
        if not self.brokers:
            raise LaunchError("the gateway needs brokers: start them first")
        self.gateway = start_gateway(
            self.root / "gateway",
            self.bootstrap,
            db_url,
            node_ids=[broker.node_id for broker in self.brokers],
            port=port,
            broker_port_base=broker_port_base,
            host=self.host,
            metrics_port=metrics_port,
            properties=properties,
            wait=self._wait,
            program=self._admin_program,
        )
        return self.gateway

    def start_billing_stream(
        self, db_url: str, *, trigger: str = "30s", state_dir: Path | None = None
    ) -> BillingStreamProcess:
        """Roll `__usage` up into the tenant store as a stream (`pier billing stream`), a
        micro-batch every `trigger`; counted ids and checkpoint under `state_dir`
        (default `<root>/billing-state`)."""
        if self.billing is not None:
            raise LaunchError("this stack already runs the billing rollup")
        self.billing = start_billing_stream(
            self.root / "billing.log",
            db_url,
            self.bootstrap,
            state_dir or self.root / "billing-state",
            trigger=trigger,
            program=self._admin_program,
        )
        return self.billing

    def close(self) -> None:
        """Stop every process started here, by PID; safe to call more than once."""
        # The gateway goes first: it flushes metered usage to the brokers, which must still run.
        # The admin API depends on no broker; it goes next so nothing still answers operators
        # while the fleet is going away.
        processes: list[
            BillingStreamProcess
            | GatewayProcess
            | AdminApiProcess
            | BrokerProcess
            | ZooKeeperProcess
        ] = []
        if self.billing is not None:  # reads the brokers and writes the store: first to go
            processes.append(self.billing)
        if self.gateway is not None:
            processes.append(self.gateway)
        if self.admin_api is not None:
            processes.append(self.admin_api)
        processes += reversed(self.brokers)
        if self.zookeeper is not None:
            processes.append(self.zookeeper)
        self.admin_api = None
        self.gateway = None
        self.billing = None
        self.brokers.clear()
        self.zookeeper = None
        failures: list[Exception] = []
        for process in processes:
            try:
                process.stop()
            except Exception as exc:  # keep stopping the others; report the first failure
                failures.append(exc)
        if failures:
            raise failures[0]
