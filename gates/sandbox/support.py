"""Which sandbox this host can start: bubblewrap, else util-linux `unshare`, else none.

Each is tried for real once per process (a namespace that cannot be created is
found here, not in the middle of a run). GATES_SANDBOX (the invocation's `sandbox`)
chooses one (`bwrap`, `unshare`); the default `auto` prefers bubblewrap.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from typing import Literal

from pydantic import BaseModel, ConfigDict

Mechanism = Literal["bwrap", "unshare"]
FIX = (
    "install bubblewrap (apt-get install bubblewrap), or enable unprivileged user namespaces "
    "(sysctl kernel.unprivileged_userns_clone=1), or pass --no-sandbox for a probe run"
)


class SandboxSupport(BaseModel):
    """The sandbox gates can start here (mechanism None: none), and why not, with the fix."""

    model_config = ConfigDict(frozen=True)
    mechanism: Mechanism | None
    version: str = ""
    executable: str = ""
    reason: str = ""


def _version(executable: str) -> str:
    done = subprocess.run([executable, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip().splitlines()[0] if done.stdout.strip() else "unknown"


def _trial(argv: list[str]) -> str:
    """'' when the sandbox starts and runs `true`, else the first line of its complaint."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return ""
    return (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]


@functools.cache
def _probe(mechanism: Mechanism, path: str) -> SandboxSupport:
    executable = shutil.which(mechanism, path=path)
    if executable is None:
        return SandboxSupport(mechanism=None, reason=f"{mechanism} is not installed (not on PATH)")
    true = shutil.which("true", path=path) or "/bin/true"
    if mechanism == "bwrap":
        argv = [executable, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", true]
    else:
        argv = [executable, "--user", "--map-root-user", "--mount", "--pid", "--net", "--fork"]
        argv += ["--kill-child", true]
    failed = _trial(argv)
    if failed:
        return SandboxSupport(mechanism=None, reason=f"{mechanism} cannot start here: {failed}")
    return SandboxSupport(mechanism=mechanism, version=_version(executable), executable=executable)


def support(chosen: str, path: str) -> SandboxSupport:
    """The sandbox this host can start now, of the mechanism ``chosen`` (GATES_SANDBOX:
    auto, bwrap or unshare) found on ``path`` (the PATH gates was started with);
    ``reason`` names why none, with the fix."""
    if chosen not in ("auto", "bwrap", "unshare"):
        return SandboxSupport(
            mechanism=None,
            reason=f"GATES_SANDBOX={chosen} is not one of auto, bwrap, unshare; {FIX}",
        )
    order: list[Mechanism] = ["bwrap", "unshare"] if chosen == "auto" else [chosen]  # type: ignore[list-item]
    reasons = []
    for mechanism in order:
        found = _probe(mechanism, path)
        if found.mechanism is not None:
            return found
        reasons.append(found.reason)
    return SandboxSupport(mechanism=None, reason=f"no sandbox: {'; '.join(reasons)}; {FIX}")
