"""Re-executing one window and comparing it with the run's commitments bit for bit.

The saved state the window resumes from is copied out of the run folder and its
digest checked (on the copy that the entrypoint will read) before anything runs.
The entrypoint runs through `_launch_window`, the single place replayed code is
started. The verdict rests on what gates computes itself: the digest of the state
the entrypoint saved at the window's end; the losses and intermediate digests it
reports are compared too, so the first differing step can be named.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from gates.core.errors import GatesError
from gates.core.run_protocol import FRAMEWORK, RUN_DIR, RUN_ID, SAVE_EVERY
from gates.replay.commitments import (
    COMMITMENTS_FILE,
    STATES_FOLDER,
    Commitments,
    CommitmentsError,
    StepCommitment,
    read_commitments,
)
from gates.replay.names import state_file_name
from gates.replay.report import Mismatch, WindowResult
from gates.replay.state import (
    StateFileError,
    differing_parts,
    load_state,
)
from gates.replay.windows import Window
from gates.sandbox import Request as SandboxRequest
from gates.sandbox import SandboxHost, prepared

PLACEHOLDERS = ("{state}", "{start}", "{end}", "{out}")


def replay_argv(template: tuple[str, ...], state: Path, window: Window, out: Path) -> list[str]:
    """The declared template with its placeholders filled in; `python` is this interpreter."""
    values = {
        "{state}": str(state),
        "{start}": str(window.resume),
        "{end}": str(window.last),
        "{out}": str(out),
    }
    argv = []
    for part in template:
        filled = part
        for placeholder, value in values.items():
            filled = filled.replace(placeholder, value)
        argv.append(filled)
    if argv and argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return argv


def check_template(template: tuple[str, ...], side: str) -> None:
    if not template:
        raise GatesError(
            f"params.{side}_replay is not declared in the results contract",
            hint='e.g. ["python", "model/train.py", "--resume", "{state}", "--start", "{start}", '
            '"--end", "{end}", "--out", "{out}"] (docs/replay.md)',
        )
    joined = " ".join(template)
    missing = [p for p in PLACEHOLDERS if p not in joined]
    if missing:
        raise GatesError(f"params.{side}_replay lacks {', '.join(missing)}")


def _launch_window(
    run: RunUnderReplay, argv: list[str], *, out: Path, state: Path, run_id: str, log: Path
) -> int:
    """The one launch of a replayed entrypoint: in the sandbox (gates/sandbox), on the
    commit under audit materialized without the evidence locations, the saved state bound
    read-only, ``out`` the only writable folder, nothing of gates' configuration in reach.
    No sandbox: nothing runs (the replay is an error, never a launch outside it)."""
    found = run.host.support()
    if found.mechanism is None:
        raise GatesError(f"cannot start a sandbox for the replay, nothing was run: {found.reason}")
    request = SandboxRequest(
        root=run.root,
        commit=run.commit,
        excluded=run.excluded,
        command=argv,
        cwd=run.root / run.cwd,
        output_at=out,
        output=out,
        # SAVE_EVERY 0: only the window's last state is saved
        protocol={RUN_DIR: str(out), RUN_ID: run_id, SAVE_EVERY: "0", FRAMEWORK: run.framework},
        extra_binds={state: state},
        host=run.host,
        writable_copies=run.writable_copies,
    )
    with prepared(found, request) as ready, log.open("wb") as sink:
        try:
            done = subprocess.run(
                ready.argv,
                cwd=ready.output.parent,
                env=ready.env,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                timeout=run.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return 124
    return done.returncode


@dataclass(frozen=True)
class RunUnderReplay:
    root: Path  # the workspace
    folder: str  # the run folder, workspace-relative
    commitments: Commitments
    template: tuple[str, ...]
    cwd: str  # where the run ran, workspace-relative
    timeout: float
    commit: str  # the commit under audit, materialized in the sandbox
    excluded: tuple[str, ...]  # the evidence locations, never in the sandbox
    framework: str  # the run's side, for the recorder (GATES_FRAMEWORK)
    host: SandboxHost  # the command's host the sandbox is made on
    writable_copies: tuple[str, ...] = ()  # as the run saw them ([sandbox] writable_copies)


def _error(window: Window, started: float, message: str) -> WindowResult:
    return WindowResult(
        first=window.first,
        last=window.last,
        resumed_from=window.resume,
        result="error",
        error=message,
        duration_s=round(time.monotonic() - started, 3),
    )


def _tail(work: Path) -> str:
    """The window log's last line (the scratch folder holding the log is gone afterwards)."""
    lines = (work / "window.log").read_text(encoding="utf-8", errors="replace").splitlines()
    return next((line.strip() for line in reversed(lines) if line.strip()), "(no output)")


def replay_window(run: RunUnderReplay, window: Window, scratch: Path) -> WindowResult:
    started = time.monotonic()
    committed = run.commitments.by_step()
    start = committed[window.resume]
    if start.saved is None:
        return _error(window, started, f"step {window.resume}: no saved state")
    display = f"{run.folder}/{start.saved}"
    work = Path(tempfile.mkdtemp(prefix=f"window-{window.first}-", dir=scratch))
    state_path, out = work / "state.safetensors", work / "out"
    out.mkdir()
    try:
        shutil.copyfile(run.root / run.folder / start.saved, state_path)
    except FileNotFoundError:
        return _error(window, started, f"{display}: the saved state for this window is missing")
    try:
        restored = load_state(state_path, display)
    except StateFileError as exc:
        return _error(window, started, exc.one_line())
    parts = differing_parts(start.parts, restored.part_digests())
    if restored.digest() != start.state:
        return _error(
            window,
            started,
            f"{display}: saved state differs from its commitment at step {window.resume} "
            f"in {', '.join(parts) or 'its digest'}: not replayed",
        )
    argv = replay_argv(run.template, state_path, window, out)
    code = _launch_window(
        run,
        argv,
        out=out,
        state=state_path,
        run_id=f"replay-{window.first}",
        log=work / "window.log",
    )
    if code != 0:
        return _error(window, started, f"the replayed entrypoint exited {code}: {_tail(work)}")
    mismatch = compare_window(committed, window, out)
    return WindowResult(
        first=window.first,
        last=window.last,
        resumed_from=window.resume,
        result="match" if mismatch is None else "mismatch",
        mismatch=mismatch,
        duration_s=round(time.monotonic() - started, 3),
    )


def _step_mismatch(step: int, mine: StepCommitment, theirs: StepCommitment) -> Mismatch | None:
    loss_differs = mine.loss_bits != theirs.loss_bits and mine.loss is not None
    parts = tuple(differing_parts(mine.parts, theirs.parts))
    if not loss_differs and not parts and mine.state == theirs.state:
        return None
    what = []
    if loss_differs:
        what.append(f"loss bits {mine.loss_bits} committed, {theirs.loss_bits} replayed")
    if parts or mine.state != theirs.state:
        what.append(f"state differs in {', '.join(parts) or 'its digest'}")
    return Mismatch(
        step=step,
        what="; ".join(what),
        loss_committed=mine.loss_bits if loss_differs else None,
        loss_replayed=theirs.loss_bits if loss_differs else None,
        parts=parts,
    )


def compare_window(  # noqa: PLR0911  (one return per kind of first difference)
    committed: dict[int, StepCommitment], window: Window, out: Path
) -> Mismatch | None:
    """The first differing step of a replayed window, or None when every bit agrees."""
    try:
        replayed = read_commitments(out / COMMITMENTS_FILE, "the replayed window's commitments")
    except CommitmentsError as exc:
        return Mismatch(step=window.resume + 1, what=exc.one_line())
    theirs = replayed.by_step()
    resumed = theirs.get(window.resume)
    if resumed is not None and resumed.state != committed[window.resume].state:
        parts = tuple(differing_parts(committed[window.resume].parts, resumed.parts))
        return Mismatch(
            step=window.resume,
            what=f"the entrypoint did not resume from the given state: its start state "
            f"differs in {', '.join(parts) or 'its digest'}",
            parts=parts,
        )
    for step in range(window.resume + 1, window.last + 1):
        if step not in theirs:
            steps = f"{replayed.steps[0].step}..{replayed.last_step}"
            return Mismatch(step=step, what=f"step {step} was not replayed (it recorded {steps})")
        found = _step_mismatch(step, committed[step], theirs[step])
        if found:
            return found
    end_state = out / STATES_FOLDER / state_file_name(window.last)
    try:
        computed = load_state(end_state, f"the replayed state at step {window.last}")
    except StateFileError as exc:
        return Mismatch(step=window.last, what=exc.one_line())
    parts = tuple(differing_parts(committed[window.last].parts, computed.part_digests()))
    if parts or computed.digest() != committed[window.last].state:
        return Mismatch(
            step=window.last,
            what="the state saved at the window's end differs in "
            + (", ".join(parts) or "its digest"),
            parts=parts,
        )
    return None
