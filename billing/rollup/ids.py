"""The ids of counted usage records, kept in Parquet under the billing state directory.

Owns: the layout `<state>/<topic>/ids/gen=<generation>/hour_ms=<hour>/part-*.parquet` (one folder
per committed run, by the cursor generation it committed, split by the UTC hour of its records),
reading the ids of some hours back as a DataFrame (for the rollup's anti-join: no id ever goes
through the driver), and the two-step write that keeps the folders in step with the ledger:

1. before its commit a run writes its ids to `.attempt-<generation>-<end hash>-<uuid>` (Spark's
   writer ends with `_SUCCESS`);
2. after the commit it renames the attempt to `gen=<generation>` (one atomic rename).

A run killed between the commit and the rename leaves a complete attempt named after the generation
and end offsets the ledger now holds: the next run's `recover` renames it first. Two attempts with
the same name prefix read the same offset range against the same earlier ids, so they hold the same
ids and either will do. Attempts of generations the ledger has passed lost their fence or died
before committing: `recover` deletes them. A ledger ahead of a state directory that has folders but
not the committed one is a wrong `--state` (`StateError`); an empty one is a first run or a ledger
whose earlier ids are in the database (`billing_record_ids`, read until they age out).

So that de-duplication does not slow down as runs pile up (a stream commits every trigger
interval), `compact` merges each UTC hour that is over and is held by two or more folders into one
file under `merged=<uuid>/hour_ms=<hour>`: written to `.compact-<uuid>`, renamed into place, and
only then are the folders it merged deleted (a reader sees every id at every moment; a crash in
between leaves ids twice, which the anti-join does not mind, and the next compaction merges them).
Late usage for an hour already merged adds a folder that the next run merges again. Ids of hours
older than `__usage`'s retention (35 days: no copy of those records can still be read) are deleted
(`expire`). The state directory must be shared by every process of a
run (a cluster's executors write it: use a shared file system) and kept like the database.
Driver side; the fence keeps concurrent runs from committing the same generation.
"""

from __future__ import annotations

import hashlib
import shutil
import time
import uuid
from pathlib import Path
from typing import Final

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from billing.source.offsets import offsets_to_json
from tenancy.usage import HOUR_MS

_GEN_WIDTH: Final = 12
_STALE_S: Final = 3600  # a `.compact-*` folder this old belongs to a compaction that died


class StateError(RuntimeError):
    """The state directory does not match the ledger (the message says how)."""


def end_hash(end_offsets: dict[int, int]) -> str:
    return hashlib.sha256(offsets_to_json(end_offsets).encode()).hexdigest()[:16]


class IdStore:
    def __init__(self, state_dir: Path, topic: str) -> None:
        self.root = state_dir / topic / "ids"

    def generation_dir(self, generation: int) -> Path:
        return self.root / f"gen={generation:0{_GEN_WIDTH}d}"

    def generations(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if p.name.startswith("gen="))

    def recover(self, generation: int, end_offsets: dict[int, int]) -> None:
        """Promote the committed generation's attempt if its rename was lost; drop dead attempts.
        StateError if the folder lacks a committed generation it should hold."""
        if generation > 0 and not self.generation_dir(generation).is_dir():
            prefix = f".attempt-{generation:0{_GEN_WIDTH}d}-{end_hash(end_offsets)}-"
            done = [p for p in self._attempts() if p.name.startswith(prefix) and _complete(p)]
            if done:
                self.promote(done[0], generation)
            elif self.generations():
                raise StateError(
                    f"{self.root} holds no ids of committed run generation {generation}: "
                    "is --state the directory the earlier runs used?"
                )
        for attempt in self._attempts():
            if int(attempt.name.split("-")[1]) <= generation:
                shutil.rmtree(attempt, ignore_errors=True)

    def merged(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if p.name.startswith("merged="))

    def hour_dirs(self) -> list[Path]:
        """Every `hour_ms=*` folder holding ids, merged or not."""
        return [
            hour
            for folder in (*self.generations(), *self.merged())
            for hour in folder.glob("hour_ms=*")
            if any(hour.glob("*.parquet"))
        ]

    def counted(self, spark: SparkSession, hours: list[int]) -> DataFrame | None:
        """The ids committed runs counted for records of `hours` (None: there are none)."""
        wanted = {f"hour_ms={h}" for h in hours}
        paths = [str(hour) for hour in self.hour_dirs() if hour.name in wanted]
        return spark.read.schema("id STRING").parquet(*paths) if paths else None

    def compact(self, spark: SparkSession, now_ms: int) -> list[int]:
        """Merge each hour over by `now_ms` that two or more folders hold into one file; returns
        the hours merged. Call after a commit (one run at a time: the fence's winner)."""
        self._drop_stale_compactions()
        by_hour: dict[int, list[Path]] = {}
        for hour in self.hour_dirs():
            start = int(hour.name.split("=", 1)[1])
            if start + HOUR_MS <= now_ms:
                by_hour.setdefault(start, []).append(hour)
        sources = {h: dirs for h, dirs in by_hour.items() if len(dirs) > 1}
        if not sources:
            return []
        name = uuid.uuid4().hex
        staging = self.root / f".compact-{name}"
        paths = [str(d) for dirs in sources.values() for d in dirs]
        ids = spark.read.schema("id STRING").parquet(*paths)
        of_file = F.regexp_extract(F.col("_metadata.file_path"), r"/hour_ms=(-?[0-9]+)/", 1)
        with_hour = ids.select("id", of_file.cast("bigint").alias("hour_ms"))
        with_hour.repartition("hour_ms").write.partitionBy("hour_ms").parquet(str(staging))
        staging.rename(self.root / f"merged={name}")
        for dirs in sources.values():
            for folder in dirs:
                shutil.rmtree(folder, ignore_errors=True)
        self._drop_empty_merged()
        return sorted(sources)

    def new_attempt(self, generation: int, end_offsets: dict[int, int]) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        name = f".attempt-{generation:0{_GEN_WIDTH}d}-{end_hash(end_offsets)}-{uuid.uuid4().hex}"
        return self.root / name

    @staticmethod
    def write(ids: DataFrame, attempt: Path) -> None:
        """`ids` (columns id, hour_ms) into the attempt folder, by hour."""
        ids.write.partitionBy("hour_ms").mode("errorifexists").parquet(str(attempt))

    def promote(self, attempt: Path, generation: int) -> None:
        target = self.generation_dir(generation)
        try:
            attempt.rename(target)
        except OSError:  # an equivalent attempt got there first
            if not target.is_dir():
                raise
            shutil.rmtree(attempt, ignore_errors=True)

    @staticmethod
    def discard(attempt: Path) -> None:
        shutil.rmtree(attempt, ignore_errors=True)

    def expire(self, horizon_ms: int) -> None:
        """Delete the ids of hours before `horizon_ms`, and generation folders left empty (but
        the newest, which `recover` looks for)."""
        generations = self.generations()
        for gen in generations:
            for hour in gen.glob("hour_ms=*"):
                if int(hour.name.split("=", 1)[1]) < horizon_ms:
                    shutil.rmtree(hour, ignore_errors=True)
        for folder in self.merged():
            for hour in folder.glob("hour_ms=*"):
                if int(hour.name.split("=", 1)[1]) < horizon_ms:
                    shutil.rmtree(hour, ignore_errors=True)
        for gen in generations[:-1]:
            if not any(gen.glob("hour_ms=*")):
                shutil.rmtree(gen, ignore_errors=True)
        self._drop_empty_merged()

    def _drop_empty_merged(self) -> None:
        for folder in self.merged():
            if not any(folder.glob("hour_ms=*")):
                shutil.rmtree(folder, ignore_errors=True)

    def _drop_stale_compactions(self) -> None:
        if not self.root.is_dir():
            return
        for folder in self.root.glob(".compact-*"):
            if time.time() - folder.stat().st_mtime > _STALE_S:
                shutil.rmtree(folder, ignore_errors=True)

    def _attempts(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return [p for p in self.root.iterdir() if p.name.startswith(".attempt-")]


def _complete(attempt: Path) -> bool:
    return (attempt / "_SUCCESS").is_file()
