"""The billing session's JVM runs with `billing.spark.JAVA_OPTIONS` (the throughput collector and
the JIT's raised top-tier thresholds): read back from the started JVM itself."""

from __future__ import annotations

from typing import Any

import pytest

from billing.spark import JAVA_OPTIONS

pytestmark = pytest.mark.integration


def test_the_session_jvm_has_the_java_options(spark: Any) -> None:
    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    arguments = set(management.getRuntimeMXBean().getInputArguments())
    assert set(JAVA_OPTIONS.split()) <= arguments
    collectors = {bean.getName() for bean in management.getGarbageCollectorMXBeans()}
    assert "PS Scavenge" in collectors, collectors  # the parallel (throughput) collector
    executor = spark.sparkContext.getConf().get("spark.executor.extraJavaOptions")
    assert executor.endswith(JAVA_OPTIONS)  # a cluster's executors get the same (after Spark's own)


def test_a_run_caches_uncompressed_only_what_fits_the_heap(spark: Any) -> None:
    from billing.rollup.job import _COMPRESSED, _cache_compression

    spark.conf.set(_COMPRESSED, "true")
    try:
        assert _cache_compression(spark, {0: 5}, {0: 10, 1: 3}) == "true"
        assert spark.conf.get(_COMPRESSED) == "false"  # 8 records: uncompressed
        spark.conf.set(_COMPRESSED, "true")
        assert _cache_compression(spark, {0: 0}, {0: 10**12}) == "true"
        assert spark.conf.get(_COMPRESSED) == "true"  # far over the heap: compressed
        assert _cache_compression(spark, {0: 0}, None) == "true"  # unknown size: as it was
        assert spark.conf.get(_COMPRESSED) == "true"
    finally:
        spark.conf.unset(_COMPRESSED)
