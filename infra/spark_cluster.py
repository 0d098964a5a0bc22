"""A Spark standalone cluster (one master, one or more workers) from the pyspark package, for
tests, the billing benchmark and local trials of `pier billing run --master spark://...`.

The pip package has no `sbin/start-master.sh`, so both daemons run through `bin/spark-class`
(which execs the JVM: the PID we hold is the daemon's), on 127.0.0.1 with free ports and no web
UI, logs and work dirs under one folder. Ready when the master prints its URL and the worker says
it registered. Stopped by PID (worker first). Spawn from a long-lived thread (see infra.process).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from infra.probes import free_port
from infra.process import spawn, terminate, wait_ready


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class SparkCluster:
    master_url: str
    master: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes]  # the first worker
    folder: Path
    more_workers: tuple[subprocess.Popen[bytes], ...] = ()

    def all_workers(self) -> tuple[subprocess.Popen[bytes], ...]:
        return (self.worker, *self.more_workers)

    def stop(self) -> None:
        for worker in (*self.more_workers, self.worker):
            terminate(worker, 20)
        terminate(self.master, 20)


def start_spark_cluster(
    folder: Path, *, cores: int = 2, memory: str = "1g", workers: int = 1
) -> SparkCluster:
    """A master and `workers` workers of `cores` cores and `memory` each."""
    folder.mkdir(parents=True, exist_ok=True)
    home = spark_home()
    env = {
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(folder),
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", _python()),
    }
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    master_log = folder / "master.log"
    master = spawn(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(port), "--webui-port", "0"],
        master_log, env,
    )  # fmt: skip
    wait_ready(master, lambda: _says(master_log, "Starting Spark master"), timeout=60,
               name="spark master", log_path=master_log)  # fmt: skip
    started: list[subprocess.Popen[bytes]] = []
    try:
        for number in range(workers):
            started.append(_start_worker(spark_class, url, folder, number, cores, memory, env))
    except Exception:
        for worker in started:
            terminate(worker, 20)
        terminate(master, 20)
        raise
    return SparkCluster(url, master, started[0], folder, tuple(started[1:]))


def _start_worker(
    spark_class: str, url: str, folder: Path, number: int, cores: int, memory: str,
    env: dict[str, str],
) -> subprocess.Popen[bytes]:  # fmt: skip
    """One worker daemon registered with the master at `url` (its own log and work dir)."""
    name = "worker" if number == 0 else f"worker-{number}"
    worker_log = folder / f"{name}.log"
    worker = spawn(
        [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
         "--cores", str(cores), "--memory", memory, "--webui-port", "0",
         "--work-dir", str(folder / f"{name}-work" if number else folder / "work")],
        worker_log, env,
    )  # fmt: skip
    try:
        wait_ready(worker, lambda: _says(worker_log, "Successfully registered with master"),
                   timeout=60, name=f"spark {name}", log_path=worker_log)  # fmt: skip
    except Exception:
        terminate(worker, 20)
        raise
    return worker


def _says(log: Path, text: str) -> bool:
    return log.exists() and text in log.read_text(errors="replace")


def _python() -> str:
    import sys

    return sys.executable
