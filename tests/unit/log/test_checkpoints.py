from __future__ import annotations

from pathlib import Path

import pytest

from brokers.log.checkpoints import (
    LEADER_EPOCH_FORMAT,
    CheckpointFile,
    read_offsets,
    write_offsets,
)
from brokers.log.errors import CorruptCheckpointError

pytestmark = pytest.mark.unit


def test_offsets_round_trip_in_kafkas_text_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    offsets = {("orders", 1): 977, ("orders", 0): 1042, ("__consumer_offsets", 12): 0}
    write_offsets(path, offsets)
    assert path.read_text() == "0\n3\n__consumer_offsets 12 0\norders 0 1042\norders 1 977\n"
    assert read_offsets(path) == offsets
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_reads_a_file_written_by_kafka(tmp_path: Path) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_text("0\n2\nmy-topic 3 15\nother.topic 0 0\n")
    assert read_offsets(path) == {("my-topic", 3): 15, ("other.topic", 0): 0}


def test_missing_file_is_empty_and_empty_map_writes_header(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    assert read_offsets(path) == {}
    write_offsets(path, {})
    assert path.read_text() == "0\n0\n"
    assert read_offsets(path) == {}


@pytest.mark.parametrize(
    "content",
    ["1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt 0\n", "0\n1\nt x 1\n", "0\n", "0\nx\n"],
)
def test_corrupt_checkpoints_are_rejected(tmp_path: Path, content: str) -> None:
    path = tmp_path / "cp"
    path.write_text(content)
    with pytest.raises(CorruptCheckpointError):
        read_offsets(path)


def test_leader_epoch_flavour(tmp_path: Path) -> None:
    checkpoint = CheckpointFile(tmp_path / "leader-epoch-checkpoint", LEADER_EPOCH_FORMAT)
    checkpoint.write([(0, 0), (3, 120)])
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 120\n"
    assert checkpoint.read() == [(0, 0), (3, 120)]
