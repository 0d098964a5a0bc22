"""docs/design.md describes the code as built: every repository path it names exists, and the
README links it. A move that forgets the design page fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
DESIGN = REPO / "docs" / "design.md"
TOP_LEVEL = ("brokers/", "gateway/", "tenancy/", "billing/", "infra/", "pier/", "tests/", "docs/")
PATH = re.compile(r"`([a-z_./]+(?:/|\.py|\.toml|\.mmd|\.md))`")


def named_paths(text: str) -> list[str]:
    return [p for p in PATH.findall(text) if p.startswith(TOP_LEVEL) or p == "pyproject.toml"]


def test_every_path_named_in_the_design_exists() -> None:
    paths = named_paths(DESIGN.read_text())
    assert len(paths) > 40, f"only {len(paths)} paths found: the pattern no longer matches the page"
    missing = [p for p in paths if not (REPO / p).exists()]
    assert not missing, f"docs/design.md names paths that do not exist: {missing}"


def test_relative_links_resolve() -> None:
    links = re.findall(r"\]\(([^)#:]+)\)", DESIGN.read_text())
    missing = [link for link in links if not (DESIGN.parent / link).exists()]
    assert not missing, f"broken links in docs/design.md: {missing}"


def test_readme_links_the_design() -> None:
    assert "docs/design.md" in (REPO / "README.md").read_text()
