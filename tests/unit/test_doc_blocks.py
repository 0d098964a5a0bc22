"""Every code block of README.md and docs/*.md is either run by the doc runner
(tests/e2e/docs/test_doc_blocks.py) or says why not: a language that is not a command (`text`,
`properties`, `json`, `mermaid`, ...) or a `<!-- not run: REASON -->` line before it. A block with
no language or an unknown one fails here, so nothing a user may copy escapes the runner. Also: the
runner's port substitution and script, and the README's length (a front door, not a manual)."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.e2e.docs.doc_blocks import (
    DEFAULT_PORTS,
    MARKER,
    REPO,
    doc_pages,
    page_blocks,
    page_script,
    parse_blocks,
    port_map,
    split_output,
    substitute_ports,
)

pytestmark = pytest.mark.unit
README_MAX_LINES = 180
TEST_PORTS = {key: 30000 + 10 * i for i, key in enumerate(DEFAULT_PORTS)}


def test_every_page_is_covered() -> None:
    pages = set(doc_pages())
    assert "README.md" in pages
    assert {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")} <= pages


def test_every_block_is_run_or_says_why_not() -> None:
    blocks = [block for page in doc_pages() for block in page_blocks(page)]
    unmarked = [b.name for b in blocks if b.kind == "unmarked"]
    assert unmarked == [], (
        "give each block a language (sh/python to run it; text, properties, json, mermaid for "
        "what is not a command) or a `<!-- not run: REASON -->` line before it"
    )
    kinds = Counter(b.kind for b in blocks)
    assert kinds["run"] >= 25, kinds  # the README's and the cookbook's examples at least


def test_the_readme_is_a_front_door_whose_examples_run() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_MAX_LINES
    languages = {b.language for b in page_blocks("README.md") if b.kind == "run"}
    assert languages == {"sh", "python"}


def test_marks_and_languages_decide_the_kind() -> None:
    text = (
        "```sh\necho run\n```\n\n"
        "<!-- not run: needs a second machine -->\n\n```sh\nssh other\n```\n"
        "```text\noutput\n```\n```\nbare\n```\n```console\n$ x\n```\n"
    )
    blocks = parse_blocks("p.md", text)
    assert [b.kind for b in blocks] == ["run", "not-run", "not-command", "unmarked", "unmarked"]
    assert blocks[1].skip_reason == "needs a second machine"
    assert [b.line for b in blocks] == [1, 7, 10, 13, 16]
    with pytest.raises(ValueError, match="never closed"):
        parse_blocks("p.md", "```sh\necho\n")


def test_only_default_ports_are_replaced_once() -> None:
    mapping = port_map(TEST_PORTS)
    text = "127.0.0.1:9092,127.0.0.1:9094 localhost:8082 :9196 version 19092 1.9092 8080x 80801"
    assert substitute_ports(text, mapping) == (
        f"127.0.0.1:{TEST_PORTS['broker']},127.0.0.1:{TEST_PORTS['broker'] + 2} "
        f"localhost:{TEST_PORTS['http']} :{TEST_PORTS['gateway'] + 4} version 19092 1.9092 "
        f"{TEST_PORTS['admin']}x 80801"
    )
    chained = port_map({**TEST_PORTS, "admin": 8082, "http": 9092})  # no double replacement
    assert substitute_ports("8080 8082", chained) == "8082 9092"


def test_the_page_script_marks_each_run_block() -> None:
    blocks = parse_blocks("p.md", "```sh\nX=1\n```\n```text\nno\n```\n```python\nprint(1)\n```\n")
    script = page_script(blocks, port_map(TEST_PORTS))
    assert script.startswith("set -euo pipefail\n")
    assert "no\n" not in script and "python - <<'PIER_DOC_BLOCK_END'\nprint(1)\n" in script
    output = f"\n{MARKER}1\nx\n\n{MARKER}3\n1\n\n{MARKER}end\n"
    assert split_output(output) == {"before": "\n", "1": "x\n\n", "3": "1\n\n", "end": ""}
