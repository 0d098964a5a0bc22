"""The code blocks of README.md and docs/*.md, as the doc runner sees them.

A fenced block is one of three kinds, decided from its info string and the line before it:

- **run**: `sh`/`bash` or `python`; CI runs it as written (`test_doc_blocks.py`).
- **not a command**: a language naming something that is not run (`text` for output samples and
  diagrams, `properties`, `json`, `mermaid`, ...): counted, never run.
- **not run, with a reason**: any block right after a comment `<!-- not run: REASON -->` (a
  synopsis with placeholders, something that needs a second machine, `infra/up` itself).

Anything else (no language, an unknown one, an empty reason) is an error: `unmarked` lists them and
a unit test fails on any. Pure functions over text; no I/O but reading the pages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
RUN_LANGUAGES = {"sh": "sh", "bash": "sh", "python": "python"}
NOT_COMMANDS = frozenset({"text", "properties", "json", "mermaid", "yaml", "toml", "ini", "csv"})
SKIP_MARK = re.compile(r"^<!--\s*not run:\s*(?P<reason>\S.*?)\s*-->$")
FENCE = re.compile(r"^```(?P<info>[^`]*)$")
# infra/up's defaults as the pages write them (README "Two commands", docs/cluster.md).
DEFAULT_PORTS = {
    "broker": 9092,  # brokers 1-3: 9092, 9093, 9094
    "zookeeper": 2181,
    "admin": 8080,
    "gateway": 9192,  # broker N behind the gateway: 9193 + N
    "http": 8082,
    "gateway_metrics": 7170,
    "metrics": 7071,  # brokers 1-3: 7071, 7072, 7073
}
BROKERS = 3


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and, if not run, why."""

    page: str  # relative to the repository, e.g. "docs/clients.md"
    number: int  # 1-based among the page's blocks
    line: int  # 1-based line of the opening fence
    language: str
    text: str
    skip_reason: str | None

    @property
    def kind(self) -> str:
        """`run`, `not-command`, `not-run` or `unmarked`."""
        if self.skip_reason is not None:
            return "not-run"
        if self.language in RUN_LANGUAGES:
            return "run"
        if self.language in NOT_COMMANDS:
            return "not-command"
        return "unmarked"

    @property
    def name(self) -> str:
        return (
            f"{self.page} block {self.number} (line {self.line}, {self.language or 'no language'})"
        )


def doc_pages() -> list[str]:
    """README first, then the docs in the order a reader takes them; the rest alphabetically."""
    first = [
        "README.md",
        "docs/clients.md",
        "docs/gateway-http.md",
        "docs/admin-api.md",
        "docs/billing.md",
        "docs/cluster.md",
    ]
    rest = sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "docs").glob("*.md")
        if str(p.relative_to(REPO)) not in first
    )
    return [page for page in first if (REPO / page).exists()] + rest


def parse_blocks(page: str, text: str) -> list[Block]:
    """Every fenced block of `text`, in order. An unclosed fence is an error."""
    blocks: list[Block] = []
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        opened = index
        index += 1
        body: list[str] = []
        while index < len(lines) and lines[index] != "```":
            body.append(lines[index])
            index += 1
        if index == len(lines):
            raise ValueError(f"{page}:{opened + 1}: a code block is never closed")
        mark = SKIP_MARK.match(_line_before(lines, opened))
        blocks.append(
            Block(
                page=page,
                number=len(blocks) + 1,
                line=opened + 1,
                language=fence["info"].strip().split(" ")[0],
                text="\n".join(body) + "\n",
                skip_reason=mark["reason"] if mark else None,
            )
        )
        index += 1
    return blocks


def _line_before(lines: list[str], index: int) -> str:
    """The last non-blank line before `index` (the skip mark may be separated by a blank line)."""
    for line in reversed(lines[:index]):
        if line.strip():
            return line.strip()
    return ""


def page_blocks(page: str) -> list[Block]:
    return parse_blocks(page, (REPO / page).read_text(encoding="utf-8"))


def port_map(ports: Mapping[str, int]) -> dict[int, int]:
    """infra/up's default port -> the port the runner's infra/up listens on (`ports` has the
    runner's value for each key of DEFAULT_PORTS)."""
    mapping: dict[int, int] = {}
    for key, default in DEFAULT_PORTS.items():
        mapping[default] = ports[key]
    for offset in range(1, BROKERS):
        mapping[DEFAULT_PORTS["broker"] + offset] = ports["broker"] + offset
        mapping[DEFAULT_PORTS["metrics"] + offset] = ports["metrics"] + offset
    for node in range(1, BROKERS + 1):  # broker N behind the gateway: bootstrap + 1 + N
        mapping[DEFAULT_PORTS["gateway"] + 1 + node] = ports["gateway"] + 1 + node
    return mapping


def substitute_ports(text: str, mapping: Mapping[int, int]) -> str:
    """Replace each whole number in `text` that is one of infra/up's default ports, in one pass
    (so a replacement is never replaced again). Nothing else in a block is touched."""
    pattern = re.compile(r"(?<![\d.])(" + "|".join(str(p) for p in mapping) + r")(?![\d])")
    return pattern.sub(lambda m: str(mapping[int(m.group(1))]), text)


MARKER = "@@pier-doc-block "
HEREDOC = "PIER_DOC_BLOCK_END"
PYTHON_BLOCK_TIMEOUT_S = 120


def page_script(blocks: list[Block], mapping: Mapping[int, int]) -> str:
    """One bash script that runs a page's blocks in order, as one terminal session would: `sh`
    blocks inline (variables carry over, `set -euo pipefail`), `python` blocks through the
    venv's python from a here-document. Each block is preceded by a marker line naming it."""
    parts = ["set -euo pipefail"]
    for block in blocks:
        if block.kind != "run":
            continue
        text = substitute_ports(block.text, mapping)
        parts.append(f"printf '\\n{MARKER}{block.number}\\n'")
        if RUN_LANGUAGES[block.language] == "python":
            if HEREDOC in text:
                raise ValueError(f"{block.name} contains {HEREDOC}")
            parts.append(
                f"timeout {PYTHON_BLOCK_TIMEOUT_S} python - <<'{HEREDOC}'\n{text}{HEREDOC}"
            )
        else:
            parts.append(text)
    parts.append(f"printf '\\n{MARKER}end\\n'")
    return "\n".join(parts) + "\n"


def split_output(output: str) -> dict[str, str]:
    """The script's combined output cut at the markers: block number (or "end") -> its output."""
    pieces: dict[str, str] = {}
    current = "before"
    for line in output.splitlines(keepends=True):
        if line.startswith(MARKER):
            current = line[len(MARKER) :].strip()
            pieces[current] = ""
        else:
            pieces[current] = pieces.get(current, "") + line
    return pieces
