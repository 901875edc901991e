"""`gates claims check FILE`: every figure a PR text claims, backed by evidence or not."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from gates import exitcodes
from gates.echo import Output
from gates.engine.audit import run_audit
from gates.engine.inputs import AuditInputs
from gates.errors import GatesError
from gates.reporters.claims import check_claims


def claims_check(inputs: AuditInputs, path: Path, *, out: Output) -> int:
    """Exit 1 when any claim is unbacked."""
    as_json, echo = out.as_json, out.echo
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GatesError(f"cannot read: {exc}", file=path) from None
    claims = check_claims(text, run_audit(inputs))
    unbacked = [claim for claim in claims if not claim.backed]
    if as_json:
        echo(json.dumps([asdict(claim) for claim in claims], indent=2, ensure_ascii=False))
    else:
        lines = [f"{path}:{c.line}: unbacked {c.kind} claim: {c.text}" for c in unbacked]
        backed = len(claims) - len(unbacked)
        lines.append(f"{len(claims)} claim(s): {backed} backed, {len(unbacked)} unbacked")
        echo("\n".join(lines))
    return exitcodes.BLOCKED if unbacked else exitcodes.OK
