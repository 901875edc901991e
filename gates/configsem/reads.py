"""Where the candidate's source tree reads each attribute: static analysis, no code runs.

A read is an attribute load (``config.rope_theta``, ``self.config.x``), a
``getattr(obj, "name")`` with a literal name, or, for a key nested in a dict
attribute, a literal subscript or ``.get("key")``. Stores (``self.x = ...``)
are not reads. The file defining the config class is left out: a config that
only stores a value consumes nothing.

Fast on a large package: one regular expression finds the files where a name
could be read (``.name`` or a quoted ``"name"``), and only those are parsed,
lazily, until every name has one confirmed read.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

_SKIP_DIRS = {".git", ".venv", "venv", "__pycache__", "node_modules", ".tox", "build", "dist"}


@dataclass(frozen=True)
class Read:
    path: str  # relative to the scanned root
    line: int

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def python_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        found += [Path(folder) / name for name in sorted(files) if name.endswith(".py")]
    return found


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def module_reads(tree: ast.Module) -> dict[str, int]:
    """Every name read in one module, with its first line (ast.walk: faster than a visitor)."""
    first: dict[str, int] = {}
    for node in ast.walk(tree):
        name: str | None = None
        if not isinstance(node, ast.expr):
            continue
        if isinstance(node, ast.Attribute):
            name = node.attr if isinstance(node.ctx, ast.Load) else None
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            if isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) >= 2:
                name = _literal(node.args[1])
            elif isinstance(func, ast.Attribute) and func.attr == "get":
                name = _literal(node.args[0])
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            name = _literal(node.slice)
        if name is not None and (name not in first or node.lineno < first[name]):
            first[name] = node.lineno
    return first


@dataclass
class SourceIndex:
    """The Python files of one tree, read once; names are confirmed on demand."""

    root: Path
    texts: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    _parsed: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path) -> SourceIndex:
        index = cls(root)
        for path in python_files(root):
            relpath = path.relative_to(root).as_posix()
            try:
                index.texts[relpath] = path.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                index.problems.append(f"{relpath}: cannot read: {exc.strerror}")
        return index

    def _reads_in(self, relpath: str) -> dict[str, int]:
        if relpath not in self._parsed:
            try:
                tree = ast.parse(self.texts[relpath], filename=relpath)
            except (SyntaxError, ValueError):
                self.problems.append(f"{relpath}: not valid Python; its reads are not counted")
                tree = ast.Module(body=[], type_ignores=[])
            self._parsed[relpath] = module_reads(tree)
        return self._parsed[relpath]

    def find(self, names: Iterable[str], *, exclude: str | None = None) -> dict[str, Read]:
        """The first confirmed read of each name (files in path order), skipping ``exclude``."""
        wanted = sorted(set(names))
        if not wanted:
            return {}
        alternatives = "|".join(re.escape(name) for name in wanted)
        shaped = re.compile(rf"""[.'"]\s*({alternatives})\b""")
        found: dict[str, Read] = {}
        for relpath, text in self.texts.items():
            if relpath == exclude:
                continue
            candidates = {m for m in shaped.findall(text) if m not in found}
            if not candidates:
                continue
            reads = self._reads_in(relpath)
            for name in candidates:
                if name in reads:
                    found[name] = Read(relpath, reads[name])
            if len(found) == len(wanted):
                break
        return found
