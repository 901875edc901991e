"""The house rules: imports inside `gates` only point down, from a stage to the stages
below it (docs/architecture.md), with no cycle between modules or between stages, not even
through a function-level or type-checking import; and the docs stand alone."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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


#: The stages of the pipeline, top first: a module may import its own stage and the stages
#: of later rows, never an earlier row. A stage is a folder of gates/ or a module at its top.
LAYERS: tuple[tuple[str, ...], ...] = (
    # everything that imports click, and `python -m gates`
    ("__main__", "cli"),
    ("commands",),
    # the trainer API, and the documented import paths that re-export it
    ("training", "recorder", "env"),
    ("checkers",),
    ("reporters",),
    ("engine",),
    # replayed windows: the gate the engine applies, the commitments the recorder writes
    ("replay",),
    ("contracts",),
    ("policy",),
    # the kinds of evidence the contracts read
    ("checkpoints", "configsem", "tensors"),
    # the checkers' output documents, as the contracts and the status command read them
    ("outputs",),
    ("sandbox",),
    ("receipts",),
    ("trust",),
    ("freeze",),
    # the repository with its gates.toml, and the external roots it names
    ("workspace",),
    ("losses", "naming", "safetensors"),
    # the shared kernel: plain values, files, git
    ("core", "gates"),
)

#: What may sit at gates/ top level: the package, `python -m gates`, and the documented
#: compatibility modules users import in their training scripts.
TOP_LEVEL = {"__init__.py", "__main__.py", "recorder.py", "env.py"}


def stage_of(module: str) -> str:
    """`gates.engine.audit` -> `engine`, `gates.core.git` -> `git`, `gates` -> `gates`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def stage_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    stages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        own = stage_of(module)
        stages.setdefault(own, set()).update(stage_of(t) for t in targets if stage_of(t) != own)
    return stages


def upward_imports(graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Every import of a module from a stage above its own, and every stage with no row."""
    row = {stage: index for index, names in enumerate(layers) for stage in names}
    problems = [f"{stage}: no row in LAYERS" for stage in stage_graph(graph) if stage not in row]
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            own, other = stage_of(module), stage_of(target)
            if own in row and other in row and row[other] < row[own]:
                problems.append(f"{module} imports {target}: {other} is above {own}")
    return problems


@pytest.mark.slow
def test_a_stage_imports_only_stages_below_it() -> None:
    assert upward_imports(import_graph(), LAYERS) == []


@pytest.mark.slow
def test_the_stages_have_no_cycle() -> None:
    stages = stage_graph(import_graph())
    assert {"engine", "receipts", "policy", "contracts", "naming"} <= set(stages)
    cycle = find_cycle(stages)
    assert cycle is None, " -> ".join(cycle or [])


def test_only_the_package_the_entry_and_the_compatibility_modules_sit_at_the_top() -> None:
    assert {path.name for path in PACKAGE.glob("*.py")} == TOP_LEVEL
    assert not [path.name for path in PACKAGE.rglob("*") if path.suffix in {".c", ".so", ".pyi"}]


def test_only_the_cli_imports_click() -> None:
    graph_roots = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    offenders = []
    for name, path in sorted(graph_roots.items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            imported = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(m == "click" or m.startswith("click.") for m in imported):
                offenders.append(name)
    assert {o for o in offenders if not o.startswith("gates.cli")} == set()


def test_an_import_that_runs_back_up_is_named() -> None:
    graph = {
        "gates.naming.rulefile": {"gates.policy.in_force", "gates.core.errors"},
        "gates.policy.in_force": {"gates.naming.rulefile"},
        "gates.core.errors": set(),
        "gates.newstage.x": set(),
    }
    layers = (("policy",), ("naming",), ("core",))
    assert upward_imports(graph, layers) == [
        "newstage: no row in LAYERS",
        "gates.naming.rulefile imports gates.policy.in_force: policy is above naming",
    ]
    assert find_cycle(stage_graph(graph)) == ["naming", "policy", "naming"]


@pytest.mark.slow
def test_the_import_graph_has_no_cycle() -> None:
    graph = import_graph()
    assert "gates.receipts.alignment" in graph
    assert "gates.contracts.model" not in graph["gates.receipts.alignment"]
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
