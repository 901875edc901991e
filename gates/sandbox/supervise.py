"""Supervising a launched process: start it, tee its stderr into the run log, pass SIGINT
and SIGTERM on to it, wait for it, and say how it ended.

`gates run` launches the entrypoint through `launch` (in the sandbox, whose launcher is the
child, or with --no-sandbox in the workspace); a limit on the run's wall-clock time, or
another launcher, belongs here, beside the signal forwarding.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType

from gates.receipts.run_stamp import Finished
from gates.sandbox.runlog import StderrTee
from gates.sandbox.session import killed_by


def _grandchildren(pid: int) -> list[int]:
    """The processes whose parent's parent is ``pid`` (under a sandbox: the command)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    children = {p for p, parent in parents.items() if parent == pid}
    return [p for p, parent in parents.items() if parent in children]


class Forwarder:
    """Passes SIGINT and SIGTERM on to the child and remembers that they came. Under a
    sandbox the child is the launcher: the signal goes to the command it started, which may
    then stop cleanly (the launcher itself would die and take the command with it)."""

    def __init__(self, child: subprocess.Popen[bytes], sandboxed: bool = False) -> None:
        self.child = child
        self.sandboxed = sandboxed
        self.received: list[str] = []
        self.previous = {
            sig: signal.signal(sig, self._forward) for sig in (signal.SIGINT, signal.SIGTERM)
        }

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signal.Signals(signum).name)
        if self.child.poll() is None:
            targets = _grandchildren(self.child.pid) if self.sandboxed else []
            for pid in targets:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signum)
            if not targets:
                self.child.send_signal(signum)

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def signal_name(code: int, sandboxed: bool) -> str | None:
    """The signal that ended a child with return code ``code`` (under a sandbox: its
    launcher's exit status says it), or None."""
    number = killed_by(code) if sandboxed else (-code if code < 0 else None)
    try:
        return signal.Signals(number).name if number else None
    except ValueError:
        return f"signal {number}"


def launch(
    command: list[str],
    env: Mapping[str, str],
    cwd: Path,
    run_id: str,
    *,
    log: Path,
    own_code: Path,
    sandboxed: bool = False,
) -> Finished:
    """Run the child to its end; its stderr goes to ``log``, and to ours except the warnings
    raised by code outside ``own_code`` (the workspace)."""
    started = time.time()
    child = subprocess.Popen(command, env=dict(env), cwd=cwd, stderr=subprocess.PIPE)
    assert child.stderr is not None  # noqa: S101  (stderr=PIPE above)
    tee = StderrTee(child.stderr, log, sys.stderr, own_code)
    forwarder = Forwarder(child, sandboxed)
    try:
        code = child.wait()
    finally:
        forwarder.restore()
        if tee.join():
            child.stderr.close()
    return Finished(
        run_id=run_id,
        exit_status=code if code >= 0 else 128 - code,
        signal=signal_name(code, sandboxed),
        interrupted_by=tuple(forwarder.received),
        started=started,
        duration=round(time.time() - started, 3),
    )
