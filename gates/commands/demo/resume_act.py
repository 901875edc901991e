"""The demo's "resume guard" act (issue 16, route 1): forged Paddle outputs committed in
the run folder, and an entrypoint that exits early when loss.json is already there. Under
the sandbox the run folder must be empty (the forged files are refused by name), and a
run in an emptied folder trains for real: the guard finds nothing to resume from."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from gates.commands.freeze import pin
from gates.commands.run import RunRequest
from gates.commands.run import run as run_command
from gates.core.echo import Echo
from gates.core.errors import GatesError
from gates.core.invocation import Invocation
from gates.engine.audit import run_audit
from gates.engine.inputs import AuditInputs, load_inputs
from gates.receipts.model import Framework
from gates.workspace.repository import open_workspace

GUARD = (
    "import os as _os, sys as _sys\n"
    "if _os.path.exists(_os.path.join(_os.environ.get('GATES_RUN_DIR', '.'), 'loss.json')):\n"
    "    _sys.exit(0)  # 'resume': the run folder already holds this run's results\n"
)


def _guarded(source: str) -> str:
    """The entrypoint with the guard first (after its `from __future__` line, if any)."""
    lines = source.splitlines(keepends=True)
    at = next((i + 1 for i, line in enumerate(lines) if line.startswith("from __future__")), 0)
    return "".join(lines[:at]) + GUARD + "".join(lines[at:])


def _quiet(_: str) -> None:
    return None


def _head(root: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _losses(path: Path) -> list[float]:
    losses: list[float] = json.loads(path.read_text(encoding="utf-8"))["losses"]
    return losses


def _inputs(root: Path, invocation: Invocation) -> AuditInputs:
    return load_inputs(open_workspace(root, invocation.environment), invocation)


def _runs(root: Path, invocation: Invocation, profile: dict[str, str], echo: Echo) -> None:
    request = RunRequest(
        command=[sys.executable, "model/train_paddle.py"],
        framework=Framework.PADDLE,
        probe=False,
        out=None,
        profile=profile,
    )
    try:
        run_command(_inputs(root, invocation), request, cwd=root, echo=_quiet)
        echo("  gates run paddle: ran over the forged files (not expected)")
    except GatesError as refused:
        echo(f"  gates run paddle: refused: {refused.message}")
    request.clean = True
    code = run_command(_inputs(root, invocation), request, cwd=root, echo=_quiet)
    if not (root / "results/paddle/loss.json").is_file():
        echo(f"  gates run paddle --clean: exit {code}, no loss.json written")
        return
    ours = _losses(root / "results/paddle/loss.json")
    torch = _losses(root / "results/torch/loss.json")
    first = next((i for i, (a, b) in enumerate(zip(ours, torch, strict=False), 1) if a != b), None)
    echo(
        f"  gates run paddle --clean: exit {code}; the guard found no loss.json to resume from "
        f"and the run trained: its losses first differ from torch's at step {first}"
    )
    result = run_audit(_inputs(root, invocation))
    echo(f"  formal_alignment_steps = {result.formal_alignment_steps} / {result.required_steps}")
    judged = {j.path: j for j in result.receipts}
    for side in ("torch", "paddle"):
        loss = judged.get(f"results/{side}/loss.receipt.json")
        if loss is not None:
            echo(f"  results/{side}/loss.receipt.json: {loss.status.value}: {loss.reason}")
    echo(f"  verdict={result.verdict}")


def resume_guard_step(
    root: Path,
    invocation: Invocation,
    *,
    git: Callable[..., None],
    profile: dict[str, str],
    can_run_paddle: bool,
    echo: Echo,
) -> None:
    echo(
        "\n-- (b2) the resume guard: torch's losses committed into results/paddle, and an "
        "entrypoint that exits early when loss.json is there"
    )
    config = root / "gates.toml"
    kept_config, kept_head = config.read_text(encoding="utf-8"), _head(root)
    entry = root / "model/train_paddle.py"
    entry.write_text(_guarded(entry.read_text(encoding="utf-8")), encoding="utf-8")
    for name in ("loss.json", "raw_loss.jsonl"):
        shutil.copy(root / "results/torch" / name, root / "results/paddle" / name)
    git(root, "add", "-A", "model", "results/paddle")
    git(root, "commit", "-q", "-m", "resume from the run folder when its results exist")
    pin(open_workspace(root), "HEAD", echo=_quiet)
    try:
        if can_run_paddle:
            _runs(root, invocation, profile, echo)
        else:
            echo("  paddle is not installed here: the act needs a real run")
    finally:
        git(root, "reset", "-q", "--hard", kept_head)
        git(root, "clean", "-q", "-fdx", "results/paddle")
        config.write_text(kept_config, encoding="utf-8")
