"""A standalone ZooKeeper server from Debian's `zookeeper` package, for the local stack and tests.

Runs `java -cp <classpath> org.apache.zookeeper.server.ZooKeeperServerMain <data_dir>/zoo.cfg`
directly (not `zkServer.sh`, which daemonises and hides the PID). `zookeeper.jar`'s manifest
`Class-Path` already names its dependencies (jute, netty, jetty, slf4j-api) in /usr/share/java, so the
jar alone runs; `slf4j-simple` is added when present so the log file says something. The admin HTTP
server is off (it would take port 8080) and only harmless four-letter words are whitelisted.
Readiness is a real client session (kazoo), not `ruok`: ZooKeeper answers `imok` a moment before it
serves sessions (its log says "ZooKeeperServer not running"), and brokers started in that moment
would fail to register. `ruok` still goes first, as a cheap check that something listens.
Blocking; one object per process, not shared between threads.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from infra import process as proc
from infra.errors import LaunchError
from infra.probes import free_port, zookeeper_ready

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_BINDING = Path("/usr/share/java/slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
# Small heap and a quick JIT: ZooKeeper here holds a few hundred znodes and must start fast. An
# 8 MiB young generation: the default (a third of the heap) grew its resident memory ~5 MiB more
# while 10,000 partitions' znodes were created (issue 25's 3-node RSS row), for no throughput.
JVM_FLAGS: tuple[str, ...] = (
    "-Xms32m",
    "-Xmx256m",
    "-Xmn8m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
)
# kazoo logs each refused connection attempt as a warning; a probe expects refusals.
_QUIET = logging.getLogger("infra.zookeeper.probe")
_QUIET.setLevel(logging.CRITICAL + 1)


@dataclass
class ZooKeeperProcess:
    """One running standalone ZooKeeper server."""

    host: str
    port: int
    data_dir: Path
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def connect(self) -> str:
        """The connect string for kazoo or `zookeeper.connect`."""
        return f"{self.host}:{self.port}"

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM, wait (SIGKILL after `timeout`), return the exit status."""
        return proc.terminate(self.process, timeout)

    def kill(self) -> None:
        """SIGKILL and reap."""
        proc.kill(self.process)

    def wait_ready(self, timeout: float = 15.0) -> None:
        """Poll until ZooKeeper opens a session; raise with the log tail if it exits or times out."""
        proc.wait_ready(
            self.process,
            lambda: zookeeper_session_ready(self.host, self.port),
            timeout=timeout,
            name=f"ZooKeeper on {self.connect}",
            log_path=self.log_path,
        )


def zookeeper_session_ready(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when ZooKeeper on host:port answers `ruok` and then grants a kazoo session."""
    if not zookeeper_ready(host, port, timeout):
        return False
    client = KazooClient(hosts=f"{host}:{port}", timeout=timeout, logger=_QUIET)
    try:
        client.start(timeout)
        return True
    except KazooTimeoutError:
        return False
    finally:
        client.stop()
        client.close()


def zookeeper_classpath() -> str:
    """The Java classpath for the server; `PIER_ZOOKEEPER_CLASSPATH` overrides it."""
    override = os.environ.get("PIER_ZOOKEEPER_CLASSPATH")
    if override:
        return override
    if not ZOOKEEPER_JAR.is_file():
        raise LaunchError(
            f"{ZOOKEEPER_JAR} not found: install Debian's package (`infra/test` does)"
        )
    jars = [ZOOKEEPER_JAR, *([SLF4J_BINDING] if SLF4J_BINDING.is_file() else [])]
    return os.pathsep.join(str(jar) for jar in jars)


def start_zookeeper(
    data_dir: Path, *, port: int | None = None, host: str = "127.0.0.1", wait: float = 15.0
) -> ZooKeeperProcess:
    """Start ZooKeeper with its snapshots and `zoo.cfg` in `data_dir`; wait until it serves sessions.

    The config and the log (`zookeeper.log`) live inside `data_dir` beside ZooKeeper's `version-2/`.
    `wait=0` returns at once without probing. On a failed start the process is killed before raising.
    """
    java = shutil.which("java")
    if java is None:
        raise LaunchError("java not found: install default-jre-headless (`infra/test` does)")
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port if port is not None else free_port(host)
    config_path = data_dir / "zoo.cfg"
    config_path.write_text(_zoo_cfg(data_dir, host, port))
    log_path = data_dir / "zookeeper.log"
    argv = [java, *JVM_FLAGS, "-cp", zookeeper_classpath(), MAIN_CLASS, str(config_path)]
    server = ZooKeeperProcess(host, port, data_dir, proc.spawn(argv, log_path), log_path)
    if wait > 0:
        try:
            server.wait_ready(wait)
        except BaseException:
            server.kill()
            raise
    return server


def _zoo_cfg(data_dir: Path, host: str, port: int) -> str:
    settings = {
        # Sessions expire in tickTime buckets: 500 ms keeps a dead broker's expiry within half a
        # second of its session timeout (2000 ms added up to 2 s to every failover).
        "tickTime": "500",
        "minSessionTimeout": "1000",
        "maxSessionTimeout": "60000",  # 20 × tickTime would cap Kafka's 18 s default at 10 s
        "dataDir": str(data_dir.resolve()),
        "clientPort": str(port),
        "clientPortAddress": host,
        "maxClientCnxns": "0",
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "ruok,srvr,stat,mntr",
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())
