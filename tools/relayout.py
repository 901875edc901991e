"""Issue 34's layout: where each moved module went, and the rewrite of its imports.

`python tools/relayout.py move` runs the `git mv`s (once); `python tools/relayout.py
rewrite [PATH ...]` rewrites every dotted name of a moved module to its new name in the
project's Python files (or the given ones). The rewrite is idempotent, so it can run again
over code merged in later that still names the old paths.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# old module -> new module. A documented import path keeps a thin re-export (KEPT).
MOVES: dict[str, str] = {
    # the shared kernel: atomic writes, errors, exit codes, paths, validation, hashing, git,
    # echo, progress, resources, content ids
    "gates.atomic": "gates.core.atomic",
    "gates.canonical": "gates.core.content_ids",
    "gates.criteria": "gates.core.criteria",
    "gates.detection": "gates.core.detection",
    "gates.echo": "gates.core.echo",
    "gates.errors": "gates.core.errors",
    "gates.exitcodes": "gates.core.exitcodes",
    "gates.git": "gates.core.git",
    "gates.hashing": "gates.core.hashing",
    "gates.paths": "gates.core.paths",
    "gates.progress": "gates.core.progress",
    "gates.resources": "gates.core.resources",
    "gates.validation": "gates.core.validation",
    "gates.run_env": "gates.core.run_protocol",
    # the workspace stage: the repository, gates.toml, external roots
    "gates.workspace": "gates.workspace.repository",
    "gates.config": "gates.workspace.config",
    "gates.external": "gates.workspace.external",
    # everything that imports click
    "gates.cli": "gates.cli.app",
    "gates.cli_options": "gates.cli.options",
    "gates.commands.cli_report": "gates.cli.report",
}

# Documented import paths of users' training scripts: a re-export stays at each.
KEPT = ("gates.recorder", "gates.env")

NEW_PACKAGES = ("core", "workspace", "cli")


def path_of(module: str, package: bool = False) -> Path:
    parts = module.split(".")
    if package:
        return ROOT.joinpath(*parts, "__init__.py")
    return ROOT.joinpath(*parts).with_suffix(".py")


def git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=ROOT, check=True)


def move() -> None:
    """The `git mv`s. A module that becomes a package's name moves aside first."""
    staged: dict[str, Path] = {}
    for old in MOVES:
        source = path_of(old)
        if not source.exists():
            continue
        aside = source.with_name(f"_moving_{source.name}")
        git("mv", str(source), str(aside))
        staged[old] = aside
    for name in NEW_PACKAGES:
        (ROOT / "gates" / name).mkdir(exist_ok=True)
    for old, aside in staged.items():
        new = MOVES[old]
        target = path_of(new, package=new == old)
        target.parent.mkdir(parents=True, exist_ok=True)
        git("mv", str(aside), str(target))


def pattern_for(old: str) -> re.Pattern[str]:
    """The dotted name `old` as a whole name, not as the prefix of one of its new children."""
    new = MOVES[old]
    package_dir = ROOT.joinpath(*old.split("."))
    children = sorted(
        {p.stem for p in package_dir.glob("*.py") if p.stem != "__init__"}
        | {p.name for p in package_dir.iterdir() if p.is_dir()}
        if package_dir.is_dir()
        else set()
    )
    names = "|".join(map(re.escape, children))
    guard = f"(?!\\.(?:{names})\\b)(?! import (?:{names})\\b)" if children else ""
    del new
    return re.compile(rf"(?<![\w.]){re.escape(old)}(?![\w]){guard}")


def from_import_pattern(old: str) -> re.Pattern[str]:
    """`from gates.pkg import module` for a moved module."""
    parent, _, name = old.rpartition(".")
    return re.compile(rf"^(\s*)from {re.escape(parent)} import {name}\b(?! *,)", re.M)


# Names that moved out of a module that stays: (module, name) -> the module they live in now.
SYMBOL_MOVES: dict[tuple[str, str], str] = {
    ("gates.freeze.settings", "find_root"): "gates.workspace.repository",
}


def rewrite_symbols(text: str) -> str:
    """Split `from M import a, b` where some names moved out of M (ast, so any layout)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    modules = {module for module, _ in SYMBOL_MOVES}
    nodes = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules
    ]
    lines = text.splitlines(keepends=True)
    for node in sorted(nodes, key=lambda n: n.lineno, reverse=True):
        if node.module is None or node.end_lineno is None:
            continue
        groups: dict[str, list[str]] = {}
        for alias in node.names:
            target = SYMBOL_MOVES.get((node.module, alias.name), node.module)
            spelled = alias.name + (f" as {alias.asname}" if alias.asname else "")
            groups.setdefault(target, []).append(spelled)
        if list(groups) == [node.module]:
            continue
        last = lines[node.end_lineno - 1]
        comment = last[last.index("#") :].rstrip("\n") if "#" in last else ""
        indent = " " * node.col_offset
        new = [
            f"{indent}from {module} import {', '.join(names)}{'  ' + comment if comment else ''}\n"
            for module, names in groups.items()
        ]
        lines[node.lineno - 1 : node.end_lineno] = new
    return "".join(lines)


def rewrite_text(text: str) -> str:
    text = rewrite_symbols(text)
    for old in sorted(MOVES, key=len, reverse=True):
        new = MOVES[old]
        if new == old:
            continue
        parent, _, name = new.rpartition(".")
        text = from_import_pattern(old).sub(rf"\1from {parent} import {name}", text)
        text = pattern_for(old).sub(new, text)
    return text


def file_path(module: str, package: bool) -> str:
    return "/".join(module.split(".")) + ("/__init__.py" if package else ".py")


def rewrite_paths(text: str) -> str:
    """`gates/engine.py` -> `gates/engine/audit.py` in comments and docs."""
    for old in sorted(MOVES, key=len, reverse=True):
        new = MOVES[old]
        old_path = file_path(old, package=False)
        new_path = file_path(new, package=new == old)
        text = re.sub(rf"(?<![\w/.]){re.escape(old_path)}\b", new_path, text)
    return text


def rewrite_docs() -> None:
    """The docs: file paths and module names, but never a documented import path (KEPT)."""
    for path in [*ROOT.joinpath("docs").glob("*.md"), ROOT / "README.md"]:
        text = path.read_text(encoding="utf-8")
        new = rewrite_paths(text)
        for old in sorted(MOVES, key=len, reverse=True):
            if MOVES[old] != old and old not in KEPT:
                new = pattern_for(old).sub(MOVES[old], new)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path.relative_to(ROOT)}")


def python_files() -> list[Path]:
    roots = [ROOT / "gates", ROOT / "tests", ROOT / "bench", ROOT / "ci"]
    files = [p for r in roots if r.exists() for p in r.rglob("*.py")]
    files += list(ROOT.glob("*.py"))
    exempt = {path_of(kept) for kept in KEPT} | {ROOT / "tests" / "test_documented_imports.py"}
    return [p for p in files if p not in exempt and ".venv" not in p.parts]


def rewrite(paths: list[Path]) -> None:
    for path in paths:
        text = path.read_text(encoding="utf-8")
        new = rewrite_paths(rewrite_text(text))
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    if command == "move":
        move()
    elif command == "docs":
        rewrite_docs()
    elif command == "rewrite":
        rewrite([Path(p).resolve() for p in rest] if rest else python_files())
    else:
        raise SystemExit(f"unknown command {command!r}: move or rewrite")
