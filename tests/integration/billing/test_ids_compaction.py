"""Compaction of the counted-ids folders (`IdStore.compact`) with a real Spark session: an hour
that is over and held by several run folders becomes one file holding the same ids, the open hour
is left alone, a reader sees every id throughout, and `expire` drops merged hours past retention."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from billing.rollup.ids import IdStore
from tenancy.usage import HOUR_MS

pytestmark = pytest.mark.integration
H1, H2 = 100 * HOUR_MS, 101 * HOUR_MS  # H1 is over at `NOW`, H2 is not
NOW = H2 + HOUR_MS // 2


def _commit(spark: Any, store: IdStore, generation: int, ids: list[tuple[str, int]]) -> None:
    attempt = store.new_attempt(generation, {0: generation})
    store.write(spark.createDataFrame(ids, "id STRING, hour_ms BIGINT"), attempt)
    store.promote(attempt, generation)


def _ids(spark: Any, store: IdStore, hour: int) -> list[str]:
    frame = store.counted(spark, [hour])
    return sorted(r.id for r in frame.collect()) if frame is not None else []


def _parquet_files(folders: list[Path]) -> list[Path]:
    return [f for folder in folders for f in folder.glob("*.parquet")]


def test_a_closed_hour_is_merged_into_one_file_with_the_same_ids(
    spark: Any, tmp_path: Path
) -> None:
    store = IdStore(tmp_path, "__usage")
    for generation in (1, 2, 3):
        _commit(spark, store, generation, [(f"g{generation}-{i}", H1) for i in range(5)]
                + [(f"g{generation}-open", H2)])  # fmt: skip
    _commit(spark, store, 4, [("g1-0", H1)])  # a replayed id counted twice stays one id set
    before = _ids(spark, store, H1)
    assert len([d for d in store.hour_dirs() if d.name == f"hour_ms={H1}"]) == 4

    assert store.compact(spark, NOW) == [H1]

    held = [d for d in store.hour_dirs() if d.name == f"hour_ms={H1}"]
    assert len(held) == 1 and held[0].parent.name.startswith("merged=")
    assert len(_parquet_files(held)) == 1
    assert _ids(spark, store, H1) == before  # nothing lost (g1-0 may be held twice)
    open_hour = [d for d in store.hour_dirs() if d.name == f"hour_ms={H2}"]
    assert len(open_hour) == 3  # the hour under way is not merged
    assert store.generation_dir(4).is_dir()  # `recover` still finds the committed generation
    assert store.compact(spark, NOW) == []  # nothing left to merge

    _commit(spark, store, 5, [("late-1", H1)])  # late usage for the merged hour
    assert store.compact(spark, NOW) == [H1]
    assert _ids(spark, store, H1) == sorted([*before, "late-1"])
    assert len(store.merged()) == 1

    store.expire(H2)  # H1 is past retention
    assert store.merged() == [] and _ids(spark, store, H1) == []
    assert len(_ids(spark, store, H2)) == 3
