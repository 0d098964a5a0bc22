"""Launching the tenant gateway (`pier gateway`) for `infra/up` and the tests.

`start_gateway` runs `python -m pier gateway --bootstrap … --db … --port P --broker-port-base B`
with its output appended to a log file; readiness is the bootstrap port answering ApiVersions
(which the gateway answers before authentication), or accepting connections when it serves TLS. The broker ports follow `B + node id`; with
no ports given, a free block is picked. Blocking; one object per process, not shared between
threads.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from infra import process as proc
from infra.broker import PIER_PROGRAM, format_properties
from infra.probes import free_port, kafka_ready, port_in_use

_ENV = {"PYTHONUNBUFFERED": "1"}


@dataclass
class GatewayProcess:
    host: str
    port: int
    broker_port_base: int
    process: subprocess.Popen[bytes]
    log_path: Path
    metrics_port: int | None = None
    tls: bool = False
    http_port: int | None = None
    program: tuple[str, ...] = field(default=PIER_PROGRAM, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (listeners close, metered usage is flushed), wait, SIGKILL after `timeout`."""
        return proc.terminate(self.process, timeout)

    def kill(self) -> None:
        proc.kill(self.process)

    def listening(self) -> bool:
        """Every listener it was given accepts: the Kafka port answers ApiVersions, and the HTTP
        and metrics ports (when set) take connections. The gateway opens its HTTP port after its
        Kafka listeners, so the Kafka answer alone does not mean the HTTP API is up."""
        # A TLS listener cannot answer the plaintext probe: there, accepting is ready enough.
        kafka = port_in_use(self.host, self.port) if self.tls else kafka_ready(self.host, self.port)
        others = (port for port in (self.http_port, self.metrics_port) if port)
        return kafka and all(port_in_use(self.host, port) for port in others)

    def wait_ready(self, timeout: float = 30.0) -> None:
        proc.wait_ready(
            self.process,
            self.listening,
            timeout=timeout,
            name=f"gateway on {self.bootstrap}",
            log_path=self.log_path,
        )


def free_port_block(host: str, node_ids: Sequence[int], avoid: int | None = None) -> int:
    """A base B such that B + id is free for every id and none is `avoid` (the bootstrap port)."""
    for _ in range(50):
        base = free_port(host) - min(node_ids, default=0)
        ports = [base + i for i in node_ids]
        if base > 1024 and avoid not in ports and not any(port_in_use(host, p) for p in ports):
            return base
    raise RuntimeError("no free block of ports for the gateway's broker listeners")


def start_gateway(
    root: Path,
    bootstrap: str,
    db_url: str,
    *,
    node_ids: Sequence[int],
    port: int | None = None,
    broker_port_base: int | None = None,
    host: str = "127.0.0.1",
    metrics_port: int | None = None,
    properties: Mapping[str, str] | None = None,
    tls: tuple[Path, Path] | None = None,
    wait: float = 30.0,
    program: Sequence[str] = PIER_PROGRAM,
) -> GatewayProcess:
    """Start a gateway in front of `bootstrap` and wait up to `wait` s until it answers."""
    root.mkdir(parents=True, exist_ok=True)
    port = port if port is not None else free_port(host)
    base = broker_port_base
    if base is None:
        base = free_port_block(host, node_ids, avoid=port)
    argv = [
        *program,
        "gateway",
        "--bootstrap", bootstrap,
        "--db", db_url,
        "--host", host,
        "--port", str(port),
        "--broker-port-base", str(base),
    ]  # fmt: skip
    if metrics_port is not None:
        argv += ["--metrics-port", str(metrics_port)]
    if tls is not None:
        argv += ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])]
    if properties:
        config_path = root / "gateway.properties"
        config_path.write_text(format_properties(properties), encoding="utf-8")
        argv += ["--config", str(config_path)]
    log_path = root / "gateway.log"
    gateway = GatewayProcess(
        host=host,
        port=port,
        broker_port_base=base,
        process=proc.spawn(argv, log_path, _ENV),
        log_path=log_path,
        metrics_port=metrics_port,
        tls=tls is not None,
        http_port=int((properties or {}).get("http.port", 0)) or None,
        program=tuple(program),
    )
    if wait > 0:
        try:
            gateway.wait_ready(wait)
        except BaseException:
            gateway.kill()
            raise
    return gateway
