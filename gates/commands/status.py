"""`gates status`: the PR status block, printed or written into a PR body in place."""

from __future__ import annotations

import json
from pathlib import Path

from gates import exitcodes
from gates.atomic import write_bytes_atomic
from gates.echo import Output
from gates.engine.audit import AuditResult, run_audit
from gates.engine.inputs import AuditInputs
from gates.errors import GatesError
from gates.outputs.read import read_outputs
from gates.reporters import status_md
from gates.reporters.json_report import audit_object


def status_object(result: AuditResult, lang: str) -> dict[str, object]:
    words = status_md.messages(lang)
    return {
        **audit_object(result),
        "unverified": status_md.unverified(result, words),
        "not_claimed": status_md.not_claimed(result, words),
    }


def update_pr_body(path: Path, block: str) -> bool:
    """Replace the block in ``path`` atomically; True when the file changed."""
    try:
        body = path.read_bytes().decode("utf-8")  # bytes: keep the body's line endings
    except FileNotFoundError:
        body = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise GatesError(f"cannot read the PR body: {exc}", file=path) from None
    updated = status_md.replace_block(body, block)
    if updated == body:
        return False
    write_bytes_atomic(path, updated.encode("utf-8"))
    return True


def status(inputs: AuditInputs, *, lang: str, pr_body: Path | None, out: Output) -> int:
    """Exit 0 when the verdict is pass, else 1 (``out.format``: markdown or json)."""
    result = run_audit(inputs)
    if out.as_json:
        out.echo(json.dumps(status_object(result, lang), indent=2, ensure_ascii=False))
    else:
        outputs = read_outputs(result.root, status_md.shown_evidence(result))
        block = status_md.render(result, lang, outputs=outputs)
        if pr_body is None:
            out.echo(block)
        else:
            changed = update_pr_body(pr_body, block)
            out.echo(f"{pr_body}: status block {'updated' if changed else 'unchanged'}")
    return exitcodes.OK if result.verdict == "pass" else exitcodes.BLOCKED
