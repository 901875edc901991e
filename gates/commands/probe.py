"""`gates probe consumed ENTRY`: which named tensors the entry's forward consumes; the
output written beside its receipt."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gates.checkers.outputs import write_checker_output
from gates.core import exitcodes
from gates.core.echo import Output
from gates.core.errors import GatesError
from gates.core.json_writer import indented_json
from gates.core.paths import resolve_inside, to_workspace_relpath
from gates.engine.inputs import AuditInputs
from gates.receipts.model import ArtifactKind, Receipt
from gates.sandbox import Request as SandboxRequest
from gates.sandbox import killed_by, prepared
from gates.tensors.probe import PROBE_FORMAT, Finding

WORKER = Path(__file__).resolve().parent.parent / "tensors" / "probe_worker.py"


def _stderr_tail(stderr: bytes, lines: int = 5) -> str:
    """The last lines a process wrote to stderr, each as a terminal would show it last (a
    progress bar redrawn with carriage returns is one line, its final state)."""
    shown = [
        line.rsplit("\r", 1)[-1].strip() for line in stderr.decode("utf-8", "replace").splitlines()
    ]
    return " | ".join([line for line in shown if line][-lines:])[-600:]


def _no_result(code: int, stderr: bytes) -> str:
    """Why a probe that wrote no result ended: the signal that killed it, or its exit
    status, and the last lines of its stderr."""
    signal_number = killed_by(code)
    if signal_number is not None:
        try:
            name = signal.Signals(signal_number).name
        except ValueError:
            name = f"signal {signal_number}"
        why = f"killed by {name} ({signal_number})"
    else:
        why = f"exit status {code}"
    tail = _stderr_tail(stderr)
    return f"the probe ended without a result: {why}" + (
        f"; its stderr ended: {tail}" if tail else ""
    )


def _sandboxed_probe(
    audit: AuditInputs, path: Path, function: str, shown: str, names: tuple[str, ...]
) -> tuple[bool, list[Finding], dict[str, object]]:
    """The probe, run in the sandbox on the commit under audit: the entry is PR code."""
    workspace, host = audit.workspace, audit.sandbox_host
    found = host.support()
    if found.mechanism is None:
        raise GatesError(f"the probe's entry was not run: no sandbox can start: {found.reason}")
    committed = subprocess.run(
        ["git", "-C", str(workspace.root), "cat-file", "-e", f"HEAD:{shown}"],
        capture_output=True,
        check=False,
    )
    if committed.returncode != 0:
        raise GatesError(
            "not in the commit under audit (HEAD): the probe runs the committed entry",
            file=shown,
            hint="commit it, then probe again",
        )
    with tempfile.TemporaryDirectory(prefix="gates-probe-") as tmp:
        folder = Path(tmp)
        request = {
            "path": str(path),
            "function": function,
            "shown": shown,
            "names": list(names),
            "root": str(workspace.root),
            "result": str(folder / "result.json"),
        }
        (folder / "request.json").write_text(json.dumps(request), encoding="utf-8")
        inside = SandboxRequest(
            root=workspace.root,
            commit="HEAD",
            excluded=workspace.config.evidence.locations,
            command=[sys.executable, "-P", str(WORKER), str(folder / "request.json")],
            cwd=path.parent,
            output_at=folder,
            output=folder,
            protocol={},
            host=host,
            writable_copies=workspace.config.sandbox.writable_copies,
        )
        with prepared(found, inside) as ready:
            done = subprocess.run(ready.argv, env=ready.env, capture_output=True, check=False)
        result_file = folder / "result.json"
        if not result_file.is_file():
            raise GatesError(_no_result(done.returncode, done.stderr), file=shown)
        result = json.loads(result_file.read_text(encoding="utf-8"))
    if "error" in result:
        raise GatesError(str(result["error"]), file=shown)
    findings = [Finding(n, bool(c), str(d), tuple(s)) for n, c, d, s in result["findings"]]
    return bool(result["repeatable"]), findings, dict(result.get("configuration", {}))


@dataclass(frozen=True)
class Probed:
    """What `gates probe consumed` found and wrote: the output document (which tensors the
    forward consumed, and whether the probe was repeatable), its receipt and path."""

    document: dict[str, object]
    receipt: Receipt
    artifact: str

    @property
    def repeatable(self) -> bool:
        return self.document["repeatable"] is True


def render_text(probed: Probed) -> str:
    receipt = probed.receipt
    tensors: list[dict[str, object]] = probed.document["tensors"]  # type: ignore[assignment]
    lines = [f"repeatable={json.dumps(probed.repeatable)}"]
    configuration = probed.document.get("configuration")
    if isinstance(configuration, dict) and configuration:
        lines.append(
            "configuration: " + ", ".join(f"{k}={json.dumps(v)}" for k, v in configuration.items())
        )
    lines += [f"{t['name']}: {'consumed' if t['consumed'] else 'not consumed'}" for t in tensors]
    lines.append(
        f"wrote {probed.artifact} ({receipt.evidence_class.value}/{receipt.formal_weight} "
        f"{receipt.id})"
    )
    lines += [f"  probe because: {reason}" for reason in receipt.stamp_reasons]
    return "\n".join(lines)


def render_json(probed: Probed) -> str:
    written = {**probed.document, "output": probed.artifact, "receipt": probed.receipt.id}
    return indented_json(written)


#: --format -> the renderer of a Probed
RENDERERS: dict[str, Callable[[Probed], str]] = {"text": render_text, "json": render_json}


def consumed(
    audit: AuditInputs,
    entry: str,
    names: tuple[str, ...],
    *,
    output: str,
    cwd: Path,
    out: Output,
) -> int:
    """Exit 0 when the probe was repeatable (whatever it found), 1 when it was not."""
    probed = probe_consumed(audit, entry, names, output=output, cwd=cwd)
    out.render(RENDERERS, probed)
    return exitcodes.OK if probed.repeatable else exitcodes.BLOCKED


def probe_consumed(
    audit: AuditInputs, entry: str, names: tuple[str, ...], *, output: str, cwd: Path
) -> Probed:
    """The probe run in the sandbox, its output and receipt written."""
    workspace = audit.workspace
    file_part, sep, function = entry.rpartition(":")
    if not sep or not file_part or not function:
        raise GatesError(f"{entry!r}: give the entry point as path/to/file.py:function")
    relpath = to_workspace_relpath(workspace.root, file_part, cwd)
    path = resolve_inside(workspace.root, relpath, what="probe entry point")
    if not path.is_file():
        raise GatesError("no such file", file=relpath)
    repeatable, findings, configuration = _sandboxed_probe(audit, path, function, relpath, names)
    document: dict[str, object] = {
        "format": PROBE_FORMAT,
        "mode": "consumed",
        "entry": f"{relpath}:{function}",
        "entry_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "repeatable": repeatable,
        # every tensor the entry's model holds was probed (no --tensor given): a name the
        # list lacks is one the model never builds
        "every_tensor": not names,
        "configuration": configuration,
        "tensors": [
            {"name": f.name, "consumed": f.consumed, "dtype": f.dtype, "shape": list(f.shape)}
            for f in findings
        ],
    }
    receipt, artifact = write_checker_output(audit, output, ArtifactKind.TENSOR_CHECK, document, [])
    return Probed(document, receipt, artifact)
