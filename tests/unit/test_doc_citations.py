"""The project cites only its own documents (issue 22): no file in the repository points a reader
at the starting design's two documents (`FOREIGN` below), which are not part of the repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
FOREIGN = ("DESIGN" + ".md", "gateway-apis" + ".md")  # spelled apart: this file cites neither


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60
    ).stdout.decode()
    return [REPO / name for name in listed.split("\0") if name]


def test_no_file_cites_a_document_outside_the_repository() -> None:
    citing = {}
    for path in tracked_text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary (screenshots) or removed in the work tree
        found = [name for name in FOREIGN if name in text]
        if found:
            citing[str(path.relative_to(REPO))] = found
    assert citing == {}
