"""Issue 17's layout: where each moved module went, and the rewrite of its imports.

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
    # the engine: contracts evaluated, alignment, waivers, verdict
    "gates.engine": "gates.engine.audit",
    "gates.alignment": "gates.receipts.alignment",
    "gates.counting": "gates.engine.counting",
    "gates.audit_summary": "gates.engine.summary",
    # reporters, with the claims and the history of audits
    "gates.claims": "gates.reporters.claims",
    "gates.history": "gates.reporters.history",
    "gates.formats": "gates.reporters.formats",
    # the policy in force
    "gates.policy": "gates.policy.in_force",
    "gates.sides": "gates.policy.sides",
    "gates.waivers": "gates.policy.waivers",
    # receipts: discover, judge, bind, derive, index
    "gates.audit_index": "gates.receipts.index",
    "gates.binding": "gates.receipts.binding",
    "gates.derive": "gates.receipts.derive",
    "gates.evidence": "gates.receipts.evidence",
    "gates.provenance": "gates.receipts.provenance",
    "gates.artifacts": "gates.receipts.artifacts",
    "gates.crosscheck": "gates.receipts.crosscheck",
    "gates.commands.outputs": "gates.checkers.outputs",
    # the freeze
    "gates.freeze": "gates.freeze.check",
    "gates.freeze_settings": "gates.freeze.settings",
    "gates.freeze_ref": "gates.freeze.ref",
    "gates.worktree": "gates.freeze.worktree",
    "gates.precommit": "gates.freeze.precommit",
    # kinds of evidence
    "gates.losses": "gates.losses.series",
    "gates.checks.loss": "gates.losses.compare",
    "gates.commands.checkpoint_output": "gates.checkers.checkpoint_output",
    # the naming rules and the safetensors reader
    "gates.checkpoints.rules": "gates.naming.rules",
    "gates.checkpoints.rule_kinds": "gates.naming.rule_kinds",
    "gates.checkpoints.rulefile": "gates.naming.rulefile",
    "gates.checkpoints.aoa": "gates.naming.aoa",
    "gates.checkpoints.families": "gates.naming.families",
    "gates.checkpoints.config_placeholders": "gates.naming.config_placeholders",
    "gates.checkpoints.header": "gates.safetensors.header",
    # training: recorders, env capture, the trainer API
    "gates.recorder": "gates.training.recorder",
    "gates.env": "gates.training.env",
    "gates.runlog": "gates.training.runlog",
    "gates.commands.checkpoint_ranks": "gates.training.checkpoint_ranks",
    "gates.preflight": "gates.engine.preflight",
    # the CLI's shared options and the demo's acts
    "gates.commands.checker_options": "gates.cli_options",
    "gates.commands.demo": "gates.commands.demo",
    "gates.commands.demo_config": "gates.commands.demo.config_act",
    "gates.commands.demo_resume": "gates.commands.demo.resume_act",
    "gates.commands.demo_tensors": "gates.commands.demo.tensors_act",
    # the VSA and its verification read the audit's summary: reporters
    "gates.trust.vsa": "gates.reporters.vsa",
    "gates.trust.verify_export": "gates.reporters.verify_export",
    # the contract files are part of the policy
    "gates.contracts.loader": "gates.policy.contract_files",
    # intermediate places of this branch's first commit
    "gates.policy.config": "gates.config",
    "gates.training.tensor_recorder": "gates.tensors.recorder",
    "gates.engine.alignment": "gates.receipts.alignment",
    "gates.receipts.outputs": "gates.checkers.outputs",
    "gates.checkpoints.output": "gates.checkers.checkpoint_output",
    "gates.training.preflight": "gates.engine.preflight",
}

# Documented import paths of users' training scripts: a re-export stays at each.
KEPT = ("gates.recorder", "gates.env")

NEW_PACKAGES = (
    "engine",
    "policy",
    "freeze",
    "losses",
    "naming",
    "safetensors",
    "training",
    "checkers",
)


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
    (ROOT / "gates" / "commands" / "demo").mkdir(exist_ok=True)
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
    ("gates.commands", "Echo"): "gates.echo",
    ("gates.commands", "note"): "gates.echo",
    ("gates.contracts.model", "Criterion"): "gates.criteria",
    ("gates.contracts.model", "DischargeStatus"): "gates.criteria",
    ("gates.contracts.model", "discharge_status"): "gates.criteria",
    ("gates.contracts.model", "ContractSpec"): "gates.policy.contract_files",
    ("gates.contracts.model", "ContractId"): "gates.policy.contract_files",
    ("gates.naming.rulefile", "load_ruleset"): "gates.policy.rulesets",
    ("gates.naming.rulefile", "workspace_ruleset"): "gates.policy.rulesets",
    ("gates.recorder", "RUN_DIR"): "gates.run_env",
    ("gates.recorder", "RUN_ID"): "gates.run_env",
    ("gates.recorder", "GIT_HEAD"): "gates.run_env",
    ("gates.recorder", "FRAMEWORK"): "gates.run_env",
    ("gates.recorder", "MODEL_CONFIG"): "gates.run_env",
    ("gates.recorder", "rank_folder"): "gates.run_env",
    ("gates.training.recorder", "RUN_DIR"): "gates.run_env",
    ("gates.training.recorder", "RUN_ID"): "gates.run_env",
    ("gates.training.recorder", "GIT_HEAD"): "gates.run_env",
    ("gates.training.recorder", "FRAMEWORK"): "gates.run_env",
    ("gates.training.recorder", "MODEL_CONFIG"): "gates.run_env",
    ("gates.training.env", "RANK_VARIABLES"): "gates.run_env",
    ("gates.training.recorder", "rank_folder"): "gates.run_env",
    ("gates.replay.commitments", "SAVE_EVERY"): "gates.run_env",
    # issue 17 item 2: the receipts are judged in the receipts stage
    ("gates.engine.audit", "discover_receipts"): "gates.receipts.judge_all",
    ("gates.engine.audit", "judge_receipts"): "gates.receipts.judge_all",
    ("gates.engine.audit", "index_fingerprint"): "gates.receipts.judge_all",
    ("gates.engine.audit", "code_in_force"): "gates.receipts.judge_all",
    ("gates.engine.audit", "settle"): "gates.receipts.judge_all",
    ("gates.engine.audit", "missing_input_reason"): "gates.receipts.judge_all",
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
