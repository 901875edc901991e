"""The house rules: imports inside `gates` only point down (no cycle, not even through a
function-level or type-checking import), and the docs stand alone."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import REPO_ROOT

PACKAGE = REPO_ROOT / "gates"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts).removesuffix(".__init__")


def import_graph() -> dict[str, set[str]]:
    """Every `gates` module and the `gates` modules it imports anywhere in its text."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets.add(node.module)
                targets.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path of module names, or None."""
    state: dict[str, str] = {}
    trail: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        trail.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return [*trail[trail.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[module] = "done"
        trail.pop()
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            return cycle
    return None


def test_the_import_graph_has_no_cycle() -> None:
    graph = import_graph()
    assert "gates.engine.alignment" in graph
    assert "gates.contracts.model" not in graph["gates.engine.alignment"]
    assert "gates.naming.rules" not in graph["gates.naming.aoa"]
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_cycle(graph) == ["a", "b", "c", "a"]


def test_docs_and_code_cite_no_design_file_users_do_not_have() -> None:
    texts = [*REPO_ROOT.joinpath("docs").glob("*.md"), REPO_ROOT / "README.md"]
    texts += list(PACKAGE.rglob("*.py"))
    offenders = [
        str(path.relative_to(REPO_ROOT))
        for path in texts
        if "DESIGN.md" in (text := path.read_text(encoding="utf-8")) or "shared/" in text
    ]
    assert offenders == []
