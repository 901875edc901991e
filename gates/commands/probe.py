"""`gates probe consumed ENTRY`: which named tensors the entry's forward consumes; the
output written beside its receipt."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from gates import exitcodes
from gates.commands import Echo
from gates.commands.outputs import write_checker_output
from gates.errors import GatesError
from gates.paths import resolve_inside, to_workspace_relpath
from gates.receipts.model import ArtifactKind
from gates.tensors.probe import PROBE_FORMAT, load_entry, probe
from gates.workspace import Workspace


def consumed(
    workspace: Workspace,
    entry: str,
    names: tuple[str, ...],
    *,
    output: str,
    cwd: Path,
    as_json: bool,
    echo: Echo,
) -> int:
    """Exit 0 when the probe was repeatable (whatever it found), 1 when it was not."""
    file_part, sep, function = entry.rpartition(":")
    if not sep or not file_part or not function:
        raise GatesError(f"{entry!r}: give the entry point as path/to/file.py:function")
    relpath = to_workspace_relpath(workspace.root, file_part, cwd)
    path = resolve_inside(workspace.root, relpath, what="probe entry point")
    if not path.is_file():
        raise GatesError("no such file", file=relpath)
    forward, tensors = load_entry(path, function, relpath)
    chosen = names or tuple(sorted(tensors))
    repeatable, findings = probe(forward, tensors, chosen)
    document: dict[str, object] = {
        "format": PROBE_FORMAT,
        "mode": "consumed",
        "entry": f"{relpath}:{function}",
        "entry_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "repeatable": repeatable,
        "tensors": [
            {"name": f.name, "consumed": f.consumed, "dtype": f.dtype, "shape": list(f.shape)}
            for f in findings
        ],
    }
    receipt, artifact = write_checker_output(
        workspace, output, ArtifactKind.TENSOR_CHECK, document, []
    )
    if as_json:
        echo(json.dumps({**document, "output": artifact, "receipt": receipt.id}, indent=2))
    else:
        lines = [f"repeatable={json.dumps(repeatable)}"]
        lines += [f"{f.name}: {'consumed' if f.consumed else 'not consumed'}" for f in findings]
        lines.append(
            f"wrote {artifact} ({receipt.evidence_class.value}/{receipt.formal_weight} "
            f"{receipt.id})"
        )
        lines += [f"  probe because: {reason}" for reason in receipt.stamp_reasons]
        echo("\n".join(lines))
    return exitcodes.OK if repeatable else exitcodes.BLOCKED
