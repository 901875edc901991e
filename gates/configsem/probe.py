"""Loading the official config with the candidate class, in the sandbox with a timeout.

The candidate's code never runs in this process, nor outside the sandbox
(gates.sandbox): the worker sees the commit under audit materialized from git's
objects at the workspace's path, and one writable folder of its own (its cwd and
the result file); it reports through the result file; its stdout should stay
empty. Where no sandbox can start, the class is not loaded and the reason is
the failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gates.core.errors import GatesError
from gates.sandbox import Request as SandboxRequest
from gates.sandbox import SandboxHost, killed_by, prepared

WORKER = Path(__file__).with_name("worker.py")
_STAGES = {"import": "import", "load": "loading the official config"}


@dataclass(frozen=True)
class ProbeResult:
    """What the subprocess reported, or why it reported nothing."""

    failure: str | None = None
    stdout: str = ""
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def loaded(self) -> bool:
        return self.failure is None and "values" in self.report


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()  # reaps it and closes its pipes


@dataclass(frozen=True)
class Tree:
    """The workspace whose HEAD commit the sandbox shows, less its evidence locations, and
    the host the sandbox is made on (the command's)."""

    root: Path
    excluded: tuple[str, ...]
    host: SandboxHost = field(default_factory=SandboxHost)


def run_probe(
    class_path: str,
    official_raw: bytes,
    attributes: tuple[str, ...],
    *,
    import_from: Path | None,
    timeout_s: float,
    tree: Tree,
) -> ProbeResult:
    """Import ``module:Class`` in the sandbox, load the official config, and round-trip it."""
    found = tree.host.support()
    if found.mechanism is None:
        return ProbeResult(f"{class_path} was not loaded: no sandbox can start: {found.reason}")
    with tempfile.TemporaryDirectory(prefix="gates-config-") as tmp:
        sandbox = Path(tmp)
        for folder in ("official", "out", "work", "home", "tmp"):
            (sandbox / folder).mkdir()
        (sandbox / "official" / "config.json").write_bytes(official_raw)
        result_path = sandbox / "result.json"
        request = {
            "class": class_path,
            "sys_path": [str(import_from)] if import_from else [],
            "sandbox": str(sandbox),
            "attributes": list(attributes),
            "result": str(result_path),
        }
        (sandbox / "request.json").write_text(json.dumps(request), encoding="utf-8")
        fixed = {
            "HOME": str(sandbox / "home"),
            "TMPDIR": str(sandbox / "tmp"),
            "PYTHONIOENCODING": "utf-8",
        }
        request_in = SandboxRequest(
            root=tree.root,
            commit="HEAD",
            excluded=tree.excluded,
            command=[sys.executable, "-P", str(WORKER), str(sandbox / "request.json")],
            cwd=sandbox / "work",
            output_at=sandbox,
            output=sandbox,
            protocol={},
            fixed_env=fixed,
            host=tree.host,
        )
        try:
            with prepared(found, request_in) as ready:
                process = subprocess.Popen(
                    ready.argv,
                    env=ready.env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                )
                try:
                    out, err = process.communicate(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    _kill(process)
                    return ProbeResult(
                        f"{class_path} did not load within {timeout_s:g} s (hung; killed)"
                    )
        except GatesError as exc:
            return ProbeResult(f"{class_path} was not loaded: {exc.one_line()}")
        stdout = out.decode("utf-8", "replace")
        stderr = err.decode("utf-8", "replace")
        if not result_path.is_file():
            why = _last_line(stderr) or "no output"
            code = process.returncode
            sig = killed_by(code)
            ended = f"was killed by signal {sig}" if sig else f"ended with exit code {code}"
            return ProbeResult(
                f"{class_path}: the loading process {ended} and no result: {why}", stdout
            )
        report: dict[str, Any] = json.loads(result_path.read_text(encoding="utf-8"))
    if "error" in report and report["stage"] in _STAGES:
        stage = _STAGES[report["stage"]]
        return ProbeResult(f"{class_path}: {stage} failed: {report['error']}", stdout, report)
    return ProbeResult(None, stdout, report)
