"""Starting the Spark session the billing job runs in, on `local[N]` or a cluster master URL.

Owns: the session settings the job relies on (few shuffle partitions, a core's worth on
`local[N]`: rollups are small; no UI;
UTC session time zone so hours are UTC hours; a 4 GiB driver heap, `PIER_SPARK_DRIVER_MEMORY`;
the JVM options of `JAVA_OPTIONS`, `PIER_SPARK_JAVA_OPTIONS`; Spark's Kafka source and the usage scan
(`billing.source.scan`) on `spark.jars`, from the cache `billing.jars` names: a cluster's
executors get the jars from the driver). PySpark needs
`SPARK_LOCAL_IP` and `PYSPARK_PYTHON` (infra/deploy/billing.md): unset ones default to 127.0.0.1
(local masters only) and this interpreter. One session per process; call from the main thread.
"""

from __future__ import annotations

import os
import sys
from typing import Any

DEFAULT_MASTER = "local[2]"
EXISTING = "existing"  # keep the master spark-submit (or spark-defaults.conf) set
DRIVER_MEMORY = (
    "4g"  # the heap's ceiling (on local[N] the executors' too): 1g spills a 1 M-record run
)


CLUSTER_SHUFFLE_PARTITIONS = 4
# The driver's and executors' JVM options (`PIER_SPARK_JAVA_OPTIONS` replaces them): the
# throughput collector (G1's concurrent threads took CPU the two cores of `local[2]` lack), and
# the JIT's top tier kept for methods called four times as often as its default (a run compiles
# tens of thousands of methods, most of Spark's generated code run a few thousand times: the
# compiler threads took a quarter of a 10 M-record run's CPU). docs/billing.md, "Speed".
JAVA_OPTIONS = (
    "-XX:+UseParallelGC -XX:Tier4InvocationThreshold=20000 -XX:Tier4CompileThreshold=40000"
    " -XX:Tier4MinInvocationThreshold=2000"
)


def local_cores(master: str) -> int | None:
    """The worker threads of a `local`, `local[N]` or `local[*]` master (None: not local)."""
    if master == "local":
        return 1
    if not (master.startswith("local[") and master.endswith("]")):
        return None
    inside = master[len("local[") : -1].split(",", maxsplit=1)[0]
    if inside == "*":
        return os.cpu_count() or 1
    return int(inside) if inside.isdigit() and int(inside) > 0 else None


def spark_session(
    master: str = DEFAULT_MASTER,
    *,
    app_name: str = "pier-billing",
    shuffle_partitions: int | None = None,
) -> Any:
    """A (possibly existing) SparkSession on `master` with Spark's Kafka source on its classpath;
    `master="existing"` leaves the master to spark-submit (which must pass the same jars with
    `--jars` when its session starts first). MissingJarsError if the jars were never fetched.
    `shuffle_partitions` defaults to the cores of a `local[N]` master (a task per core: the
    shuffles are of ids and sums, small), else `CLUSTER_SHUFFLE_PARTITIONS`."""
    shuffle_partitions = shuffle_partitions or local_cores(master) or CLUSTER_SHUFFLE_PARTITIONS
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from billing.jars import kafka_jars
    from billing.source.scan import scan_jar

    jars = ",".join(str(j) for j in (*kafka_jars(), scan_jar()))
    builder = SparkSession.builder
    if master != EXISTING:  # spark-submit sets its own memory
        memory = os.environ.get("PIER_SPARK_DRIVER_MEMORY", DRIVER_MEMORY)
        java = os.environ.get("PIER_SPARK_JAVA_OPTIONS", JAVA_OPTIONS)
        builder = (
            builder.master(master)
            .config("spark.driver.memory", memory)
            .config("spark.driver.extraJavaOptions", java)
            .config("spark.executor.extraJavaOptions", java)
        )
    if "SPARK_LOCAL_IP" in os.environ:  # else Spark picks this host's address (a real cluster)
        builder = builder.config("spark.driver.host", os.environ["SPARK_LOCAL_IP"])
    spark = (
        builder.appName(app_name)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # no progress bars in logs
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.jars", jars)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
