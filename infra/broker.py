"""Launching `pier broker` processes for the local stack and the test fixtures.

A broker runs as `python -m pier broker --data-dir DIR --port PORT --host HOST --node-id N
--config FILE [--metrics-port PORT]`, its settings written to `<data_dir>/../broker-N.properties` with
Kafka's config names (`zookeeper.connect` when a ZooKeeper is given), its output appended to
`<data_dir>/../broker-N.log`. The data dir itself is left for the broker to create, as Kafka's
`log.dirs` are. Readiness is an ApiVersions v0 round trip on the listener. Blocking; one object per
process, not shared between threads.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from infra import process as proc
from infra.probes import free_port, kafka_ready

# The broker program; tests substitute a stand-in speaking the same command-line contract.
PIER_PROGRAM: tuple[str, ...] = (sys.executable, "-m", "pier")
# Unbuffered so the log file is current when a test failure attaches its tail.
_BROKER_ENV = {"PYTHONUNBUFFERED": "1"}


@dataclass
class BrokerProcess:
    """One running broker; `restart` keeps its node id, port, data dir and config."""

    node_id: int
    host: str
    port: int
    data_dir: Path
    metrics_port: int | None
    config: dict[str, str]
    process: subprocess.Popen[bytes]
    log_path: Path
    program: tuple[str, ...] = field(default=PIER_PROGRAM, repr=False)

    @property
    def bootstrap(self) -> str:
        """`host:port` for a client's `bootstrap.servers`."""
        return f"{self.host}:{self.port}"

    @property
    def config_path(self) -> Path:
        return broker_config_path(self.data_dir, self.node_id)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (controlled shutdown), wait, SIGKILL after `timeout`; return the exit status."""
        return proc.terminate(self.process, timeout)

    def kill(self) -> None:
        """SIGKILL and reap: an unclean shutdown, as after a power loss."""
        proc.kill(self.process)

    def restart(self, timeout: float = 30.0) -> None:
        """Stop if running, start again on the same port and data dir, wait until ready (one
        that does not get ready is killed before the error is raised, as in `start_broker`)."""
        self.stop()
        self.process = proc.spawn(self.argv(), self.log_path, _BROKER_ENV)
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.kill()
            raise

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Poll ApiVersions until answered; raise with the log tail if the broker exits or times out."""
        proc.wait_ready(
            self.process,
            lambda: kafka_ready(self.host, self.port),
            timeout=timeout,
            name=f"broker {self.node_id} on {self.bootstrap}",
            log_path=self.log_path,
        )

    def argv(self) -> list[str]:
        """The command line that starts this broker."""
        return broker_argv(
            self.program, self.data_dir, self.host, self.port, self.node_id, self.metrics_port
        )


def start_broker(
    data_dir: Path,
    *,
    port: int | None = None,
    host: str = "127.0.0.1",
    node_id: int = 0,
    config: Mapping[str, str] | None = None,
    metrics_port: int | None = None,
    zookeeper: str | None = None,
    wait: float = 30.0,
    program: Sequence[str] = PIER_PROGRAM,
) -> BrokerProcess:
    """Write the broker's properties, start it, and wait up to `wait` seconds until it answers.

    `wait=0` returns without probing. A broker that fails to become ready is killed before the error
    (which carries its log tail) is raised, so nothing is left running.
    """
    settings = dict(config or {})
    if zookeeper is not None:
        settings["zookeeper.connect"] = zookeeper
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    broker_config_path(data_dir, node_id).write_text(
        f"# written by infra.stack for broker {node_id}\n" + format_properties(settings)
    )
    port = port if port is not None else free_port(host)
    argv = broker_argv(program, data_dir, host, port, node_id, metrics_port)
    log_path = data_dir.parent / f"broker-{node_id}.log"
    broker = BrokerProcess(
        node_id=node_id,
        host=host,
        port=port,
        data_dir=data_dir,
        metrics_port=metrics_port,
        config=settings,
        process=proc.spawn(argv, log_path, _BROKER_ENV),
        log_path=log_path,
        program=tuple(program),
    )
    if wait > 0:
        try:
            broker.wait_ready(wait)
        except BaseException:
            broker.kill()
            raise
    return broker


def broker_argv(
    program: Sequence[str],
    data_dir: Path,
    host: str,
    port: int,
    node_id: int,
    metrics_port: int | None,
) -> list[str]:
    """`pier broker` arguments, per the CLI contract in `pier.cli`."""
    args = [*program, "broker", "--data-dir", str(data_dir), "--port", str(port), "--host", host]
    args += ["--node-id", str(node_id), "--config", str(broker_config_path(data_dir, node_id))]
    if metrics_port is not None:
        args += ["--metrics-port", str(metrics_port)]
    return args


def broker_config_path(data_dir: Path, node_id: int) -> Path:
    return data_dir.parent / f"broker-{node_id}.properties"


def format_properties(settings: Mapping[str, str]) -> str:
    """Java-properties text: one `key=value` per line, with the escapes `Properties.load` undoes."""
    return "".join(
        f"{_escape(key, is_key=True)}={_escape(value, is_key=False)}\n"
        for key, value in sorted(settings.items())
    )


def _escape(text: str, *, is_key: bool) -> str:
    escaped = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    escaped = escaped.replace("\t", "\\t").replace("\f", "\\f")
    if not is_key:
        # Leading blanks of a value are otherwise dropped by Properties.load.
        return "\\" + escaped if escaped.startswith(" ") else escaped
    escaped = escaped.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ")
    # A key starting with # or ! would turn the line into a comment.
    return "\\" + escaped if escaped[:1] in ("#", "!") else escaped
