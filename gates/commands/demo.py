"""`gates demo`: the seed PR's story on the glm52-minimal example, in a temporary repository.

(a) The PR as it was: no pin, a lint edit in flight, manifests without a
`format` key, every receipt probe/0, `formal_alignment_steps = 0 / 100`.
(b) Pin the freeze, clean the tree, drop the stale bench manifest, re-run the
entrypoints under `gates run` (the Paddle side for real when paddle is
installed; a side that cannot run here keeps its recorded files, receipted
as they are), run the checkers, and audit again: which contracts discharge,
and why the rest do not.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from gates import exitcodes
from gates.commands import Echo
from gates.commands.check import check_determinism, check_loss
from gates.commands.checkpoint import check as check_checkpoint
from gates.commands.freeze import pin as pin_command
from gates.commands.run import RunRequest
from gates.commands.run import run as run_command
from gates.commands.steps import render_text as render_steps
from gates.engine import run_audit
from gates.receipts.create import ReceiptRequest, create_receipt
from gates.receipts.model import ArtifactKind, EvidenceClass, Framework
from gates.reporters import REPORTERS
from gates.resources import example_dir
from gates.workspace import Workspace, open_workspace

_IDENTITY = {
    "GIT_AUTHOR_NAME": "gates demo",
    "GIT_AUTHOR_EMAIL": "demo@gates.invalid",
    "GIT_COMMITTER_NAME": "gates demo",
    "GIT_COMMITTER_EMAIL": "demo@gates.invalid",
}
PROFILE = {
    "name": "minimum_complete",
    "mode": "optimizer",
    "device": "cpu",
    "dtype": "float32",
    "tp": "1",
    "pp": "1",
    "ep": "1",
    "etp": "1",
    "sp": "false",
    "world": "1",
}
REPEATS = "experiments/e053-moe-determinism/runs/paddle_det"
STALE_MANIFEST = "experiments/e055-acceptance-oracle-20260819/manifest.json"
RECORDED = [
    ("manifest.json", ArtifactKind.MANIFEST),
    ("env.json", ArtifactKind.ENV),
    ("loss.json", ArtifactKind.LOSS),
    ("raw_loss.jsonl", ArtifactKind.RAW_LOSS),
]


_CLOSING = (
    "\nThe freeze contract discharges and every receipt is formal. The manifest contract"
    " discharges once every side has run under `gates run` (a side that could not run here"
    " keeps its old manifest without `format`). The acceptance oracle stays discharging: its"
    " schema half holds on both sides, but torch and paddle losses are bit-identical only for"
    " the first steps. The tensor inventory explains every naming and layout difference by a"
    " rule and leaves the five MTP indexer tensors as structural. The verdict stays blocked:"
    " it never turns to pass on missing evidence."
)


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(root), *args],
        check=True,
        capture_output=True,
        env={**os.environ, **_IDENTITY},
    )


def _receipt(
    workspace: Workspace, kind: ArtifactKind, subjects: tuple[str, ...], framework: Framework | None
) -> str:
    request = ReceiptRequest(
        kind=kind,
        subjects=subjects,
        framework=framework,
        profile=PROFILE,
        requested_class=EvidenceClass.FORMAL,
        overwrite=True,
    )
    receipt, _ = create_receipt(workspace, request)
    return f"{receipt.evidence_class.value}/{receipt.formal_weight}"


def _receipt_recorded(workspace: Workspace, side: str, echo: Echo) -> None:
    stamps = [
        f"{name} {_receipt(workspace, kind, (f'results/{side}/{name}',), Framework(side))}"
        for name, kind in RECORDED
    ]
    echo(f"  results/{side} (recorded run): " + ", ".join(stamps))


def _receipt_repeats(workspace: Workspace) -> None:
    for repeat in (1, 2, 3):
        path = f"{REPEATS}/repeat-{repeat}/raw_loss.jsonl"
        _receipt(workspace, ArtifactKind.RAW_LOSS, (path,), Framework.PADDLE)


def _can_run(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _run(
    workspace: Workspace, side: str, out: str | None, echo: Echo, outputs: bool = True
) -> None:
    declared = [(ArtifactKind.CHECKPOINT, f"results/{side}/checkpoint")] if outputs else []
    request = RunRequest(
        command=[sys.executable, f"model/train_{side}.py"],
        framework=Framework(side),
        probe=False,
        out=out,
        outputs=declared,
        profile=PROFILE,
    )
    lines: list[str] = []
    code = run_command(workspace, request, cwd=workspace.root, echo=lines.append)
    stamps = [line.split(": ")[-1] for line in lines if line.endswith(("/1", "/0"))]
    target = out or f"results/{side}"
    echo(f"  gates run {side} -> {target}: exit {code}, receipts {', '.join(stamps)}")


def _audit(workspace: Workspace, echo: Echo) -> None:
    result = run_audit(workspace)
    echo(REPORTERS["text"](result))
    echo("")
    echo(render_steps(result.alignment, 4))


def _state_of_the_pr(root: Path, echo: Echo) -> Workspace:
    echo("\n== (a) the PR as it was: no pin, a lint edit in flight, manifests without `format`")
    with (root / "model/train_paddle.py").open("a", encoding="utf-8") as handle:
        handle.write("# style: apply GLM lint formatting\n")
    workspace = open_workspace(root)
    _receipt_recorded(workspace, "torch", echo)
    _receipt_recorded(workspace, "paddle", echo)
    _receipt_repeats(workspace)
    _audit(workspace, echo)
    return workspace


def _rerun(workspace: Workspace, echo: Echo) -> None:
    root = workspace.root
    echo("\n== (b) pin the freeze, clean the tree, drop the stale bench manifest, re-run")
    pin_command(workspace, "HEAD", echo=echo)
    _git(root, "checkout", "--", "model")
    _git(root, "rm", "-q", STALE_MANIFEST)
    _git(root, "commit", "-q", "-m", "drop the e055 bench manifest: no format key, superseded")
    workspace = open_workspace(root)
    for side in ("torch", "paddle"):
        if _can_run(side):
            _run(workspace, side, None, echo, outputs=side == "paddle")
        else:
            echo(f"  {side} is not installed here: its recorded run is receipted as it is")
            _receipt_recorded(workspace, side, echo)
            if side == "torch":
                checkpoint = ("results/torch/checkpoint/model.safetensors",)
                _receipt(workspace, ArtifactKind.CHECKPOINT, checkpoint, Framework.TORCH)
    if _can_run("paddle"):
        for repeat in (1, 2, 3):
            _run(workspace, "paddle", f"{REPEATS}/repeat-{repeat}", echo, outputs=False)
    else:
        _receipt_repeats(workspace)
    quiet: list[str] = []
    runs = tuple(f"{REPEATS}/repeat-{repeat}" for repeat in (1, 2, 3))
    check_determinism(
        workspace,
        runs,
        output="outputs/determinism_check.receipt.json",
        cwd=root,
        as_json=False,
        echo=quiet.append,
    )
    check_loss(
        workspace,
        "results/torch/loss.json",
        "results/paddle/loss.json",
        required_steps=100,
        bit_exact=True,
        output="experiments/e055-acceptance-oracle/checker_run.receipt.json",
        cwd=root,
        as_json=False,
        echo=quiet.append,
    )
    check_checkpoint(
        workspace,
        "results/paddle/checkpoint",
        against="results/torch/checkpoint",
        rules=None,
        shard_range=None,
        threads=None,
        output="outputs/checkpoint_check.receipt.json",
        cwd=root,
        as_json=False,
        echo=quiet.append,
    )
    echo("  checkers: gates check determinism, gates check loss, gates check checkpoint --against")
    _audit(workspace, echo)


def demo(*, keep: bool, echo: Echo) -> int:
    folder = Path(tempfile.mkdtemp(prefix="gates-demo-"))
    root = folder / "glm52-port"
    try:
        shutil.copytree(example_dir(), root, ignore=shutil.ignore_patterns("__pycache__"))
        _git(root, "init", "-q", "-b", "main")
        (root / ".gitignore").write_text(".gates/\n__pycache__/\n")
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", "glm: map official RoPE semantics")
        echo(f"== the glm52-minimal example, as a git repository in {root}")
        workspace = _state_of_the_pr(root, echo)
        _rerun(workspace, echo)
        echo(_CLOSING)
        return exitcodes.OK
    finally:
        if keep:
            echo(f"\n(workspace kept in {root})")
        else:
            shutil.rmtree(folder, ignore_errors=True)
