"""Every `pier` subcommand's `--help`, and `infra/up --help`, is complete (issue 22): the whole
argparse tree is walked, and each (sub)command must have a summary, every option and positional a
help text that says something beyond its default, its `--help` must list every option, exit 0 and
start nothing (argparse answers it while parsing, before any command runs)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from infra import up_main
from pier import cli

pytestmark = pytest.mark.unit


def walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str | None]]:
    """(command path, its parser, the summary its parent lists it with) for every command."""
    yield path, parser, "top"
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                for found in walk(sub, (*path, name)):
                    yield (
                        found if found[0] != (*path, name) else (found[0], sub, summaries.get(name))
                    )


PIER = list(walk(cli._parser(), ()))
INFRA_UP = [((), up_main.build_parser(), "top")]


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    skipped = (argparse._HelpAction, argparse._SubParsersAction, argparse._VersionAction)
    return [a for a in parser._actions if not isinstance(a, skipped)]


def _says_something(text: str | None) -> bool:
    """Help text beyond a bare default such as "(%(default)s)"."""
    if not text or text == argparse.SUPPRESS:
        return False
    return bool(re.search(r"[A-Za-z]{2,}", re.sub(r"\([^)]*\)", "", text)))


def _name(path: tuple[str, ...]) -> str:
    return " ".join(("pier", *path))


def test_the_walk_finds_every_command() -> None:
    names = {_name(path) for path, _parser, _summary in PIER}
    assert {"pier broker", "pier admin tenants create", "pier cluster reassign"} <= names
    assert "pier billing usage" in names and len(names) > 50


@pytest.mark.parametrize(
    ("path", "parser", "summary"),
    [*PIER, *INFRA_UP],
    ids=[_name(p) for p, _, _ in PIER] + ["infra/up"],
)
def test_each_command_has_a_summary_and_every_option_a_help_text(
    path: tuple[str, ...], parser: argparse.ArgumentParser, summary: str | None
) -> None:
    assert _says_something(summary), f"{_name(path)} has no summary in its parent's --help"
    undocumented = [
        "/".join(action.option_strings) or action.dest
        for action in _options(parser)
        if not _says_something(action.help)
    ]
    assert undocumented == [], f"{_name(path)}: options without help: {undocumented}"
    shown = parser.format_help()
    for action in _options(parser):
        for option in action.option_strings:
            assert re.search(rf"(^|[\s,\[]){re.escape(option)}\b", shown), (
                f"{_name(path)} --help does not list {option}"
            )


@pytest.mark.parametrize("path", [p for p, _, _ in PIER], ids=[_name(p) for p, _, _ in PIER])
def test_each_help_exits_0_before_running_anything(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main([*path, "--help"])
    assert done.value.code == 0
    printed = capsys.readouterr()
    assert printed.out.startswith(f"usage: {_name(path)}"), printed.out[:200]
    assert printed.err == ""


def test_infra_up_help_exits_0_and_explains_a_second_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        up_main.main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: infra/up")
    assert "Pier is already running from ROOT" in out and "exits 3" in out
    assert "Examples:" in out
