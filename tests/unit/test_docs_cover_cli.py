"""The docs keep up with the commands (issue 22): every `pier` command is shown in the README or
a docs page, every `pier admin` resource is listed with all its verbs in docs/admin-api.md, and
every `infra/up` option is named in docs/cluster.md. The argparse trees are the truth (their
`--help` is held complete by test_cli_help.py); a command or option added without a word in the
docs fails here."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from infra import up_main
from pier import cli

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def all_docs() -> str:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)


def test_every_pier_command_is_shown_in_the_docs() -> None:
    docs = all_docs()
    missing = [name for name in subcommands(cli._parser()) if f"pier {name} " not in docs]
    assert missing == []


def test_admin_api_page_lists_every_resource_and_verb() -> None:
    page = (REPO / "docs" / "admin-api.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"`([a-z-]+)` \(([a-z, ]+)[;)]", page))
    admin = subcommands(cli._parser())["admin"]
    expected = {name: set(subcommands(sub)) for name, sub in subcommands(admin).items()}
    found = {name: set(listed.get(name, "").replace(" ", "").split(",")) for name in expected}
    assert found == expected


def test_cluster_page_names_every_infra_up_option() -> None:
    page = (REPO / "docs" / "cluster.md").read_text(encoding="utf-8")
    options = [
        flag
        for action in up_main.build_parser()._actions
        for flag in action.option_strings
        if flag.startswith("--") and flag != "--help"
    ]
    assert [flag for flag in options if f"`{flag}" not in page] == []


def test_gateway_page_names_every_option_and_setting() -> None:
    """`pier gateway`'s options in docs/gateway-options.md; each `--config` setting there or in
    the page that explains its limit (security.md, gateway-http.md)."""
    from gateway import config

    options_page = (REPO / "docs" / "gateway-options.md").read_text(encoding="utf-8")
    gateway = subcommands(cli._parser())["gateway"]
    flags = [f for a in gateway._actions for f in a.option_strings if f.startswith("--")]
    assert [f for f in flags if f != "--help" and f"`{f}`" not in options_page] == []
    pages = options_page + "".join(
        (REPO / "docs" / name).read_text(encoding="utf-8")
        for name in ("security.md", "gateway-http.md")
    )
    settings = sorted(config._KNOWN)
    assert [name for name in settings if f"`{name}`" not in pages] == []
