"""Pure parts of billing's reading path: offset specs, finding Spark's Kafka source's jars, and
building and finding the usage scan's jar."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest

import tenancy.usage as usage
from billing.jars import FETCH_COMMAND, MARKER, MissingJarsError, kafka_jars
from billing.source import scan
from billing.source.offsets import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    SourceOptionError,
    offsets_to_json,
    parse_spec,
)
from billing.source.usage import COLUMNS
from infra.spark_jars import artifact_name

pytestmark = pytest.mark.unit


def test_offset_specs() -> None:
    assert parse_spec("s", None, EARLIEST) == OffsetSpec(EARLIEST)
    assert parse_spec("s", "Latest", EARLIEST) == OffsetSpec(LATEST)
    spec = parse_spec("s", '{"1": 5, "0": -2}', LATEST)
    assert spec.for_partition(0) == EARLIEST and spec.for_partition(1) == 5
    assert spec.for_partition(7) == LATEST
    for bad in ("[1]", '{"x": 1}', '{"0": -3}', '{"0": 1.5}', "soon"):
        with pytest.raises(SourceOptionError, match=r"^s: "):
            parse_spec("s", bad, LATEST)
    assert offsets_to_json({10: 1, 2: 3}) == '{"2":3,"10":1}'


def test_missing_jars_name_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIER_SPARK_JARS", str(tmp_path))
    with pytest.raises(MissingJarsError, match=FETCH_COMMAND.replace(".", r"\.")):
        kafka_jars("4.2.0")
    (tmp_path / MARKER).write_text("4.1.0\n")  # fetched for another Spark
    with pytest.raises(MissingJarsError, match=r"4\.2\.0"):
        kafka_jars("4.2.0")
    (tmp_path / MARKER).write_text("4.2.0\n")
    with pytest.raises(MissingJarsError, match="lacks spark-sql-kafka"):
        kafka_jars("4.2.0")
    for name in ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "kafka-clients-3.9.2.jar"):
        (tmp_path / name).write_bytes(b"")
    assert [j.name for j in kafka_jars("4.2.0")] == [
        "kafka-clients-3.9.2.jar",
        "spark-sql-kafka-0-10_2.13-4.2.0.jar",
    ]


def test_artifact_names_drop_the_version() -> None:
    assert artifact_name("kafka-clients-3.9.2.jar") == "kafka-clients"
    assert artifact_name("spark-sql-kafka-0-10_2.13-4.2.0.jar") == "spark-sql-kafka-0-10_2.13"
    assert artifact_name("scala-library-2.13.15.jar") == "scala-library"
    assert artifact_name("zstd-jni-1.5.7-7.jar") == "zstd-jni"


def test_the_usage_scan_is_built_once_per_source_and_found_or_named_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIER_SPARK_JARS", str(tmp_path))
    with pytest.raises(MissingJarsError, match=FETCH_COMMAND.replace(".", r"\.")):
        scan.scan_jar("4.2.0")
    built = scan.build("4.2.0")  # javac, as `python -m infra.spark_jars fetch` runs it
    assert scan.scan_jar("4.2.0") == built and built.parent == tmp_path / "scan"
    with zipfile.ZipFile(built) as jar:
        assert "dev/pier/billing/UsageScan.class" in jar.namelist()
    stamp = built.stat().st_mtime_ns
    assert scan.build("4.2.0") == built and built.stat().st_mtime_ns == stamp  # not rebuilt
    with pytest.raises(MissingJarsError):  # another Spark: another jar
        scan.scan_jar("4.1.0")
    assert list(tmp_path.glob("*.jar")) == []  # the Kafka source's listing never takes it


def test_the_usage_scan_keeps_the_contracts_constants_and_the_runs_columns() -> None:
    source = scan.SOURCE.read_text()
    constants = dict(re.findall(r"static final \w+ (\w+) = ([^;]+);", source))
    assert constants["VERSION"] == str(usage.VERSION)
    assert constants["MAX_RECORD_BYTES"] == str(usage.MAX_RECORD_BYTES)
    assert constants["MAX_NAME"] == str(usage.MAX_NAME)
    assert constants["HOUR_MS"] == f"{usage.HOUR_MS}L"
    assert list(scan.SCAN_FIELDS) == list(COLUMNS[2:-1])  # the fields the fast stage reads
