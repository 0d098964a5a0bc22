"""The usage check's fast path as a small Java UDF (`UsageScan.java` beside this file).

Owns: building the UDF's jar (javac against PySpark's own jars, `--release 17`, into a jar named
by the digest of the source and the Spark version, under the Kafka source's cache
`billing.jars.jar_dir()`, in `scan/`), finding it (`scan_jar`: `MissingJarsError` naming the
install command when it was never built, as for the Kafka source's jars: the job never compiles at
run time), and registering it in a session as `pier_usage_scan(key, value)`, whose struct
(`SCAN_SCHEMA`) holds a canonical record's fields, or null for any other record.

Why Java: `from_json` reads each value through a new `InputStreamReader` with an 8 KB buffer
(Spark's `CreateJacksonParser.utf8String`), and the canonical form was proven by a regular
expression over the whole value before that; the scan does both in one pass over the bytes,
allocating only the fields' strings (docs/billing.md, "Speed", has the measurements). `build` is
blocking and run by `python -m infra.spark_jars fetch`; the rest is driver side.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Final

from billing.jars import FETCH_COMMAND, MissingJarsError, jar_dir, spark_version

SOURCE: Final = Path(__file__).with_name("UsageScan.java")
CLASS_NAME: Final = "dev.pier.billing.UsageScan"
FUNCTION: Final = "pier_usage_scan"
SCAN_FIELDS: Final = (
    ("id", "STRING"), ("kind", "STRING"), ("tenant", "STRING"), ("principal", "STRING"),
    ("client_id", "STRING"), ("topic", "STRING"), ("start_ms", "BIGINT"), ("end_ms", "BIGINT"),
    ("bytes_in", "BIGINT"), ("bytes_out", "BIGINT"), ("requests", "BIGINT"),
    ("throttle_ms", "BIGINT"), ("connection_ms", "BIGINT"), ("partition", "INT"),
    ("bytes", "BIGINT"), ("at_ms", "BIGINT"),
)  # fmt: skip
SCAN_SCHEMA: Final = "struct<" + ", ".join(f"{n}: {t}" for n, t in SCAN_FIELDS) + ">"


class BuildError(RuntimeError):
    """javac failed or is missing; the message says which."""


def scan_jar(version: str | None = None) -> Path:
    """The built jar of this source for Spark `version`; MissingJarsError if it was not built."""
    path = _jar_path(version or spark_version())
    if not path.is_file():
        raise MissingJarsError(
            f"the billing usage scan ({path.name}) is not built in {path.parent}: "
            f"run `{FETCH_COMMAND}` (infra/test and infra/up do it; needs javac)"
        )
    return path


def build(version: str | None = None) -> Path:
    """Compile `UsageScan.java` into its jar unless it is there; its path. Safe to run twice at
    once: each compiles into a folder of its own and renames a complete jar into place."""
    version = version or spark_version()
    path = _jar_path(version)
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pier-scan-", dir=path.parent) as tmp:
        classes = Path(tmp) / "classes"
        command = [
            "javac", "--release", "17", "-nowarn", "-d", str(classes),
            "-cp", str(_pyspark_jars() / "*"), str(SOURCE),
        ]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise BuildError(
                "javac not found: install a JDK 17 (infra/test does as root)"
            ) from None
        if done.returncode != 0:
            raise BuildError(f"javac failed on {SOURCE}: {done.stderr.strip()[-2000:]}")
        staged = Path(tmp) / path.name
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
            for item in sorted(classes.rglob("*.class")):
                jar.write(item, item.relative_to(classes).as_posix())
        os.replace(staged, path)
    return path


def register(spark: Any) -> None:
    """Make `pier_usage_scan` callable in `spark`'s SQL (its jar must be on the classpath:
    `billing.spark.spark_session` puts it there; spark-submit needs it in `--jars`)."""
    try:
        spark.udf.registerJavaFunction(FUNCTION, CLASS_NAME, SCAN_SCHEMA)
    except Exception as error:  # Py4J / AnalysisException: the class is not on the classpath
        raise MissingJarsError(
            f"{CLASS_NAME} is not on this Spark session's classpath (add {_jar_path(spark_version())}"
            f" to spark.jars or spark-submit --jars; build it with `{FETCH_COMMAND}`): "
            f"{str(error).splitlines()[0] if str(error) else type(error).__name__}"
        ) from None


def _jar_path(version: str) -> Path:
    digest = hashlib.sha256(SOURCE.read_bytes() + version.encode()).hexdigest()[:16]
    return jar_dir(version) / "scan" / f"pier-usage-scan-{digest}.jar"


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"
