"""`gates hook install|uninstall`: a plain git hook that runs `gates audit`, for teams
that do not use the pre-commit framework."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from gates import exitcodes, git
from gates.commands import Echo
from gates.errors import GatesError
from gates.workspace import Workspace

MARKER = "# gates-hook: installed by `gates hook install`; `gates hook uninstall` removes it."
BACKUP_SUFFIX = ".pre-gates"


def hook_script(python: str) -> str:
    return f'#!/bin/sh\n{MARKER}\nexec "{python}" -m gates audit\n'


def hook_path(workspace: Workspace, stage: str) -> Path:
    hooks = git.run_git(workspace.root, "rev-parse", "--git-path", "hooks").decode().strip()
    folder = Path(hooks) if Path(hooks).is_absolute() else workspace.root / hooks
    return folder / stage


def _ours(path: Path) -> bool:
    try:
        return MARKER in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def install(workspace: Workspace, stage: str, *, force: bool, echo: Echo) -> int:
    path = hook_path(workspace, stage)
    if path.exists() and not _ours(path):
        if not force:
            raise GatesError(
                "a hook that gates did not write is already there",
                file=path,
                hint=f"pass --force to keep it as {path.name}{BACKUP_SUFFIX} and install ours",
            )
        path.replace(path.with_name(path.name + BACKUP_SUFFIX))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(hook_script(sys.executable), encoding="utf-8")
    path.chmod(0o755)
    echo(f"installed {path}: runs `gates audit` at {stage}")
    if not workspace.config.policy.ref:
        echo(
            "note: gates.toml [policy] ref is empty, so this audit is judged by the worktree's "
            'own policy (UNPROTECTED): set it, e.g. ref = "origin/main" (docs/trust.md)'
        )
    if not (workspace.config.trust.ref or os.environ.get("GATES_TRUST")):
        echo(
            "note: no trust anchors ([trust] ref + path, or GATES_TRUST): nothing can be "
            "formal until they are set (docs/trust.md)"
        )
    return exitcodes.OK


def uninstall(workspace: Workspace, stage: str, *, echo: Echo) -> int:
    path = hook_path(workspace, stage)
    if not path.exists():
        echo(f"no {stage} hook installed")
        return exitcodes.OK
    if not _ours(path):
        raise GatesError("this hook was not installed by gates; leaving it", file=path)
    path.unlink()
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    if backup.exists():
        backup.replace(path)
        echo(f"removed the gates hook and restored {path}")
    else:
        echo(f"removed {path}")
    return exitcodes.OK
