"""Fetching Spark's Kafka source for billing: `python -m infra.spark_jars fetch|dir`.

`fetch` resolves `org.apache.spark:spark-sql-kafka-0-10_2.13` at the installed PySpark's exact
version, with its runtime dependencies, from Maven Central (`mvn dependency:copy-dependencies`, as
`infra/reference/kafka` does for Kafka's tools) into the cache `billing.jars.jar_dir()` names,
keeping only the jars Spark's own `jars/` folder lacks (spark-sql-kafka, spark-token-provider-kafka,
kafka-clients, commons-pool2): two versions of one library on a classpath is a bug waiting. A no-op
once the cache holds a `.fetched` marker for this version; one fetch at a time (a lock file), into
a staging folder renamed when complete, so an interrupted fetch leaves nothing half-made. The
billing job never downloads: it reads the cache or fails naming this command. infra/test and
infra/up run it (infra/lib.sh `pier_spark_jars`). `fetch` then builds the usage scan's jar
(`billing.source.scan.build`: javac against PySpark's jars, into `scan/` of that cache, named by
the source's digest), so a changed `UsageScan.java` is compiled on the next fetch, and removes the
jars of other sources from `scan/` once a day has passed since they were built (`prune_scan_jars`:
another checkout sharing the cache — a `git worktree` of an older commit, a benchmark's "before"
side — may still use a recent one; one it lost is rebuilt by its own next fetch, and until then
the job fails naming this command). Blocking; run from the command line.
"""

from __future__ import annotations

import argparse
import fcntl
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from billing.jars import KAFKA_SOURCE, MARKER, jar_dir, spark_version
from billing.source import scan

_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.pier</groupId>
  <artifactId>pier-spark-kafka</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
  <build>
    <pluginManagement>
      <plugins>
        <plugin>
          <groupId>org.apache.maven.plugins</groupId>
          <artifactId>maven-dependency-plugin</artifactId>
          <version>3.8.1</version>
        </plugin>
      </plugins>
    </pluginManagement>
  </build>
</project>
"""
_VERSIONED = re.compile(r"(.+)-\d+\.\d+[\w.\-]*\.jar")
STALE_SCAN_JAR_S = 24 * 3600  # another source's scan jar older than this is removed


class FetchError(RuntimeError):
    pass


def artifact_name(jar: str) -> str:
    """`kafka-clients-3.9.2.jar` → `kafka-clients`."""
    match = _VERSIONED.fullmatch(jar)
    return match.group(1) if match else jar


def spark_jar_names() -> set[str]:
    import pyspark

    return {artifact_name(j.name) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}


def is_fetched(folder: Path, version: str) -> bool:
    marker = folder / MARKER
    return marker.is_file() and marker.read_text().strip() == version


def fetch(version: str | None = None) -> Path:
    version = version or spark_version()
    dest = jar_dir(version)
    if is_fetched(dest, version):
        return dest
    if shutil.which("mvn") is None:
        raise FetchError("mvn not found (apt-get install maven)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f"{dest.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a waiter finds the work done
        if is_fetched(dest, version):
            return dest
        staging = dest.parent / f"{dest.name}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        _copy_dependencies(version, staging)
        shipped = spark_jar_names()
        for jar in staging.glob("*.jar"):
            if artifact_name(jar.name) in shipped:
                jar.unlink()
        if not any(j.name.startswith(KAFKA_SOURCE) for j in staging.glob("*.jar")):
            raise FetchError(f"mvn resolved no {KAFKA_SOURCE} {version}")
        (staging / MARKER).write_text(version + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        staging.rename(dest)
    return dest


def prune_scan_jars(
    built: Path, *, now: float | None = None, stale_after_s: float = STALE_SCAN_JAR_S
) -> list[Path]:
    """Remove the usage scan jars beside `built` (`pier-usage-scan-<digest>.jar` of other sources)
    built more than `stale_after_s` ago; the ones removed (module doc)."""
    now = time.time() if now is None else now
    prefix = built.name.rsplit("-", 1)[0]  # pier-usage-scan
    removed = []
    for jar in built.parent.glob(f"{prefix}-*.jar"):
        try:
            if jar != built and now - jar.stat().st_mtime > stale_after_s:
                jar.unlink()
                removed.append(jar)
        except FileNotFoundError:
            continue  # another fetch removed it first
    return sorted(removed)


def _copy_dependencies(version: str, staging: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="pier-spark-jars-") as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(_POM.format(artifact=KAFKA_SOURCE, version=version))
        argv = ["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(pom),
                "dependency:copy-dependencies", "-DincludeScope=runtime",
                f"-DoutputDirectory={staging}"]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            errors = [line for line in done.stdout.splitlines() if "ERROR" in line][:3]
            raise FetchError(
                f"mvn could not resolve org.apache.spark:{KAFKA_SOURCE}:{version}: "
                + (" ".join(errors) or f"exit {done.returncode}")
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.spark_jars", description=__doc__)
    parser.add_argument("command", choices=("fetch", "dir"))
    args = parser.parse_args(argv)
    if args.command == "dir":
        print(jar_dir())
        return 0
    try:
        folder = fetch()
        built = scan.build()
    except (FetchError, scan.BuildError) as exc:
        print(f"infra/spark_jars: error: {exc}", file=sys.stderr)
        return 1
    for jar in prune_scan_jars(built):
        print(
            f"infra/spark_jars: removed {jar.name} (another source's usage scan)", file=sys.stderr
        )
    print(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
