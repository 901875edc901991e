"""Every page of docs/ is one a reader can reach from the README, and every `docs/NAME.md`
that a doc, the code, a contract or the example names exists."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import REPO_ROOT

DOCS = REPO_ROOT / "docs"
NAMED = re.compile(r"docs/([A-Za-z0-9_-]+\.md)")
LINKED = re.compile(r"\]\(([A-Za-z0-9_-]+\.md)\)")


def texts() -> list[Path]:
    found = [REPO_ROOT / "README.md", REPO_ROOT / "Makefile", REPO_ROOT / "pyproject.toml"]
    found += sorted(DOCS.glob("*.md")) + sorted((REPO_ROOT / "gates").rglob("*.py"))
    found += sorted((REPO_ROOT / "contracts").glob("*.toml"))
    example = REPO_ROOT / "examples"
    found += [p for p in sorted(example.rglob("*")) if p.suffix in {".md", ".toml", ".py"}]
    return found


def test_every_doc_named_anywhere_exists() -> None:
    missing = []
    for path in texts():
        text = path.read_text(encoding="utf-8", errors="replace")
        names = set(NAMED.findall(text))
        if path.parent == DOCS:
            names |= set(LINKED.findall(text))
        missing += [f"{path.relative_to(REPO_ROOT)}: docs/{n}" for n in sorted(names)]
    assert [m for m in missing if not (DOCS / m.rsplit("docs/", 1)[1]).is_file()] == []


def test_the_readme_lists_every_doc() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"\(docs/([A-Za-z0-9_-]+\.md)\)", readme))
    assert listed == {path.name for path in DOCS.glob("*.md")}
