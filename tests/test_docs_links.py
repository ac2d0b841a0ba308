"""Every relative link in the README and docs/ leads to a file of the repository, and every #anchor to a heading of
that file (GitHub's rule for heading anchors), so moving a section never leaves a reader at a dead link."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def heading_anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation other than '-' and '_' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(document: Path) -> set[str]:
    """The anchors of a markdown file's headings."""
    text = FENCE.sub("", document.read_text(encoding="utf-8"))
    return {heading_anchor(line.lstrip("#")) for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def test_heading_anchor_follows_github():
    """The anchor rule, computed by hand on two headings of docs/results.md: backquotes and brackets dropped, each
    space a hyphen, so '--size' after a space gives three hyphens."""
    assert heading_anchor(" Canary audits (`lmaudit canaries`)") == "canary-audits-lmaudit-canaries"
    assert heading_anchor(" The full demo (`lmaudit demo --size full`)") == "the-full-demo-lmaudit-demo---size-full"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_resolve(document: Path):
    """Each relative link of the document names an existing file, and its #anchor a heading there."""
    broken = []
    for target in LINK.findall(FENCE.sub("", document.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        if not linked.exists():
            broken.append(f"{target}: no file {linked}")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading with anchor #{anchor} in {linked.name}")
    assert not broken, f"{document.name}: " + "; ".join(broken)
