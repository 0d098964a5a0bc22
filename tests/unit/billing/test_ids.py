"""The counted-ids folders kept in step with the ledger (`billing.rollup.ids`), on the file system
alone: which attempt `recover` names after a lost rename, what it deletes, what it refuses, and
what `expire` keeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from billing.rollup.ids import IdStore, StateError

pytestmark = pytest.mark.unit
END = {0: 10, 1: 4}


def _attempt(store: IdStore, generation: int, end: dict[int, int], *, complete: bool) -> Path:
    attempt = store.new_attempt(generation, end)
    (attempt / "hour_ms=3600000").mkdir(parents=True)
    (attempt / "hour_ms=3600000" / "part-0.parquet").write_bytes(b"")
    if complete:
        (attempt / "_SUCCESS").write_bytes(b"")
    return attempt


def test_recover_names_the_committed_attempt_and_drops_dead_ones(tmp_path: Path) -> None:
    store = IdStore(tmp_path, "__usage")
    store.promote(_attempt(store, 1, {0: 5}, complete=True), 1)
    half = _attempt(store, 2, END, complete=False)  # killed while writing
    other = _attempt(store, 2, {0: 9, 1: 4}, complete=True)  # lost the fence
    done = _attempt(store, 2, END, complete=True)  # committed, then killed before the rename
    ahead = _attempt(store, 3, {0: 12, 1: 4}, complete=False)  # a run under way now
    store.recover(2, END)
    assert [p.name for p in store.generations()] == ["gen=000000000001", "gen=000000000002"]
    assert (store.generation_dir(2) / "_SUCCESS").is_file()
    assert not half.exists() and not other.exists() and not done.exists()
    assert ahead.exists()
    store.recover(2, END)  # nothing left to do
    assert ahead.exists()


def test_a_state_folder_without_the_committed_generation_is_refused(tmp_path: Path) -> None:
    store = IdStore(tmp_path, "__usage")
    store.recover(7, END)  # empty: a first run, or ids still in the database
    store.promote(_attempt(store, 1, END, complete=True), 1)
    with pytest.raises(StateError, match="no ids of committed run generation 7"):
        store.recover(7, END)


def test_expire_drops_old_hours_and_emptied_generations_but_the_newest(tmp_path: Path) -> None:
    store = IdStore(tmp_path, "__usage")
    for generation in (1, 2):
        store.promote(_attempt(store, generation, END, complete=True), generation)
    (store.generation_dir(2) / "hour_ms=7200000").mkdir()
    store.expire(5_000_000)
    assert not store.generation_dir(1).exists()
    assert [p.name for p in store.generation_dir(2).glob("hour_ms=*")] == ["hour_ms=7200000"]
    store.expire(9_000_000)
    assert store.generation_dir(2).is_dir()  # the newest stays: `recover` looks for it
