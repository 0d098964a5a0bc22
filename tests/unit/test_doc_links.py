"""Every relative link of README.md and docs/*.md resolves: to a file of the repository and, with
`#anchor`, to a heading of that file (GitHub's anchor for it). Links inside code are not links.
A page moved or a heading renamed without fixing its links fails here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
SELF = str(Path(__file__).resolve().relative_to(REPO))
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCED = re.compile(r"^```.*?^```", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """The page without its code blocks and inline code."""
    return INLINE_CODE.sub("", FENCED.sub("", text))


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {anchor(h) for h in HEADING.findall(FENCED.sub("", page.read_text(encoding="utf-8")))}


def relative_links(page: Path) -> list[str]:
    found = LINK.findall(prose(page.read_text(encoding="utf-8")))
    return [link for link in found if not re.match(r"^[a-z][a-z0-9+.-]*:", link)]


def broken_links(page: Path) -> list[str]:
    broken = []
    for link in relative_links(page):
        path, _, fragment = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no file {target}")
        elif fragment and target.suffix == ".md" and fragment not in anchors(target):
            broken.append(f"{link}: no heading #{fragment} in {target.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_checker_catches_a_broken_file_and_a_broken_anchor(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A page\n\n## Some `code` heading\n")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md) [ok](a.md#some-code-heading) [web](https://x.org/y.md) `[not](a link)`\n"
        "[gone](missing.md) [bad anchor](a.md#nope)\n```\n[in code](nowhere.md)\n```\n"
    )
    assert [b.split(":")[0] for b in broken_links(page)] == ["missing.md", "a.md#nope"]


def test_the_readme_links_every_doc_page() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    unlinked = [p.name for p in PAGES[1:] if f"(docs/{p.name})" not in readme]
    assert unlinked == [], "README's table of pages misses these"


# `docs/x.md, "Section"`, `docs/x.md "Section"`, and the README's forms (`README.md, "Section"`,
# `README 'Section'`, `the README's "Section"`).
CITATION = re.compile(
    r"\b(README(?:\.md)?|docs/[\w-]+\.md)(?:,|'s)? "
    r"(?:\"([A-Z][^\"\n]{2,60})\"|'([A-Z][^'\n]{2,60})')"
)


def cited_sections() -> list[tuple[str, str, str]]:
    """(citing file, page, section) for each citation of a doc section in tracked Python."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "*.py"], cwd=REPO, capture_output=True, check=True, timeout=60
    ).stdout.decode()
    found = []
    for name in filter(None, listed.split("\0")):
        if name == SELF:
            continue  # its comments show the forms
        try:
            text = (REPO / name).read_text(encoding="utf-8")
        except FileNotFoundError:
            continue  # deleted in the work tree, not yet committed
        found += [
            (name, "README.md" if page == "README" else page, double or single)
            for page, double, single in CITATION.findall(text)
        ]
    return found


def section_exists(page: Path, section: str) -> bool:
    """A heading of that name, or a paragraph led by it in bold (`**Section.**`)."""
    text = page.read_text(encoding="utf-8")
    headings = {h.strip("`") for h in HEADING.findall(FENCED.sub("", text))}
    return section in headings or f"**{section}" in text


def test_every_cited_section_exists() -> None:
    missing = [
        f"{name}: {page}, {section!r}"
        for name, page, section in cited_sections()
        if not (REPO / page).exists() or not section_exists(REPO / page, section)
    ]
    assert missing == [], "code cites sections that are not in the docs"
