"""A Spark standalone cluster (one master, one worker) from the pyspark package, for tests, the
billing benchmark and local trials of `pier billing run --master spark://...`.

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
    worker: subprocess.Popen[bytes]
    folder: Path

    def stop(self) -> None:
        terminate(self.worker, 20)
        terminate(self.master, 20)


def start_spark_cluster(folder: Path, *, cores: int = 2, memory: str = "1g") -> SparkCluster:
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
    worker_log = folder / "worker.log"
    worker = spawn(
        [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
         "--cores", str(cores), "--memory", memory, "--webui-port", "0",
         "--work-dir", str(folder / "work")],
        worker_log, env,
    )  # fmt: skip
    try:
        wait_ready(worker, lambda: _says(worker_log, "Successfully registered with master"),
                   timeout=60, name="spark worker", log_path=worker_log)  # fmt: skip
    except Exception:
        terminate(worker, 20)
        terminate(master, 20)
        raise
    return SparkCluster(url, master, worker, folder)


def _says(log: Path, text: str) -> bool:
    return log.exists() and text in log.read_text(errors="replace")


def _python() -> str:
    import sys

    return sys.executable
