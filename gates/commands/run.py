"""`gates run -- CMD ...`: the gated launch.

Refuses a formal run while the source freeze is blocked (unless --probe), runs the
pre-flight, then:
- the run folder (gates/training/run_folder.py): under the evidence locations, empty
  unless --clean empties it, the run protocol's variables for the child;
- the launch (gates/training/launch.py, supervised by gates/sandbox/supervise.py): in the
  sandbox, or with --no-sandbox in the workspace; SIGINT/SIGTERM passed on; what the run
  wrote moved into the run folder once the sandbox is gone;
- the stamping (gates/receipts/run_stamp.py): the freeze judged again, the run manifest,
  the run attestation and a receipt for every output, formal only when the freeze passed
  before and after, the run exited 0 and nothing was interrupted; the key signs only after
  the sandbox's whole process tree has exited;
- the report here: what the audit will count of each receipt, and one JSON line.
The entrypoint's exit status is passed through.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gates.core.echo import Echo, note
from gates.core.errors import GatesError
from gates.core.paths import to_workspace_relpath
from gates.engine import preflight
from gates.engine.counting import what_counts
from gates.engine.inputs import AuditInputs
from gates.engine.preflight import full_profile
from gates.freeze.check import FreezeReport
from gates.receipts.model import ArtifactKind, Framework
from gates.receipts.run_stamp import (
    RunStamping,
    manifest,
    manifest_profile,
    probe_reasons,
    stamp_run,
    string_environment,
)
from gates.replay.settings import policy_save_every
from gates.training import run_folder
from gates.training.env import capture
from gates.training.launch import Place, chosen_sandbox, launch_run
from gates.training.recorder import aggregate_ranks
from gates.trust.keys import SigningKey, configured_key


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


def _quiet_capture(
    framework: str | None, log: Path, variables: Mapping[str, str]
) -> dict[str, object]:
    """Environment capture imports the framework (Paddle warns "No ccache found" on import):
    its warnings go to the run log, not between the caller's lines."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        environment = capture(framework=framework, variables=variables)
    if caught:
        log.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(
            warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in caught
        )
        with log.open("a", encoding="utf-8") as handle:
            handle.write(text)
    return environment


def _refuse(before: FreezeReport) -> int:
    lines = ["gates run: refusing a formal run while the source freeze is blocked:"]
    lines += [f"  {message}" for message in before.messages()]
    lines.append("fix the freeze (gates explain contract_environment.source-freeze-head-vs-pin),")
    lines.append("or pass --probe to run anyway and stamp what it leaves probe/0")
    print("\n".join(lines), file=sys.stderr)
    return 1


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
        environment=string_environment(environment),
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


@dataclass(frozen=True)
class Ran:
    """What `gates run` reports: the receipts it wrote, the declared outputs the run did not
    write, and the summary line's run id, exit status and log."""

    receipts: list[str]
    missing: list[str]
    run_id: str
    exit_status: int
    log: str


def report(inputs: AuditInputs, ran: Ran, after: FreezeReport, echo: Echo) -> None:
    """What the audit will count of each receipt written, then one JSON line."""
    for counted in what_counts(inputs, ran.receipts, freeze=after):
        echo(counted.line())
    echo(
        "".join(f"declared output {target} was not written\n" for target in ran.missing)
        + json.dumps({"run_id": ran.run_id, "exit_status": ran.exit_status, "log": ran.log})
    )


def run(inputs: AuditInputs, request: RunRequest, *, cwd: Path, echo: Echo) -> int:
    """Launch, stamp, and return the entrypoint's exit status (1 when refused)."""
    if not request.command:
        raise GatesError("no command to run", hint="gates run [options] -- python train.py ...")
    workspace, invocation = inputs.workspace, inputs.invocation
    root = workspace.root
    signing_key = configured_key(invocation.signing_key)  # a bad key fails here, before all
    host, world = inputs.sandbox_host, invocation.launcher.world
    before = inputs.judge_freeze()
    if before.verdict != "pass" and not request.probe:
        return _refuse(before)
    sandbox = chosen_sandbox(request.sandbox, before, host)
    side = request.framework.value if request.framework else None
    relpath, folder = run_folder.out_folder(workspace, request.out, side, cwd)
    manifest_profile(full_profile(request.profile, "cpu", world))  # a malformed value: now
    run_id = f"{side or 'run'}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
    log = run_folder.run_log_path(root, run_id)
    environment = _quiet_capture(side, log, invocation.environment)
    device = "cpu" if environment.get("device_name") in (None, "cpu") else "cuda"
    checked = _preflight(
        inputs, request, cwd, environment=environment, device=device, signing_key=signing_key
    )
    if checked is None:
        return 1
    profile = full_profile(checked.profile, device, world)
    manifest_profile(profile)
    if sandbox is not None:
        run_folder.outputs_inside(root, relpath, request.outputs, cwd)
    run_folder.empty_run_folder(relpath, folder, clean=request.clean)
    protocol = run_folder.protocol_variables(
        folder,
        run_id,
        before.head,
        save_every=policy_save_every(inputs.policy),
        framework=side,
        model_config=request.model_config,
    )
    preloading = signing_key.preload() if signing_key else None
    place = Place(relpath, folder, cwd)
    finished, isolation = launch_run(
        workspace, request.command, sandbox, place, protocol=protocol, log=log, host=host
    )
    if preloading is not None:
        preloading.join()
    after = inputs.judge_freeze()
    reasons = probe_reasons(probe=request.probe, before=before, after=after, finished=finished)
    reasons += tuple(aggregate_ranks(folder)[1])
    if sandbox is None and workspace.config.sandbox.required:
        reasons += ("run not isolated: --no-sandbox, and the policy requires the sandbox",)
    stamps, missing = run_folder.stamps(root, folder, request.outputs, cwd)
    stamping = RunStamping(
        framework=request.framework,
        profile=profile,
        probe=request.probe,
        command=tuple(request.command),
        environment=environment,
        reasons=reasons,
        freeze=(before, after),
        cache=inputs.cache,
        signing_key=signing_key,
    )
    written = stamp_run(
        workspace,
        stamping,
        finished,
        run_folder=(relpath, folder),
        cwd=to_workspace_relpath(root, ".", cwd),
        isolation=isolation,
        stamps=stamps,
        document=manifest(stamping, finished, launcher=invocation.environment, missing=missing),
    )
    log_path = log.relative_to(root).as_posix()
    report(inputs, Ran(written, missing, run_id, finished.exit_status, log_path), after, echo)
    return finished.exit_status
