"""Check `config_semantics`: the official config.json as the candidate's config class consumes it.

Params: the official config (workspace path, `sha256`, upstream `revision`),
the candidate `class` (`module:Class`, from `source` in the workspace or an
installed package), the `env` files of both sides, and the semantics table
(`keys`, `implied`). The class is imported in a subprocess (gates.configsem.probe).
"""

from __future__ import annotations

from typing import Any

from gates.configsem.check import Candidate, env_agreement, run_check
from gates.configsem.envfiles import read_env_files
from gates.configsem.official import read_official
from gates.configsem.probe import Tree
from gates.configsem.table import parse_table
from gates.contracts.model import EvaluationContext, EvaluationError
from gates.core.criteria import Criterion
from gates.core.errors import GatesError
from gates.core.paths import resolve_inside

CHECK = "config_semantics"
_AFTER_OFFICIAL = (
    "table_covers_official",
    "candidate_loads",
    "meaning_held",
    "consumed",
    "round_trips",
)


def evaluate(context: EvaluationContext, raw: dict[str, Any]) -> list[Criterion]:
    root = context.workspace.root
    try:
        table = parse_table(raw, source="params")
        if table.class_path is None:
            raise EvaluationError("params.class: name the candidate config class, module:Class")
        if not table.env:
            raise EvaluationError(
                "params.env: name the env.json of each side (revision and model_config_sha256)"
            )
        official_path = resolve_inside(root, table.official, what="params.official")
        source = resolve_inside(root, table.source, what="params.source") if table.source else None
    except GatesError as exc:
        raise EvaluationError(exc.message) from None
    if source is not None and not source.is_dir():
        raise EvaluationError(f"params.source: {table.source} is not a folder of the workspace")
    try:
        official = read_official(official_path, table.official)
    except GatesError as exc:
        unusable = f"not evaluated: {table.official} is unusable"
        files = (table.official,)
        return [
            Criterion("official_pinned", False, exc.one_line(), files=files, key="official"),
            *(Criterion(name, False, unusable, files=files) for name in _AFTER_OFFICIAL),
            env_agreement(table, None, read_env_files(root, table.env)),
        ]
    tree = Tree(root, context.workspace.config.evidence.locations, context.sandbox)
    candidate = Candidate(table.class_path, source, table.source or "installed", tree)
    env = read_env_files(root, table.env)
    return list(run_check(table, official, candidate, env=env).criteria)
