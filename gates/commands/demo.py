"""`gates demo`: the whole story on a small workspace built on the fly in a temporary folder.

A real git repository, real receipts and real audits: blocked while no pin is
set and the tree is dirty, then pinned, cleaned and re-run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from gates import exitcodes
from gates.commands import Echo
from gates.commands.freeze import pin as pin_command
from gates.commands.init import init as init_command
from gates.engine import AuditResult, run_audit
from gates.receipts.create import ReceiptRequest, create_receipt
from gates.receipts.model import ArtifactKind, EvidenceClass, Framework
from gates.reporters import REPORTERS
from gates.workspace import Workspace, open_workspace

_IDENTITY = {
    "GIT_AUTHOR_NAME": "gates demo",
    "GIT_AUTHOR_EMAIL": "demo@gates.invalid",
    "GIT_COMMITTER_NAME": "gates demo",
    "GIT_COMMITTER_EMAIL": "demo@gates.invalid",
}

_SOURCE = {
    "paddleformers/glm_moe_dsa/modeling.py": "def forward(hidden):\n    return hidden\n",
    "paddleformers/glm_moe_dsa/configuration.py": "ROPE_INTERLEAVE = True\n",
    ".gitignore": ".gates/\n",
}

_PROFILE = {
    "name": "minimum_complete",
    "mode": "optimizer",
    "device": "cuda",
    "dtype": "bfloat16",
    "tp": "2",
    "pp": "2",
    "ep": "1",
    "etp": "1",
    "sp": "true",
    "world": "4",
}


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(root), *args],
        check=True,
        capture_output=True,
        env={**os.environ, **_IDENTITY},
    )


def _write(root: Path, relpath: str, text: str) -> None:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _record_losses(workspace: Workspace, echo: Echo) -> None:
    for framework, first_loss in (("torch", 11.821396827697754), ("paddle", 11.811029434204102)):
        relpath = f"results/{framework}/loss.json"
        losses = [first_loss - step * 0.015625 for step in range(100)]
        _write(workspace.root, relpath, json.dumps({"losses": losses}) + "\n")
        request = ReceiptRequest(
            kind=ArtifactKind.LOSS,
            subjects=(relpath,),
            framework=Framework(framework),
            profile=_PROFILE,
            requested_class=EvidenceClass.FORMAL,
            overwrite=True,
        )
        receipt, _ = create_receipt(workspace, request)
        echo(f"  receipt for {relpath}: {receipt.evidence_class.value}/{receipt.formal_weight}")


def _show(result: AuditResult, echo: Echo) -> None:
    echo(REPORTERS["text"](result))


def demo(*, keep: bool, echo: Echo) -> int:
    folder = Path(tempfile.mkdtemp(prefix="gates-demo-"))
    root = folder / "glm52-port"
    try:
        root.mkdir()
        _git(root, "init", "-q", "-b", "main")
        for relpath, text in _SOURCE.items():
            _write(root, relpath, text)
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", "glm: map official RoPE semantics")
        echo(f"== a GLM-5.2 port workspace in {root}")
        init_command(root, pin=None, force=False, echo=echo)

        echo("\n== (a) the state of the seed PR: no pin, a lint edit in flight")
        _write(
            root,
            "paddleformers/glm_moe_dsa/modeling.py",
            "def forward(hidden):\n    return hidden  # lint\n",
        )
        workspace = open_workspace(root)
        _record_losses(workspace, echo)
        _show(run_audit(workspace), echo)

        echo("\n== (b) pin the source freeze, clean the tree, re-run the entrypoints")
        pin_command(workspace, "HEAD", echo=echo)
        _git(root, "checkout", "--", ".")
        workspace = open_workspace(root)
        _record_losses(workspace, echo)
        result = run_audit(workspace)
        _show(result, echo)
        echo(
            "\nThe freeze contract is discharged and the receipts are formal. The other"
            " contracts stay blocked until their evaluators and evidence exist: the"
            " verdict never turns to pass on missing evidence."
        )
        return exitcodes.OK
    finally:
        if keep:
            echo(f"\n(workspace kept in {root})")
        else:
            shutil.rmtree(folder, ignore_errors=True)
