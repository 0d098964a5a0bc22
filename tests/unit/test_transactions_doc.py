"""docs/transactions.md describes transactions as built: every repository path it names exists,
every broker setting in its table is read by the coordinator with the default the page states,
the commands it documents are the ones `pier transactions` has, and the README links it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from brokers.coordinator.transactions.config import TransactionConfig
from pier.transactions import COMMANDS

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "transactions.md"
PATH = re.compile(r"`((?:brokers|gateway|pier|infra|tests|docs)/[a-z_./]+)`")
SETTING = re.compile(r"^\| `(transaction[a-z.]+)` \| (\d+)", re.MULTILINE)


def test_every_path_named_exists() -> None:
    paths = PATH.findall(PAGE.read_text())
    assert len(paths) > 10, f"only {len(paths)} paths found: the pattern no longer matches"
    missing = [p for p in paths if not (REPO / p).exists()]
    assert not missing, f"docs/transactions.md names paths that do not exist: {missing}"


def test_settings_table_states_the_coordinators_defaults() -> None:
    settings = SETTING.findall(PAGE.read_text())
    assert len(settings) >= 8, settings
    defaults = TransactionConfig.from_properties({})
    for name, default in settings:
        assert TransactionConfig.from_properties({name: default}) == defaults, name
        changed = TransactionConfig.from_properties({name: str(int(default) + 1)})
        assert changed != defaults, f"{name} is not read by the coordinator"


def test_documented_commands_are_the_clis() -> None:
    documented = set(re.findall(r"pier transactions --bootstrap-server HOST:PORT ([a-z-]+)",
                                PAGE.read_text()))  # fmt: skip
    assert documented == set(COMMANDS)


def test_readme_links_the_page() -> None:
    assert "(docs/transactions.md)" in (REPO / "README.md").read_text()
