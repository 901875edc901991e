"""Stamping what a `gates run` leaves: the run manifest, the run attestation (a receipt of
kind `run` over every output, recording the argv, where and how it ran, how it ended and
its isolation), and one receipt per output naming the attestation as input.

Formal only when the freeze passed before and after, the run exited 0, nothing interrupted
it and `--probe` was not given (`probe_reasons`); the key signs after the run's whole
process tree has exited. A check of the outputs before they are stamped belongs before
`stamp_run` is called, with its findings as probe reasons.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gates.core.atomic import write_text_atomic
from gates.core.errors import GatesError
from gates.core.hashing import StatCache
from gates.core.json_writer import pretty_json
from gates.core.run_protocol import RANK_VARIABLES
from gates.freeze.check import FreezeReport
from gates.receipts.create import ReceiptRequest, create_receipt
from gates.receipts.model import ArtifactKind, EvidenceClass, Framework, Receipt, RunIsolation
from gates.trust.keys import SigningKey
from gates.workspace.repository import Workspace

MANIFEST_FORMAT = "gates.run-manifest/v1"
INT_KEYS = ("tp", "pp", "ep", "etp", "world")

#: One receipt to write: the kind, its subjects, the receipt's path (workspace paths).
Stamp = tuple[ArtifactKind, list[str], str]


@dataclass(frozen=True)
class Finished:
    """How a launched process ended: its exit status (128 + N for signal N), the signal that
    ended it, the signals gates passed on to it, and when it started and how long it ran."""

    run_id: str
    exit_status: int
    signal: str | None
    interrupted_by: tuple[str, ...]
    started: float
    duration: float


def manifest_profile(profile: dict[str, str]) -> dict[str, object]:
    """The manifest's typed profile (whole numbers, sp a boolean); a malformed value is an
    error before anything runs."""
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


def probe_reasons(
    *, probe: bool, before: FreezeReport, after: FreezeReport, finished: Finished
) -> tuple[str, ...]:
    """Why the run's outputs are stamped probe (none: formal)."""
    reasons = []
    if probe and before.verdict == "pass":
        reasons.append("probe run requested (--probe)")
    if after.verdict != before.verdict or after.head != before.head:
        changed = "; ".join(after.messages()) or "HEAD moved"
        reasons.append(f"the source freeze changed during the run: {changed}")
    if finished.interrupted_by:
        reasons.append(f"the run was interrupted ({', '.join(finished.interrupted_by)})")
    if finished.exit_status != 0:
        reasons.append(f"the run failed (exit status {finished.exit_status})")
    return tuple(reasons)


def string_environment(environment: Mapping[str, object]) -> dict[str, str]:
    """The env capture's plain fields, as a receipt's environment holds them."""
    return {k: str(v) for k, v in environment.items() if isinstance(v, str | int | bool)}


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


@dataclass(frozen=True)
class RunStamping:
    """What every receipt of one run shares: its side, profile, class asked for, argv and
    captured environment, the probe reasons, the freeze before and after, the command's stat
    cache and its key."""

    framework: Framework | None
    profile: dict[str, str]
    probe: bool
    command: tuple[str, ...]
    environment: dict[str, object]
    reasons: tuple[str, ...]
    freeze: tuple[FreezeReport, FreezeReport]
    cache: StatCache
    signing_key: SigningKey | None

    @property
    def requested_class(self) -> EvidenceClass:
        return EvidenceClass.PROBE if self.probe else EvidenceClass.FORMAL


def manifest(
    stamping: RunStamping,
    finished: Finished,
    *,
    launcher: Mapping[str, str],
    missing: list[str],
) -> dict[str, object]:
    """The run manifest: argv, profile, how it ended, where, the launcher's rank variables
    (``launcher``: the command's environment), the freeze before and after, the probe
    reasons and the declared outputs it did not write."""
    before, after = stamping.freeze
    document: dict[str, object] = {
        "format": MANIFEST_FORMAT,
        "run_id": finished.run_id,
        "entrypoint": " ".join(stamping.command[:2]),
        "profile": manifest_profile(stamping.profile),
        "command": list(stamping.command),
        "exit_status": finished.exit_status,
        "signal": finished.signal,
        "interrupted_by": list(finished.interrupted_by),
        "started_at": _utc(finished.started),
        "duration_s": finished.duration,
        "host": socket.gethostname(),
        "rank_environment": {n: launcher[n] for n in RANK_VARIABLES if n in launcher},
        "git_head": before.head,
        "freeze_before": before.verdict,
        "freeze_after": after.verdict,
        "probe_reasons": list(stamping.reasons),
    }
    if stamping.framework:
        document["framework"] = stamping.framework.value
    document["outputs_missing"] = missing
    return document


def _request(stamping: RunStamping, **fields: object) -> ReceiptRequest:
    return ReceiptRequest(
        framework=stamping.framework,
        profile=stamping.profile,
        requested_class=stamping.requested_class,
        command=stamping.command,
        environment=string_environment(stamping.environment),
        overwrite=True,
        probe_reasons=stamping.reasons,
        **fields,  # type: ignore[arg-type]
    )


def _write(
    workspace: Workspace, stamping: RunStamping, request: ReceiptRequest
) -> tuple[Receipt, Path]:
    """One receipt of the run, stamped under the run's freeze (before and after) and signed
    with its key, the command's stat cache hashing the subjects."""
    return create_receipt(
        workspace,
        request,
        cache=stamping.cache,
        freeze=stamping.freeze,
        signing_key=stamping.signing_key,
    )


def attest_run(
    workspace: Workspace,
    stamping: RunStamping,
    finished: Finished,
    *,
    folder: str,
    cwd: str,
    isolation: RunIsolation,
    outputs: list[str],
) -> Receipt:
    """The run attestation: exact argv, where it ran, when, how it ended, what it captured,
    and the digest of every output (its subjects). Output receipts name it as input."""
    request = _request(
        stamping,
        kind=ArtifactKind.RUN,
        subjects=tuple(dict.fromkeys(outputs)),
        output=f"{folder}/run.receipt.json",
        run={
            "cwd": cwd,
            "startedAt": _utc(finished.started),
            "endedAt": _utc(finished.started + finished.duration),
            "exitStatus": finished.exit_status,
            "signal": finished.signal,
            "isolation": isolation.model_dump(mode="json", by_alias=True),
            "runId": finished.run_id,
        },
    )
    return _write(workspace, stamping, request)[0]


def stamp_outputs(
    workspace: Workspace, stamping: RunStamping, stamps: list[Stamp], run: Receipt
) -> list[Path]:
    """One receipt per output, each naming the run attestation as its input."""
    written = []
    for kind, files, receipt_path in stamps:
        request = _request(
            stamping, kind=kind, subjects=tuple(files), output=receipt_path, inputs=(run.id,)
        )
        written.append(_write(workspace, stamping, request)[1])
    return written


def stamp_run(
    workspace: Workspace,
    stamping: RunStamping,
    finished: Finished,
    *,
    run_folder: tuple[str, Path],
    cwd: str,
    isolation: RunIsolation,
    stamps: list[Stamp],
    document: dict[str, object],
) -> list[str]:
    """Write the manifest ``document`` atomically into the run folder, then the run
    attestation over every stamped file (the manifest first), then each output's receipt;
    the workspace paths of the receipts written, the attestation first."""
    relpath, folder = run_folder
    write_text_atomic(folder / "manifest.json", pretty_json(document))
    manifest_stamp: Stamp = (
        ArtifactKind.MANIFEST,
        [f"{relpath}/manifest.json"],
        f"{relpath}/manifest.receipt.json",
    )
    if manifest_stamp not in stamps:
        stamps = [manifest_stamp, *stamps]
    run = attest_run(
        workspace,
        stamping,
        finished,
        folder=relpath,
        cwd=cwd,
        isolation=isolation,
        outputs=[file for _, files, _ in stamps for file in files],
    )
    written = stamp_outputs(workspace, stamping, stamps, run)
    stamping.cache.save()
    root = workspace.root
    return [f"{relpath}/run.receipt.json", *(p.relative_to(root).as_posix() for p in written)]
