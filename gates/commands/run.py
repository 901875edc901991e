"""`gates run -- CMD ...`: the gated launch.

Refuses a formal run while the source freeze is blocked (unless --probe),
launches the entrypoint with the run folder in GATES_RUN_DIR, passes
SIGINT/SIGTERM on to it, judges the freeze again when it ends, writes the run
manifest atomically, and stamps a receipt for every output the run left:
formal only when the freeze passed before and after, the run exited 0 and
nothing was interrupted. The entrypoint's exit status is passed through.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from gates.atomic import write_text_atomic
from gates.canonical import pretty_json
from gates.commands import Echo
from gates.env import RANK_VARIABLES, capture
from gates.errors import GatesError
from gates.freeze import FreezeReport, evaluate_freeze
from gates.hashing import StatCache, cache_file
from gates.paths import is_under, resolve_inside, to_workspace_relpath
from gates.receipts.create import ReceiptRequest, create_receipt
from gates.receipts.model import ArtifactKind, EvidenceClass, Framework, Receipt
from gates.recorder import GIT_HEAD, RUN_DIR, RUN_ID, aggregate_ranks
from gates.replay.commitments import COMMITMENTS_FILE, SAVE_EVERY, STATES_FOLDER
from gates.replay.settings import policy_save_every
from gates.runlog import StderrTee
from gates.tensors.layout import TENSORS_FOLDER, dump_files
from gates.trust.keys import SigningKey, key_from_environment
from gates.workspace import Workspace

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


def full_profile(given: dict[str, str], device: str) -> dict[str, str]:
    """The manifest's ten profile fields: given ones win, the rest get stated defaults."""
    world = os.environ.get("PADDLE_TRAINERS_NUM", "1")
    defaults = {
        "name": "default",
        "mode": "train",
        "device": device,
        "dtype": "float32",
        "tp": "1",
        "pp": "1",
        "ep": "1",
        "etp": "1",
        "sp": "false",
        "world": world if world.isdigit() else "1",
    }
    return {**defaults, **given}


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


class _Forwarder:
    """Passes SIGINT and SIGTERM on to the child and remembers that they came."""

    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        self.child = child
        self.received: list[str] = []
        self.previous = {
            sig: signal.signal(sig, self._forward) for sig in (signal.SIGINT, signal.SIGTERM)
        }

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signal.Signals(signum).name)
        if self.child.poll() is None:
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
    """Where the child's stderr is kept: `.gates/runs/<run id>.log`, never committed."""
    return root / ".gates" / "runs" / f"{run_id}.log"


def _launch(
    command: list[str], env: dict[str, str], cwd: Path, run_id: str, *, log: Path, own_code: Path
) -> Finished:
    """Run the child; its stderr goes to ``log``, and to ours except the warnings raised by
    code outside ``own_code`` (the workspace)."""
    started = time.time()
    child = subprocess.Popen(command, env=env, cwd=cwd, stderr=subprocess.PIPE)
    assert child.stderr is not None  # noqa: S101  (stderr=PIPE above)
    tee = StderrTee(child.stderr, log, sys.stderr, own_code)
    forwarder = _Forwarder(child)
    try:
        code = child.wait()
    finally:
        forwarder.restore()
        if tee.join():
            child.stderr.close()
    return Finished(
        run_id=run_id,
        exit_status=code if code >= 0 else 128 - code,
        signal=signal.Signals(-code).name if code < 0 else None,
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
        },
    )
    receipt, _ = create_receipt(
        workspace, attestation, cache=cache, freeze=freeze, signing_key=signing_key
    )
    return receipt


def run(workspace: Workspace, request: RunRequest, *, cwd: Path, echo: Echo) -> int:
    """Launch, stamp, and return the entrypoint's exit status (1 when refused)."""
    if not request.command:
        raise GatesError("no command to run", hint="gates run [options] -- python train.py ...")
    root = workspace.root
    signing_key = key_from_environment()  # a bad key fails here, before anything runs
    before = evaluate_freeze(root, workspace.config)
    if before.verdict != "pass" and not request.probe:
        return _refuse(before)
    relpath, folder = _out_folder(workspace, request, cwd)
    framework = request.framework.value if request.framework else None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    run_id = f"{framework or 'run'}-{stamp}-{os.getpid()}"
    log = run_log_path(root, run_id)
    environment = _quiet_capture(framework, log)
    device = "cpu" if environment.get("device_name") in (None, "cpu") else "cuda"
    profile = full_profile(request.profile, device)
    typed_profile = manifest_profile(profile)
    child_env = {**os.environ, RUN_DIR: str(folder), RUN_ID: run_id, GIT_HEAD: before.head or ""}
    save_every = policy_save_every(workspace)
    if save_every is not None:  # how often the recorder saves the full training state
        child_env[SAVE_EVERY] = str(save_every)
    preloading = signing_key.preload() if signing_key else None
    finished = _launch(request.command, child_env, cwd, run_id, log=log, own_code=root)
    if preloading is not None:
        preloading.join()
    after = evaluate_freeze(root, workspace.config)
    reasons = _probe_reasons(
        request, before, after, finished.exit_status, list(finished.interrupted_by)
    )
    reasons += tuple(aggregate_ranks(folder)[1])
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
        workspace,
        request,
        facts=RunFacts(
            relpath, to_workspace_relpath(root, ".", cwd), finished, profile, environment
        ),
        outputs=[file for _, files, _ in found for file in files],
        reasons=reasons,
        freeze=(before, after),
        cache=cache,
        signing_key=signing_key,
    )
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
        receipt, path = create_receipt(
            workspace,
            receipt_request,
            cache=cache,
            freeze=(before, after),
            signing_key=signing_key,
        )
        stamped = f"{receipt.evidence_class.value}/{receipt.formal_weight}"
        echo(f"{path.relative_to(root).as_posix()}: {stamped}")
    cache.save()
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
