"""Check `manifest_format_key`: every run manifest carries a supported `format`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from gates.contracts.model import EvaluationContext, EvaluationError
from gates.core.criteria import Criterion
from gates.core.errors import UnsafePathError
from gates.core.paths import check_relpath
from gates.core.validation import first_error
from gates.receipts.provenance import check_manifests

CHECK = "manifest_format_key"


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    roots: tuple[str, ...] = ("results", "experiments")


def parse_params(raw: dict[str, Any]) -> Params:
    try:
        params = Params.model_validate(raw)
        for root in params.roots:
            check_relpath(root, what="params.roots entry")
    except ValidationError as exc:
        raise EvaluationError(f"bad params: {first_error(exc).message}") from None
    except UnsafePathError as exc:
        raise EvaluationError(exc.message) from None
    return params


def evaluate(context: EvaluationContext, raw: dict[str, Any]) -> list[Criterion]:
    """One criterion per manifest found, plus one that at least one exists."""
    params = parse_params(raw)
    findings = check_manifests(context.workspace.root, list(params.roots))
    where = ", ".join(f"{root}/" for root in params.roots)
    criteria = [
        Criterion(
            "manifests_found",
            bool(findings),
            f"{len(findings)} run manifest(s) under {where}"
            if findings
            else f"no manifest.json under {where}: no run can be traced",
        )
    ]
    criteria += [
        Criterion(
            f"format:{f.path}", f.error is None, f.error or "supported format", files=(f.path,)
        )
        for f in findings
    ]
    return criteria
