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
whose earlier ids are in the database (`billing_record_ids`, read until they age out). Ids older
than `__usage`'s retention are deleted. The state directory must be shared by every process of a
run (a cluster's executors write it: use a shared file system) and kept like the database.
Driver side; the fence keeps concurrent runs from committing the same generation.
"""

from __future__ import annotations

import hashlib
import shutil
import uuid
from pathlib import Path
from typing import Final

from pyspark.sql import DataFrame, SparkSession

from billing.source.offsets import offsets_to_json

_GEN_WIDTH: Final = 12


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

    def counted(self, spark: SparkSession, hours: list[int]) -> DataFrame | None:
        """The ids committed runs counted for records of `hours` (None: there are none)."""
        wanted = {f"hour_ms={h}" for h in hours}
        paths = [
            str(hour)
            for gen in self.generations()
            for hour in gen.iterdir()
            if hour.name in wanted and any(hour.glob("*.parquet"))
        ]
        return spark.read.schema("id STRING").parquet(*paths) if paths else None

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
        for gen in generations[:-1]:
            if not any(gen.glob("hour_ms=*")):
                shutil.rmtree(gen, ignore_errors=True)

    def _attempts(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return [p for p in self.root.iterdir() if p.name.startswith(".attempt-")]


def _complete(attempt: Path) -> bool:
    return (attempt / "_SUCCESS").is_file()
