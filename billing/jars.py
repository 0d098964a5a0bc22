"""Where Spark's Kafka source lives on this machine: the jars `infra/spark_jars.py` fetched.

Owns: the cache directory of `spark-sql-kafka-0-10` (and the dependencies Spark's own jars lack:
`spark-token-provider-kafka-0-10`, `kafka-clients`, `commons-pool2`) for one Spark version,
`${PIER_SPARK_JARS:-${XDG_CACHE_HOME:-~/.cache}/pier/spark-kafka-<version>}`, and listing them for
the session's `spark.jars`. Nothing is downloaded here: a cache that is missing, or holds no
`.fetched` marker for this version, is `MissingJarsError` naming the install command. Pure
file-system reads; thread-safe.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

FETCH_COMMAND: Final = "python -m infra.spark_jars fetch"
MARKER: Final = ".fetched"
KAFKA_SOURCE: Final = "spark-sql-kafka-0-10_2.13"


class MissingJarsError(RuntimeError):
    """Spark's Kafka source is not installed for this Spark version; the message says how to."""


def spark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def jar_dir(version: str | None = None) -> Path:
    """The cache directory of the Kafka source's jars for Spark `version` (default: installed)."""
    override = os.environ.get("PIER_SPARK_JARS")
    if override:
        return Path(override)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "pier" / f"spark-kafka-{version or spark_version()}"


def kafka_jars(version: str | None = None) -> list[Path]:
    """The jar files to add to a session; MissingJarsError if they were never fetched."""
    version = version or spark_version()
    folder = jar_dir(version)
    marker = folder / MARKER
    if not marker.is_file() or marker.read_text().strip() != version:
        raise MissingJarsError(
            f"Spark's Kafka source ({KAFKA_SOURCE} {version}) is not installed in {folder}: "
            f"run `{FETCH_COMMAND}` (infra/test and infra/up do it; needs mvn)"
        )
    jars = sorted(folder.glob("*.jar"))
    if not any(j.name.startswith(KAFKA_SOURCE) for j in jars):
        raise MissingJarsError(f"{folder} lacks {KAFKA_SOURCE}: run `{FETCH_COMMAND}` again")
    return jars
