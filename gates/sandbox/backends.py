"""The command line that starts a view under bubblewrap or under util-linux `unshare`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gates.sandbox.support import SandboxSupport
from gates.sandbox.view import View

ENTER = Path(__file__).with_name("enter.py")


def bwrap_argv(executable: str, view: View, command: list[str]) -> list[str]:
    argv = [executable, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv"]
    argv += ["--cap-drop", "ALL"]  # run by root, bwrap would keep every capability
    if view.network:
        argv.append("--share-net")
    # /proc read-only: run by root, bwrap leaves /proc/sys (core_pattern...) writable
    argv += ["--proc", "/proc", "--remount-ro", "/proc", "--dev", "/dev"]
    argv += ["--size", str(view.shm_bytes), "--tmpfs", "/dev/shm"]  # noqa: S108  (private)
    for folder in view.tmpfs:
        argv += ["--tmpfs", folder]
    for device in view.devices:
        argv += ["--dev-bind", device, device]
    for text, link in view.symlinks:
        argv += ["--symlink", text, link]
    for bind in view.binds:
        argv += ["--bind" if bind.writable else "--ro-bind", str(bind.source), str(bind.target)]
    for name, value in view.env.items():
        argv += ["--setenv", name, value]
    argv += ["--chdir", str(view.cwd), "--", *command]
    return argv


def unshare_argv(executable: str, view: View, command: list[str], new_root: Path) -> list[str]:
    """`unshare` makes the namespaces; gates/sandbox/enter.py (standard library only, run
    with -I -S) builds the view in them, drops every capability and starts the command."""
    spec = {
        "binds": [[str(b.source), str(b.target), b.writable] for b in view.binds],
        "symlinks": [list(pair) for pair in view.symlinks],
        "devices": list(view.devices),
        "tmpfs": list(view.tmpfs),
        "shm_bytes": view.shm_bytes,
        "cwd": str(view.cwd),
        "network": view.network,
        "command": command,
        "new_root": str(new_root),
    }
    argv = [executable, "--user", "--map-root-user", "--mount", "--pid", "--ipc", "--uts"]
    if not view.network:
        argv.append("--net")
    argv += ["--fork", "--kill-child", "--", sys.executable, "-I", "-S", str(ENTER)]
    return [*argv, json.dumps(spec)]


def sandbox_argv(found: SandboxSupport, view: View, command: list[str], scratch: Path) -> list[str]:
    """The launcher's argv; ``scratch`` is an empty folder of gates' own (unshare's root)."""
    if found.mechanism == "bwrap":
        return bwrap_argv(found.executable, view, command)
    return unshare_argv(found.executable, view, command, scratch)
