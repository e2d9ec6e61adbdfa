"""README.md is the front door on GitHub, where the docs site's link checking does not reach
it: it stays short (at most 250 lines, issue 43), and every relative link in it leads to a
file of the repository and, with an anchor, to a heading of that file as GitHub names it."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lowercase, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    outside_fences = re.sub(r"^```.*?^```", "", markdown, flags=re.MULTILINE | re.DOTALL)
    headings = re.findall(r"^#{1,6} (.+)$", outside_fences, re.MULTILINE)
    return {github_anchor(h) for h in headings}


def test_readme_is_at_most_250_lines() -> None:
    assert len(README.splitlines()) <= 250


def test_readme_links_reach_files_and_headings() -> None:
    local = [t for t in LINK.findall(README) if not re.match(r"[a-z]+:", t)]
    assert len(local) > 15  # the table of contents at least
    for target in local:
        path, _, anchor = target.partition("#")
        file = REPO / path if path else REPO / "README.md"
        assert file.is_file(), f"README.md links {target}: no such file"
        if anchor:
            found = anchors(file.read_text(encoding="utf-8"))
            assert anchor in found, f"README.md links {target}: no such heading in {path}"


def test_the_anchor_rule_matches_githubs() -> None:
    assert github_anchor("Usage, budgets and models") == "usage-budgets-and-models"
    assert github_anchor("The `agent chat` view") == "the-agent-chat-view"


def test_the_sites_home_lists_the_pages_readme_lists() -> None:
    """docs/index.md, the site's home, carries README's table of contents (its links relative
    to docs/): a page added to one and not the other fails here."""
    home = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    rows = [line for line in README.splitlines() if line.startswith("| [")]
    assert len(rows) > 10
    assert [row.replace("](docs/", "](") for row in rows] == [
        line for line in home.splitlines() if line.startswith("| [")
    ]
