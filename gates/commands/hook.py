"""`gates hook install|uninstall`: a plain git hook that runs `gates audit`, for teams
that do not use the pre-commit framework."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import gates
from gates.core import exitcodes, git
from gates.core.echo import Echo
from gates.core.errors import GatesError
from gates.workspace.repository import Workspace

MARKER = "# gates-hook: installed by `gates hook install`; `gates hook uninstall` removes it."
BACKUP_SUFFIX = ".pre-gates"


def hook_script(python: str) -> str:
    """The hook: this interpreter, by absolute path, in isolated mode (-I: no current folder
    or script folder on sys.path, no PYTHON* variables, no user site), so a `gates/`
    package or `gates/__main__.py` committed in the audited repository is never imported in
    place of the installed gates."""
    return f'#!/bin/sh\n{MARKER}\nexec "{python}" -I -m gates audit\n'


def _installed_gates(python: str) -> str | None:
    """Where ``python -I`` imports gates from, run from an empty folder (None: it cannot)."""
    with tempfile.TemporaryDirectory() as empty:
        done = subprocess.run(
            [python, "-I", "-c", "import gates, sys; sys.stdout.write(gates.__file__ or '')"],
            cwd=empty,
            capture_output=True,
            text=True,
            check=False,
        )
    return done.stdout if done.returncode == 0 and done.stdout else None


def _check_interpreter(python: str) -> None:
    if not Path(python).is_absolute():
        raise GatesError(
            f"the interpreter running gates has no absolute path ({python!r})",
            hint="run `gates hook install` with the installed gates's own python",
        )
    ours = str(Path(gates.__file__).resolve())
    found = _installed_gates(python)
    if found is None or str(Path(found).resolve()) != ours:
        raise GatesError(
            f"{python} -I does not import this gates ({ours}; it finds {found or 'none'}), "
            "so the hook could not run it without the current folder on sys.path",
            hint="install gates into that environment (pip install ...), not via PYTHONPATH "
            "or the current folder, then install the hook again",
        )


def hook_path(workspace: Workspace, stage: str) -> Path:
    hooks = git.run_git(workspace.root, "rev-parse", "--git-path", "hooks").decode().strip()
    folder = Path(hooks) if Path(hooks).is_absolute() else workspace.root / hooks
    return folder / stage


def _ours(path: Path) -> bool:
    try:
        return MARKER in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


@dataclass(frozen=True)
class Installed:
    """What `gates hook install` did: the hook's path and stage, and what the audit it runs
    still lacks (a protected policy ref, trust anchors)."""

    path: Path
    stage: str
    unprotected: bool
    no_anchors: bool


def render_installed(done: Installed) -> str:
    lines = [f"installed {done.path}: runs `gates audit` at {done.stage}"]
    if done.unprotected:
        lines.append(
            "note: gates.toml [policy] ref is empty, so this audit is judged by the worktree's "
            'own policy (UNPROTECTED): set it, e.g. ref = "origin/main" (docs/trust.md)'
        )
    if done.no_anchors:
        lines.append(
            "note: no trust anchors ([trust] ref + path, or GATES_TRUST): nothing can be "
            "formal until they are set (docs/trust.md)"
        )
    return "\n".join(lines)


def install(workspace: Workspace, stage: str, *, force: bool, echo: Echo) -> int:
    """Install the hook (exit 0)."""
    echo(render_installed(installed(workspace, stage, force=force)))
    return exitcodes.OK


def installed(workspace: Workspace, stage: str, *, force: bool) -> Installed:
    """The hook written (a foreign one kept aside with ``force``)."""
    _check_interpreter(sys.executable)
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
    config = workspace.config
    no_anchors = not (config.trust.ref or os.environ.get("GATES_TRUST"))
    return Installed(path, stage, not config.policy.ref, no_anchors)


@dataclass(frozen=True)
class Uninstalled:
    """What `gates hook uninstall` did: nothing (no hook), removed ours, or removed ours and
    restored the hook it had kept aside."""

    path: Path
    stage: str
    outcome: Literal["none", "removed", "restored"]


def render_uninstalled(done: Uninstalled) -> str:
    if done.outcome == "none":
        return f"no {done.stage} hook installed"
    if done.outcome == "restored":
        return f"removed the gates hook and restored {done.path}"
    return f"removed {done.path}"


def uninstall(workspace: Workspace, stage: str, *, echo: Echo) -> int:
    """Remove the hook gates installed (exit 0)."""
    echo(render_uninstalled(uninstalled(workspace, stage)))
    return exitcodes.OK


def uninstalled(workspace: Workspace, stage: str) -> Uninstalled:
    """Our hook removed, and one kept aside restored; a foreign hook is an error."""
    path = hook_path(workspace, stage)
    if not path.exists():
        return Uninstalled(path, stage, "none")
    if not _ours(path):
        raise GatesError("this hook was not installed by gates; leaving it", file=path)
    path.unlink()
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    if backup.exists():
        backup.replace(path)
        return Uninstalled(path, stage, "restored")
    return Uninstalled(path, stage, "removed")
