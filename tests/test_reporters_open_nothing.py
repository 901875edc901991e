"""The renderers of what the audit decided open no evidence file: their command reads it and
hands them typed data (docs/architecture.md). Only the locale tables are read there."""

from __future__ import annotations

import ast

from tests.helpers import REPO_ROOT

REPORTERS = REPO_ROOT / "gates/reporters"
#: The renderers of the audit's results: what they show comes from their command.
RENDERERS = ("claims.py", "html_report.py", "report_data.py", "status_md.py", "text_report.py")
READS = {"open", "read_bytes", "read_text", "load", "loads", "read_losses", "open_dump"}
#: The one file a renderer reads itself: its locale's table (status_md.py).
ALLOWED = {("status_md.py", "read_text")}


def file_reads(name: str, allowed: set[tuple[str, str]] = ALLOWED) -> set[str]:
    """The reading calls in one renderer: `open(...)`, `x.read_text()`, `json.load(...)`."""
    found = set()
    tree = ast.parse((REPORTERS / name).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called == "loads" and isinstance(func, ast.Attribute):
            continue  # json.loads of text handed in is parsing, not reading a file
        if called in READS and (name, called) not in allowed:
            found.add(f"{called} (line {node.lineno})")
    return found


def test_no_renderer_reads_a_file() -> None:
    reads = {name: file_reads(name) for name in RENDERERS}
    assert reads == {name: set() for name in RENDERERS}, "read it in the command, hand it over"


def test_the_check_finds_a_read() -> None:
    # the detector itself: the locale read of status_md.py is seen once not allowed
    assert file_reads("status_md.py") == set()
    assert [r.split()[0] for r in file_reads("status_md.py", allowed=set())] == ["read_text"]
