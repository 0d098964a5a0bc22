"""`python -m infra.spark_jars fetch` removes the usage scan jars of other sources once they are a
day old, and keeps a recent one (another checkout sharing the cache may still use it).

A real fetch into a cache of its own (`PIER_SPARK_JARS`): its Kafka jars are marked fetched (so
Maven is not asked), and the scan is really compiled with javac."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from billing.jars import MARKER, spark_version
from infra.spark_jars import STALE_SCAN_JAR_S

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def old_jar(scan: Path, digest: str, age_s: float) -> Path:
    jar = scan / f"pier-usage-scan-{digest}.jar"
    jar.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip
    stamp = time.time() - age_s
    os.utime(jar, (stamp, stamp))
    return jar


def fetch(cache: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "infra.spark_jars", "fetch"]
    env = {**os.environ, "PIER_SPARK_JARS": str(cache)}
    return subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_a_new_scan_jar_removes_the_stale_ones(tmp_path: Path) -> None:
    cache = tmp_path / "jars"
    scan = cache / "scan"
    scan.mkdir(parents=True)
    (cache / MARKER).write_text(spark_version() + "\n")
    stale = old_jar(scan, "0123456789abcdef", STALE_SCAN_JAR_S + 3600)
    recent = old_jar(scan, "fedcba9876543210", 600)
    other = scan / "notes.txt"
    other.write_text("not a scan jar")
    done = fetch(cache)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(cache)
    jars = sorted(p.name for p in scan.glob("*.jar"))
    assert stale.name not in jars, jars
    assert recent.name in jars and other.exists(), jars
    assert len(jars) == 2, jars  # the new one and the recent one
    assert f"removed {stale.name}" in done.stderr
    again = fetch(cache)
    assert again.returncode == 0 and "removed" not in again.stderr, again.stderr
    assert sorted(p.name for p in scan.glob("*.jar")) == jars
