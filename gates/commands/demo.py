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
from gates.commands.steps import render_text as render_steps
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

_LINT_EDIT = "def forward(hidden):\n    return hidden  # lint\n"

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


_ENV = {
    "framework_version": "3.2.0",
    "device_name": "NVIDIA H800",
    "weights_loaded": True,
    "revision": "b4734de4facf877f85769a911abafc5283eab3d9",
    "model_config_sha256": "185f93ee" + "0" * 51 + "d859a",
}


def _losses(first: float) -> list[float]:
    return [first - step * 0.015625 for step in range(100)]


def _manifest(framework: str, *, with_format: bool) -> dict[str, object]:
    profile: dict[str, object] = {
        **_PROFILE,
        "tp": 2,
        "pp": 2,
        "ep": 1,
        "etp": 1,
        "sp": True,
        "world": 4,
    }
    manifest: dict[str, object] = {
        "run_id": f"{framework}-100",
        "entrypoint": f"{framework}_train.py",
        "framework": framework,
        "profile": profile,
    }
    return {"format": "gates.run-manifest/v1", **manifest} if with_format else manifest


def _record_run(workspace: Workspace, framework: str, first_loss: float, *, fixed: bool) -> str:
    """What one entrypoint run leaves: manifest, env, losses, and a receipt for each."""
    folder = f"results/{framework}"
    files = {
        "manifest.json": (ArtifactKind.MANIFEST, _manifest(framework, with_format=fixed)),
        "env.json": (ArtifactKind.ENV, {"framework": framework, **_ENV}),
        "loss.json": (ArtifactKind.LOSS, {"losses": _losses(first_loss)}),
    }
    stamps = []
    for name, (kind, document) in files.items():
        _write(workspace.root, f"{folder}/{name}", json.dumps(document) + "\n")
        request = ReceiptRequest(
            kind=kind,
            subjects=(f"{folder}/{name}",),
            framework=Framework(framework),
            profile=_PROFILE,
            requested_class=EvidenceClass.FORMAL,
            overwrite=True,
        )
        receipt, _ = create_receipt(workspace, request)
        stamps.append(f"{name} {receipt.evidence_class.value}/{receipt.formal_weight}")
    return f"  {folder}: " + ", ".join(stamps)


def _record_runs(workspace: Workspace, echo: Echo, *, fixed: bool) -> None:
    # The seed PR's step-1 pair: 11.821396827697754 (torch), 11.811029434204102 (paddle).
    echo(_record_run(workspace, "torch", 11.821396827697754, fixed=fixed))
    echo(_record_run(workspace, "paddle", 11.811029434204102, fixed=fixed))


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

        echo(
            "\n== (a) the state of the seed PR: no pin, a lint edit in flight,"
            " manifests without a format key"
        )
        _write(root, "paddleformers/glm_moe_dsa/modeling.py", _LINT_EDIT)
        workspace = open_workspace(root)
        _record_runs(workspace, echo, fixed=False)
        _show(run_audit(workspace), echo)

        echo("\n== (b) pin the source freeze, clean the tree, re-run the entrypoints")
        pin_command(workspace, "HEAD", echo=echo)
        _git(root, "checkout", "--", ".")
        workspace = open_workspace(root)
        _record_runs(workspace, echo, fixed=True)
        result = run_audit(workspace)
        _show(result, echo)
        echo("\n== gates steps (the release manager's number), first 3 ledger rows")
        echo(render_steps(result.alignment, 3))
        echo(
            "\nThe freeze and manifest contracts discharge and every receipt is formal."
            " The acceptance oracle is discharging: its schema half is met on both"
            " sides, its equality half is not, because the losses differ from step 1."
            " The verdict stays blocked; it never turns to pass on missing evidence."
        )
        return exitcodes.OK
    finally:
        if keep:
            echo(f"\n(workspace kept in {root})")
        else:
            shutil.rmtree(folder, ignore_errors=True)
