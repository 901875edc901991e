"""The run-folder protocol of `gates run`: where a run writes (a folder under the evidence
locations, empty before it starts), the variables the training process gets (the run
protocol: gates/core/run_protocol.py), how what the sandbox's output folder holds becomes
the run folder's files (regular files and folders only), and which files are stamped.

A lock on the run folder, or checks of what the run wrote, belong here beside `collect`.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from gates.core.errors import GatesError
from gates.core.paths import is_under, resolve_inside, to_workspace_relpath
from gates.core.run_protocol import FRAMEWORK, GIT_HEAD, MODEL_CONFIG, RUN_DIR, RUN_ID, SAVE_EVERY
from gates.receipts.model import ArtifactKind
from gates.receipts.run_stamp import Stamp
from gates.replay.commitments import COMMITMENTS_FILE, STATES_FOLDER
from gates.tensors.layout import TENSORS_FOLDER, dump_files
from gates.training.recorder import aggregate_ranks
from gates.workspace.repository import Workspace

#: The files a recorder leaves in a run folder, each receipted on its own.
RUN_FILES = {
    "manifest.json": ArtifactKind.MANIFEST,
    "env.json": ArtifactKind.ENV,
    "loss.json": ArtifactKind.LOSS,
    "raw_loss.jsonl": ArtifactKind.RAW_LOSS,
    COMMITMENTS_FILE: ArtifactKind.COMMITMENTS,
}

#: A declared output: its kind and the path given on the command line.
Declared = tuple[ArtifactKind, str]


def out_folder(
    workspace: Workspace, out: str | None, side: str | None, cwd: Path
) -> tuple[str, Path]:
    """The run folder (``out``, else results/<side>), made if missing; one outside the
    evidence locations is refused."""
    default = f"results/{side or 'run'}"
    relpath = to_workspace_relpath(workspace.root, out, cwd) if out else default
    if not is_under(relpath, workspace.config.evidence.locations):
        raise GatesError(
            f"run folder {relpath} is outside the evidence locations",
            hint=f"use one under {', '.join(workspace.config.evidence.locations)}",
        )
    folder = resolve_inside(workspace.root, relpath, what="run folder")
    folder.mkdir(parents=True, exist_ok=True)
    return relpath, folder


def empty_run_folder(relpath: str, folder: Path, *, clean: bool) -> None:
    """A run's outputs are exactly the files it writes: a run folder that already holds
    files (a previous run's, or files committed in the PR) is refused, or emptied with
    --clean, before anything runs."""
    present = sorted(entry.name for entry in folder.iterdir())
    if not present:
        return
    if not clean:
        shown = ", ".join(f"{relpath}/{name}" for name in present[:3])
        more = f" and {len(present) - 3} more" if len(present) > 3 else ""
        raise GatesError(
            f"run folder {relpath} is not empty ({shown}{more}): a run vouches only for the "
            "files it writes",
            hint="pass --clean to empty it first, or choose another folder with --out",
        )
    for name in present:
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def outputs_inside(root: Path, relpath: str, outputs: list[Declared], cwd: Path) -> None:
    """In the sandbox the run folder is the only writable folder: every declared output
    must lie in it."""
    for _, given in outputs:
        target = to_workspace_relpath(root, given, cwd)
        if not is_under(target, [relpath]):
            raise GatesError(
                f"declared output {target} is outside the run folder {relpath}: the sandbox's "
                "only writable folder is the run folder",
                hint=f"write it under {relpath}, or pass --no-sandbox for a probe run",
            )


def collect(output: Path, folder: Path, relpath: str) -> None:
    """Move what the run created into the run folder: regular files and folders only."""
    for base, dirs, files in os.walk(output):
        for name in dirs + files:
            path = Path(base) / name
            info = path.lstat()
            shown = f"{relpath}/{path.relative_to(output).as_posix()}"
            if stat.S_ISLNK(info.st_mode):
                why = "a symbolic link"
            elif stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                why = "a hard link"
            elif not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                why = "not a regular file"
            else:
                continue
            raise GatesError(
                f"the run left {shown}, {why}: nothing of this run is signed",
                hint="write outputs as regular files",
            )
    for entry in sorted(output.iterdir()):
        shutil.move(str(entry), str(folder / entry.name))


def run_log_path(root: Path, run_id: str) -> Path:
    """Where the child's stderr is kept: `.gates/runs/<run id>.log`, never committed. A
    committed link on the way (`.gates` -> a folder elsewhere) is refused: the log's content
    is the PR's code's, and it must not land outside the workspace."""
    return resolve_inside(root, f".gates/runs/{run_id}.log", what="run log")


def protocol_variables(
    folder: Path,
    run_id: str,
    head: str | None,
    *,
    save_every: int | None,
    framework: str | None,
    model_config: Path | None,
) -> dict[str, str]:
    """The run protocol's variables, the only gates variables the child sees."""
    protocol = {RUN_DIR: str(folder), RUN_ID: run_id, GIT_HEAD: head or ""}
    if save_every is not None:  # how often the recorder saves the full training state
        protocol[SAVE_EVERY] = str(save_every)
    protocol[FRAMEWORK] = framework or ""
    if model_config is not None:
        protocol[MODEL_CONFIG] = str(model_config.resolve())
    return protocol


def stamps(
    root: Path, folder: Path, outputs: list[Declared], cwd: Path
) -> tuple[list[Stamp], list[str]]:
    """The run files (of every rank folder too) and declared outputs to receipt, and the
    declared outputs that were not written."""
    found: list[Stamp] = []
    for run_folder in [folder, *aggregate_ranks(folder)[0]]:
        base = run_folder.relative_to(root).as_posix()
        for name, kind in RUN_FILES.items():
            if (run_folder / name).is_file():
                stem = name.split(".", 1)[0]
                found.append((kind, [f"{base}/{name}"], f"{base}/{stem}.receipt.json"))
        dump = sorted(p.relative_to(root).as_posix() for p in dump_files(run_folder))
        if dump:  # the tensor dump of gates.tensors.recorder: one receipt over all of it
            found.append((ArtifactKind.TENSOR_DUMP, dump, f"{base}/{TENSORS_FOLDER}.receipt.json"))
        states = sorted(
            p.relative_to(root).as_posix()
            for p in (run_folder / STATES_FOLDER).glob("*.safetensors")
        )
        if states:  # the saved training states a replay resumes from: one receipt
            found.append(
                (ArtifactKind.TRAINING_STATE, states, f"{base}/{STATES_FOLDER}.receipt.json")
            )
    missing = []
    for kind, given in outputs:
        target = to_workspace_relpath(root, given, cwd)
        path = root / target
        if path.is_dir():
            files = sorted(p.relative_to(root).as_posix() for p in path.rglob("*") if p.is_file())
            found.append((kind, files, f"{target}.receipt.json"))
        elif path.is_file():
            found.append((kind, [target], f"{target.rsplit('.', 1)[0]}.receipt.json"))
        else:
            missing.append(target)
    return found, missing
