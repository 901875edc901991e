"""`gates check config OFFICIAL --class MODULE:CLASS`: the config-semantics check as a command.

The semantics table comes from ``--table CONTRACT``, else the workspace's
config-semantics contract, else the shipped GLM-5.2 contract. OFFICIAL and
``--class`` replace the contract's own; ``--path DIR`` imports the class from
that workspace folder (its source tree is scanned for reads). Writes the
per-key table and the criteria beside the receipt; exit 0 when every
criterion is met, 1 otherwise, 2 on bad input.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gates.checkers.outputs import (
    receipt_binding,
    render_figures,
    write_checker_output,
)
from gates.configsem.check import Candidate, ConfigReport, KeyResult, run_check, shown
from gates.configsem.envfiles import read_env_files
from gates.configsem.official import read_official
from gates.configsem.probe import Tree
from gates.configsem.table import Table, parse_table
from gates.core import exitcodes
from gates.core.echo import Output
from gates.core.errors import ConfigError, GatesError
from gates.core.json_writer import indented_json
from gates.core.paths import resolve_inside, to_workspace_relpath
from gates.core.resources import contracts_dir
from gates.engine.audit import judge_workspace
from gates.engine.inputs import AuditInputs
from gates.policy.contract_files import load_contract, load_contracts
from gates.receipts.judge_all import Wanted
from gates.receipts.model import ArtifactKind, Receipt
from gates.workspace.repository import Workspace

CONFIG_CHECK_FORMAT = "gates.config_check/v1"
CLASS_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
CHECK = "config_semantics"
SHIPPED = "config-semantics.toml"


def _table_contract(workspace: Workspace, table: str | None, cwd: Path) -> tuple[Path, str]:
    """The contract file holding the table, and how to name it in reports."""
    if table is not None:
        path = Path(table) if Path(table).is_absolute() else cwd / table
        return path, table
    loaded, _ = load_contracts(workspace.contracts_dir)
    for path, spec in loaded:
        if spec.check == CHECK:
            return path, path.relative_to(workspace.root).as_posix()
    return contracts_dir() / SHIPPED, f"the shipped {SHIPPED}"


def load_table(path: Path, display: str, overrides: dict[str, Any]) -> Table:
    try:
        spec = load_contract(path)
    except ValueError as exc:
        raise ConfigError(str(exc), file=display) from None
    if spec.check != CHECK:
        raise ConfigError(
            f"check = '{spec.check}', not '{CHECK}': not a semantics table", file=display
        )
    return parse_table({**spec.params, **overrides}, source=display)


def _workspace_path(workspace: Workspace, given: str, cwd: Path, what: str) -> tuple[str, Path]:
    relpath = to_workspace_relpath(workspace.root, given, cwd)
    return relpath, resolve_inside(workspace.root, relpath, what=what)


@dataclass(frozen=True)
class ConfigChecked:
    """What `gates check config` found and wrote: the per-key report, the output document,
    the receipt and the output's path (nothing written when ``throwaway``: --no-receipt)."""

    report: ConfigReport
    document: dict[str, object]
    receipt: Receipt
    artifact: str
    throwaway: bool


def render_checked_text(checked: ConfigChecked) -> str:
    report = checked.report
    figures: dict[str, object] = {
        "passed": report.passed,
        "criteria": {c.name: c.met for c in report.criteria},
    }
    written = render_figures(
        figures, checked.receipt, checked.artifact, as_json=False, throwaway=checked.throwaway
    )
    return render_text(report) + "\n" + written


def render_checked_json(checked: ConfigChecked) -> str:
    written = {**checked.document, "output": checked.artifact, "receipt": checked.receipt.id}
    return indented_json(written)


#: --format -> the renderer of a ConfigChecked
RENDERERS: dict[str, Callable[[ConfigChecked], str]] = {
    "text": render_checked_text,
    "json": render_checked_json,
}


def check_config(
    audit: AuditInputs,
    official: str,
    *,
    class_path: str,
    table: str | None,
    path: str | None,
    env: tuple[str, ...],
    output: str,
    cwd: Path,
    out: Output,
) -> int:
    """Exit 0 when every criterion is met, 1 otherwise."""
    checked = config_check(
        audit,
        official,
        class_path=class_path,
        table=table,
        path=path,
        env=env,
        output=output,
        cwd=cwd,
    )
    out.render(RENDERERS, checked)
    return exitcodes.OK if checked.report.passed else exitcodes.BLOCKED


def config_check(
    audit: AuditInputs,
    official: str,
    *,
    class_path: str,
    table: str | None,
    path: str | None,
    env: tuple[str, ...],
    output: str,
    cwd: Path,
) -> ConfigChecked:
    """OFFICIAL loaded with the candidate class (in a subprocess), the output and its
    receipt written."""
    workspace = audit.workspace
    if not CLASS_PATH.fullmatch(class_path):
        raise GatesError(
            f"--class {class_path!r}: expected MODULE:CLASS, e.g. "
            "paddleformers.transformers.glm_moe_dsa.configuration:GlmMoeDsaConfig"
        )
    official_rel, official_path = _workspace_path(workspace, official, cwd, "official config")
    source_rel = ""
    if path is not None:
        source_rel, source_path = _workspace_path(workspace, path, cwd, "--path")
        if not source_path.is_dir():
            raise GatesError("not a folder of the workspace", file=source_rel)
    env_rels = [_workspace_path(workspace, e, cwd, "env.json")[0] for e in env]
    table_path, table_name = _table_contract(workspace, table, cwd)
    overrides: dict[str, Any] = {"official": official_rel, "class": class_path, "env": env_rels}
    if path is not None:
        overrides["source"] = source_rel
    semantics = load_table(table_path, table_name, overrides)
    loaded = read_official(official_path, official_rel)
    source = workspace.root / semantics.source if semantics.source else None
    if source is not None and not source.is_dir():
        raise GatesError("not a folder of the workspace", file=semantics.source)
    tree = Tree(workspace.root, workspace.config.evidence.locations, audit.sandbox_host)
    candidate = Candidate(class_path, source, semantics.source or "installed", tree)
    report = run_check(
        semantics, loaded, candidate, env=read_env_files(workspace.root, semantics.env)
    )
    judged = judge_workspace(audit, wanted=Wanted(files=tuple(env_rels)))
    receipts = judged.receipts
    inputs = [(rel, receipt_binding(rel, receipts)) for rel in env_rels]
    document = _document(semantics, report, table_name)
    receipt, artifact = write_checker_output(
        audit, output, ArtifactKind.CONFIG_CHECK, document, inputs, judged_under=judged.freeze
    )
    return ConfigChecked(report, document, receipt, artifact, audit.invocation.checker.no_receipt)


def _document(table: Table, report: ConfigReport, table_name: str) -> dict[str, object]:
    facts = report.facts
    return {
        "format": CONFIG_CHECK_FORMAT,
        "official": {
            "path": facts["official"],
            "sha256": facts["official_sha256"],
            "pinned_sha256": table.sha256,
            "revision": table.revision or None,
        },
        "candidate": {
            "class": facts["class"],
            "source": facts["source"],
            "distribution": facts["distribution"],
            "module_file": facts["module_file"],
            "loaded_via": facts["loaded_via"],
            "scanned_files": facts["scanned_files"],
            "scanned_packages": facts["scanned_packages"],
            "missing_packages": facts["missing_packages"],
        },
        "table": table_name,
        "passed": report.passed,
        "criteria": [{"name": c.name, "met": c.met, "detail": c.detail} for c in report.criteria],
        "keys": [row.document() for row in report.rows],
    }


def _cell(row: KeyResult) -> list[str]:
    value = shown(row.value, 24) if row.present else "-"
    return [
        row.key,
        shown(row.official, 24) if row.in_official else "(absent)",
        row.attribute or "-",
        value,
        row.status,
        row.read_at or "-",
    ]


def render_text(report: ConfigReport) -> str:
    header = ["KEY", "OFFICIAL", "ATTRIBUTE", "VALUE", "STATUS", "READ AT"]
    cells = [header, *(_cell(row) for row in report.rows)]
    widths = [max(len(cell[i]) for cell in cells) for i in range(len(header) - 2)]
    lines = []
    for cell in cells:
        fixed = "  ".join(text.ljust(width) for text, width in zip(cell, widths, strict=False))
        lines.append(f"{fixed}  {cell[4]}  {cell[5]}".rstrip())
    lines.append("")
    for criterion in report.criteria:
        mark = "met  " if criterion.met else "UNMET"
        lines.append(f"{mark} {criterion.name}: {criterion.detail}")
    return "\n".join(lines)
