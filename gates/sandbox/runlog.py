"""A launched child's stderr: every byte into the run log, third-party warnings kept out of
the terminal.

A Python warning is printed as `FILE:LINE: CategoryWarning: message` followed by
indented source lines. When FILE is outside the workspace (a library such as
Paddle, e.g. its "No ccache found" UserWarning) the warning goes only to the
log; everything else the child writes to stderr is passed on as it arrives.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import IO

_WARNING = re.compile(rb"^(?P<file>.+?):\d+: (?:\w+\.)*\w*Warning: ")


class StderrTee:
    """Reads a child's stderr in a thread: all to ``log``, the rest to ``terminal``."""

    def __init__(self, source: IO[bytes], log: Path, terminal: IO[str], workspace: Path) -> None:
        self.source = source
        self.log = log
        self.terminal = terminal
        self.workspace = str(workspace.resolve()).encode()
        self.held_back = 0
        self._thread = threading.Thread(target=self._pump, name="gates-run-stderr", daemon=True)
        self._thread.start()

    def _third_party(self, line: bytes) -> bool:
        match = _WARNING.match(line)
        if match is None:
            return False
        file = match.group("file")
        return file.startswith(b"/") and not file.startswith(self.workspace + b"/")

    def _pump(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        in_warning = False
        with self.log.open("ab") as log:
            for line in iter(self.source.readline, b""):
                log.write(line)
                log.flush()
                if self._third_party(line):
                    in_warning = True
                    self.held_back += 1
                    continue
                if in_warning and line[:1] in (b" ", b"\t"):
                    continue  # the warning's source line
                in_warning = False
                self.terminal.write(line.decode("utf-8", "replace"))
                self.terminal.flush()

    def join(self, timeout: float = 10.0) -> bool:
        """Wait for the end of the child's stderr; False when a process it left behind still
        holds the pipe after ``timeout`` seconds (the thread keeps logging in the background)."""
        self._thread.join(timeout)
        return not self._thread.is_alive()
