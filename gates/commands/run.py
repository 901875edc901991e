"""`gates run -- CMD ...`: the gated launch.

Refuses a formal run while the source freeze is blocked (unless --probe),
refuses a run folder that already holds files (unless --clean), launches the
entrypoint in the sandbox (gates.sandbox; --no-sandbox: in the workspace) with
the run folder in GATES_RUN_DIR, passes SIGINT/SIGTERM on to it, moves what it
created into the run folder once the sandbox is gone, judges the freeze again,
writes the run manifest atomically, and stamps a receipt for every output the
run left: formal only when the freeze passed before and after, the run exited
0 and nothing was interrupted. The key signs only after the sandbox's whole
process tree has exited. The entrypoint's exit status is passed through.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from gates.core.atomic import write_text_atomic
from gates.core.canonical import pretty_json
from gates.core.echo import Echo, note
from gates.core.errors import GatesError
from gates.core.hashing import StatCache, cache_file
from gates.core.paths import is_under, resolve_inside, to_workspace_relpath
from gates.core.run_protocol import (
    FRAMEWORK,
    GIT_HEAD,
    MODEL_CONFIG,
    RANK_VARIABLES,
    RUN_DIR,
    RUN_ID,
    SAVE_EVERY,
)
from gates.engine import preflight
from gates.engine.counting import what_counts
from gates.engine.inputs import AuditInputs
from gates.engine.preflight import full_profile
from gates.freeze.check import FreezeReport, evaluate_freeze
from gates.receipts.create import ReceiptRequest, create_receipt
from gates.receipts.model import ArtifactKind, EvidenceClass, Framework, Receipt
from gates.replay.commitments import COMMITMENTS_FILE, STATES_FOLDER
from gates.replay.settings import policy_save_every
from gates.sandbox import Isolation, SandboxSupport, killed_by, prepared, support
from gates.sandbox import Request as SandboxRequest
from gates.tensors.layout import TENSORS_FOLDER, dump_files
from gates.training.env import capture
from gates.training.recorder import aggregate_ranks
from gates.training.runlog import StderrTee
from gates.trust.keys import SigningKey, key_from_environment
from gates.workspace.repository import Workspace

MANIFEST_FORMAT = "gates.run-manifest/v1"
RUN_FILES = {
    "manifest.json": ArtifactKind.MANIFEST,
    "env.json": ArtifactKind.ENV,
    "loss.json": ArtifactKind.LOSS,
    "raw_loss.jsonl": ArtifactKind.RAW_LOSS,
    COMMITMENTS_FILE: ArtifactKind.COMMITMENTS,
}
INT_KEYS = ("tp", "pp", "ep", "etp", "world")


@dataclass
class RunRequest:
    command: list[str]
    framework: Framework | None
    probe: bool
    out: str | None
    outputs: list[tuple[ArtifactKind, str]] = field(default_factory=list)
    profile: dict[str, str] = field(default_factory=dict)
    sandbox: bool = True
    clean: bool = False
    force: bool = False  # launch despite pre-flight problems (gates.engine.preflight)
    model_config: Path | None = None  # passed to the recorder as GATES_MODEL_CONFIG


def manifest_profile(profile: dict[str, str]) -> dict[str, object]:
    typed: dict[str, object] = dict(profile)
    for key in INT_KEYS:
        if not profile[key].isdigit():
            raise GatesError(
                f"profile {key}={profile[key]} is not a whole number", hint="e.g. tp=2"
            )
        typed[key] = int(profile[key])
    if profile["sp"].lower() not in ("true", "false"):
        raise GatesError(f"profile sp={profile['sp']} is not true or false")
    typed["sp"] = profile["sp"].lower() == "true"
    return typed


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


class _Forwarder:
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


def _out_folder(workspace: Workspace, request: RunRequest, cwd: Path) -> tuple[str, Path]:
    if request.out:
        relpath = to_workspace_relpath(workspace.root, request.out, cwd)
    else:
        side = request.framework.value if request.framework else "run"
        relpath = f"results/{side}"
    if not is_under(relpath, workspace.config.evidence.locations):
        raise GatesError(
            f"run folder {relpath} is outside the evidence locations",
            hint=f"use one under {', '.join(workspace.config.evidence.locations)}",
        )
    folder = resolve_inside(workspace.root, relpath, what="run folder")
    folder.mkdir(parents=True, exist_ok=True)
    return relpath, folder


def _probe_reasons(
    request: RunRequest, before: FreezeReport, after: FreezeReport, code: int, signals: list[str]
) -> tuple[str, ...]:
    reasons = []
    if request.probe and before.verdict == "pass":
        reasons.append("probe run requested (--probe)")
    if after.verdict != before.verdict or after.head != before.head:
        changed = "; ".join(after.messages()) or "HEAD moved"
        reasons.append(f"the source freeze changed during the run: {changed}")
    if signals:
        reasons.append(f"the run was interrupted ({', '.join(signals)})")
    if code != 0:
        reasons.append(f"the run failed (exit status {code})")
    return tuple(reasons)


Stamp = tuple[ArtifactKind, list[str], str]  # kind, subjects, receipt path


def _stamps(
    root: Path, folder: Path, request: RunRequest, cwd: Path
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
    for kind, given in request.outputs:
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


@dataclass(frozen=True)
class Finished:
    run_id: str
    exit_status: int
    signal: str | None
    interrupted_by: tuple[str, ...]
    started: float
    duration: float


def _quiet_capture(framework: str | None, log: Path) -> dict[str, object]:
    """Environment capture imports the framework (Paddle warns "No ccache found" on import):
    its warnings go to the run log, not between the caller's lines."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        environment = capture(framework=framework)
    if caught:
        log.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(
            warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in caught
        )
        with log.open("a", encoding="utf-8") as handle:
            handle.write(text)
    return environment


def run_log_path(root: Path, run_id: str) -> Path:
    """Where the child's stderr is kept: `.gates/runs/<run id>.log`, never committed. A
    committed link on the way (`.gates` -> a folder elsewhere) is refused: the log's content
    is the PR's code's, and it must not land outside the workspace."""
    return resolve_inside(root, f".gates/runs/{run_id}.log", what="run log")


def _signal_name(code: int, sandboxed: bool) -> str | None:
    number = killed_by(code) if sandboxed else (-code if code < 0 else None)
    try:
        return signal.Signals(number).name if number else None
    except ValueError:
        return f"signal {number}"


def _launch(
    command: list[str],
    env: dict[str, str],
    cwd: Path,
    run_id: str,
    *,
    log: Path,
    own_code: Path,
    sandboxed: bool = False,
) -> Finished:
    """Run the child; its stderr goes to ``log``, and to ours except the warnings raised by
    code outside ``own_code`` (the workspace)."""
    started = time.time()
    child = subprocess.Popen(command, env=env, cwd=cwd, stderr=subprocess.PIPE)
    assert child.stderr is not None  # noqa: S101  (stderr=PIPE above)
    tee = StderrTee(child.stderr, log, sys.stderr, own_code)
    forwarder = _Forwarder(child, sandboxed)
    try:
        code = child.wait()
    finally:
        forwarder.restore()
        if tee.join():
            child.stderr.close()
    return Finished(
        run_id=run_id,
        exit_status=code if code >= 0 else 128 - code,
        signal=_signal_name(code, sandboxed),
        interrupted_by=tuple(forwarder.received),
        started=started,
        duration=round(time.time() - started, 3),
    )


def _refuse(before: FreezeReport) -> int:
    lines = ["gates run: refusing a formal run while the source freeze is blocked:"]
    lines += [f"  {message}" for message in before.messages()]
    lines.append("fix the freeze (gates explain contract_environment.source-freeze-head-vs-pin),")
    lines.append("or pass --probe to run anyway and stamp what it leaves probe/0")
    print("\n".join(lines), file=sys.stderr)
    return 1


def _manifest(
    request: RunRequest,
    finished: Finished,
    profile: dict[str, object],
    freeze: tuple[FreezeReport, FreezeReport],
    reasons: tuple[str, ...],
) -> dict[str, object]:
    manifest: dict[str, object] = {
        "format": MANIFEST_FORMAT,
        "run_id": finished.run_id,
        "entrypoint": " ".join(request.command[:2]),
        "profile": profile,
        "command": request.command,
        "exit_status": finished.exit_status,
        "signal": finished.signal,
        "interrupted_by": list(finished.interrupted_by),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(finished.started)),
        "duration_s": finished.duration,
        "host": socket.gethostname(),
        "rank_environment": {n: os.environ[n] for n in RANK_VARIABLES if n in os.environ},
        "git_head": freeze[0].head,
        "freeze_before": freeze[0].verdict,
        "freeze_after": freeze[1].verdict,
        "probe_reasons": list(reasons),
    }
    if request.framework:
        manifest["framework"] = request.framework.value
    return manifest


def _string_environment(environment: dict[str, object]) -> dict[str, str]:
    return {k: str(v) for k, v in environment.items() if isinstance(v, str | int | bool)}


@dataclass(frozen=True)
class RunFacts:
    folder: str
    cwd: str
    finished: Finished
    profile: dict[str, str]
    environment: dict[str, object]
    isolation: Isolation


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _attest_run(
    workspace: Workspace,
    request: RunRequest,
    *,
    facts: RunFacts,
    outputs: list[str],
    reasons: tuple[str, ...],
    freeze: tuple[FreezeReport, FreezeReport],
    cache: StatCache,
    signing_key: SigningKey | None,
) -> Receipt:
    """The run attestation: exact argv, where it ran, when, how it ended, what it captured,
    and the digest of every output (its subjects). Output receipts name it as input."""
    finished = facts.finished
    attestation = ReceiptRequest(
        kind=ArtifactKind.RUN,
        subjects=tuple(dict.fromkeys(outputs)),
        framework=request.framework,
        profile=facts.profile,
        requested_class=EvidenceClass.PROBE if request.probe else EvidenceClass.FORMAL,
        command=tuple(request.command),
        environment=_string_environment(facts.environment),
        output=f"{facts.folder}/run.receipt.json",
        overwrite=True,
        probe_reasons=reasons,
        run={
            "cwd": facts.cwd,
            "startedAt": _utc(finished.started),
            "endedAt": _utc(finished.started + finished.duration),
            "exitStatus": finished.exit_status,
            "signal": finished.signal,
            "isolation": facts.isolation.model_dump(mode="json", by_alias=True),
            "runId": finished.run_id,
        },
    )
    receipt, _ = create_receipt(
        workspace, attestation, cache=cache, freeze=freeze, signing_key=signing_key
    )
    return receipt


def _empty_run_folder(relpath: str, folder: Path, *, clean: bool) -> None:
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


def _outputs_inside(root: Path, relpath: str, request: RunRequest, cwd: Path) -> None:
    for _, given in request.outputs:
        target = to_workspace_relpath(root, given, cwd)
        if not is_under(target, [relpath]):
            raise GatesError(
                f"declared output {target} is outside the run folder {relpath}: the sandbox's "
                "only writable folder is the run folder",
                hint=f"write it under {relpath}, or pass --no-sandbox for a probe run",
            )


def _collect(output: Path, folder: Path, relpath: str) -> None:
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


def _sandboxed_launch(
    workspace: Workspace,
    request: RunRequest,
    found: SandboxSupport,
    *,
    place: tuple[str, Path, Path],
    protocol: dict[str, str],
    log: Path,
) -> tuple[Finished, Isolation]:
    relpath, folder, cwd = place
    root = workspace.root
    settings = workspace.config.sandbox
    sandbox_request = SandboxRequest(
        root=root,
        commit=protocol[GIT_HEAD],
        excluded=workspace.config.evidence.locations,
        command=request.command,
        cwd=cwd,
        output_at=folder,
        protocol=protocol,
        network=settings.network,
        env_names=settings.env,
        inputs=settings.inputs,
        writable_copies=settings.writable_copies,
    )
    with prepared(found, sandbox_request) as ready:
        finished = _launch(
            ready.argv,
            ready.env,
            ready.output.parent,
            protocol[RUN_ID],
            log=log,
            own_code=root,
            sandboxed=True,
        )
        _collect(ready.output, folder, relpath)
    return finished, ready.isolation


def _launch_either(
    workspace: Workspace,
    request: RunRequest,
    found: SandboxSupport | None,
    *,
    place: tuple[str, Path, Path],
    protocol: dict[str, str],
    log: Path,
) -> tuple[Finished, Isolation]:
    """The run in the sandbox, or (--no-sandbox) in the workspace with gates' environment."""
    if found is not None:
        return _sandboxed_launch(workspace, request, found, place=place, protocol=protocol, log=log)
    child_env = {**os.environ, **protocol}
    root, cwd = workspace.root, place[2]
    finished = _launch(request.command, child_env, cwd, protocol[RUN_ID], log=log, own_code=root)
    names = tuple(sorted(child_env))
    isolation = Isolation(
        mechanism="none", network=True, commit=protocol[GIT_HEAD], environment=names
    )
    return finished, isolation


def _sandbox(request: RunRequest, before: FreezeReport) -> SandboxSupport | None:
    """The sandbox to run in (None: --no-sandbox); one that cannot start stops the run."""
    if not request.sandbox:
        return None
    found = support()
    if found.mechanism is None:
        raise GatesError(f"cannot start a sandbox, nothing was run or signed: {found.reason}")
    if not before.head:
        raise GatesError("nothing is committed: the sandbox runs the commit under audit")
    return found


def _preflight(
    inputs: AuditInputs,
    request: RunRequest,
    cwd: Path,
    *,
    environment: dict[str, object],
    device: str,
    signing_key: SigningKey | None,
) -> preflight.Preflight | None:
    """The pre-flight's findings on stderr; None when the launch is refused."""
    checked = preflight.check_launch(
        inputs,
        preflight.Launch(
            tuple(request.command),
            to_workspace_relpath(inputs.root, ".", cwd),
            request.framework,
            request.profile,
            request.model_config,
            sandboxed=request.sandbox,
        ),
        environment=_string_environment(environment),
        device=device,
        signing_key=signing_key,
    )
    if checked.problems:
        note(preflight.render(checked, forced=request.force, probe=request.probe))
        if not (request.force or request.probe):
            return None
    if checked.filled_from:
        note(f"gates run: no --profile given: the profile {checked.filled_from} requires")
    return checked


def _protocol(
    request: RunRequest, folder: Path, run_id: str, head: str | None, save_every: int | None
) -> dict[str, str]:
    """The run protocol's variables, the only gates variables the child sees."""
    protocol = {RUN_DIR: str(folder), RUN_ID: run_id, GIT_HEAD: head or ""}
    if save_every is not None:  # how often the recorder saves the full training state
        protocol[SAVE_EVERY] = str(save_every)
    protocol[FRAMEWORK] = request.framework.value if request.framework else ""
    if request.model_config is not None:
        protocol[MODEL_CONFIG] = str(request.model_config.resolve())
    return protocol


def run(inputs: AuditInputs, request: RunRequest, *, cwd: Path, echo: Echo) -> int:
    """Launch, stamp, and return the entrypoint's exit status (1 when refused)."""
    if not request.command:
        raise GatesError("no command to run", hint="gates run [options] -- python train.py ...")
    root = inputs.workspace.root
    signing_key = key_from_environment()  # a bad key fails here, before anything runs
    before = evaluate_freeze(root, inputs.workspace.config)
    if before.verdict != "pass" and not request.probe:
        return _refuse(before)
    sandbox = _sandbox(request, before)
    relpath, folder = _out_folder(inputs.workspace, request, cwd)
    manifest_profile(full_profile(request.profile, "cpu"))  # a malformed value: error now
    framework = request.framework.value if request.framework else None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    run_id = f"{framework or 'run'}-{stamp}-{os.getpid()}"
    log = run_log_path(root, run_id)
    environment = _quiet_capture(framework, log)
    device = "cpu" if environment.get("device_name") in (None, "cpu") else "cuda"
    checked = _preflight(
        inputs, request, cwd, environment=environment, device=device, signing_key=signing_key
    )
    if checked is None:
        return 1
    profile = full_profile(checked.profile, device)
    typed_profile = manifest_profile(profile)
    if sandbox is not None:
        _outputs_inside(root, relpath, request, cwd)
    _empty_run_folder(relpath, folder, clean=request.clean)
    protocol = _protocol(request, folder, run_id, before.head, policy_save_every(inputs.policy))
    preloading = signing_key.preload() if signing_key else None
    finished, isolation = _launch_either(
        inputs.workspace, request, sandbox, place=(relpath, folder, cwd), protocol=protocol, log=log
    )
    if preloading is not None:
        preloading.join()
    after = evaluate_freeze(root, inputs.workspace.config)
    reasons = _probe_reasons(
        request, before, after, finished.exit_status, list(finished.interrupted_by)
    )
    reasons += tuple(aggregate_ranks(folder)[1])
    if sandbox is None and inputs.workspace.config.sandbox.required:
        reasons += ("run not isolated: --no-sandbox, and the policy requires the sandbox",)
    found, missing = _stamps(root, folder, request, cwd)
    manifest = _manifest(request, finished, typed_profile, (before, after), reasons)
    manifest["outputs_missing"] = missing
    write_text_atomic(folder / "manifest.json", pretty_json(manifest))
    manifest_stamp = (
        ArtifactKind.MANIFEST,
        [f"{relpath}/manifest.json"],
        f"{relpath}/manifest.receipt.json",
    )
    if manifest_stamp not in found:
        found.insert(0, manifest_stamp)
    cache = StatCache(cache_file(root))
    run_receipt = _attest_run(
        inputs.workspace,
        request,
        facts=RunFacts(
            relpath,
            to_workspace_relpath(root, ".", cwd),
            finished,
            profile,
            environment,
            isolation,
        ),
        outputs=[file for _, files, _ in found for file in files],
        reasons=reasons,
        freeze=(before, after),
        cache=cache,
        signing_key=signing_key,
    )
    written = []
    for kind, files, receipt_path in found:
        receipt_request = ReceiptRequest(
            kind=kind,
            subjects=tuple(files),
            framework=request.framework,
            profile=profile,
            requested_class=EvidenceClass.PROBE if request.probe else EvidenceClass.FORMAL,
            command=tuple(request.command),
            environment=_string_environment(environment),
            output=receipt_path,
            overwrite=True,
            probe_reasons=reasons,
            inputs=(run_receipt.id,),
        )
        _, path = create_receipt(
            inputs.workspace,
            receipt_request,
            cache=cache,
            freeze=(before, after),
            signing_key=signing_key,
        )
        written.append(path.relative_to(root).as_posix())
    cache.save()
    run_path = f"{relpath}/run.receipt.json"
    for counted in what_counts(inputs, [run_path, *written], freeze=after):
        echo(counted.line())
    echo(
        "".join(f"declared output {target} was not written\n" for target in missing)
        + json.dumps(
            {
                "run_id": run_id,
                "exit_status": finished.exit_status,
                "log": log.relative_to(root).as_posix(),
            }
        )
    )
    return finished.exit_status
