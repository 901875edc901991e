"""Where a `gates run` runs: in the sandbox (the commit under audit, the run folder its only
writable folder, then what it wrote collected), or with --no-sandbox in the workspace with
gates' environment. The process itself is supervised by gates/sandbox/supervise.py.

What one side's run may see (its view of the commit and the declared inputs) is the
sandbox request `sandboxed` builds; another launcher (one per rank) starts here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gates.core.errors import GatesError
from gates.core.run_protocol import GIT_HEAD, RUN_ID
from gates.freeze.check import FreezeReport
from gates.receipts.run_stamp import Finished
from gates.sandbox import Isolation, SandboxHost, SandboxSupport, prepared
from gates.sandbox import Request as SandboxRequest
from gates.sandbox.supervise import launch
from gates.training.run_folder import collect
from gates.workspace.repository import Workspace


@dataclass(frozen=True)
class Place:
    """Where the run writes and runs from: the run folder (workspace path and folder) and
    the working folder it was launched from."""

    relpath: str
    folder: Path
    cwd: Path


def chosen_sandbox(wanted: bool, before: FreezeReport, host: SandboxHost) -> SandboxSupport | None:
    """The sandbox to run in (None: --no-sandbox); one that cannot start stops the run."""
    if not wanted:
        return None
    found = host.support()
    if found.mechanism is None:
        raise GatesError(f"cannot start a sandbox, nothing was run or signed: {found.reason}")
    if not before.head:
        raise GatesError("nothing is committed: the sandbox runs the commit under audit")
    return found


def sandboxed(
    workspace: Workspace,
    command: list[str],
    found: SandboxSupport,
    place: Place,
    *,
    protocol: Mapping[str, str],
    log: Path,
    host: SandboxHost,
) -> tuple[Finished, Isolation]:
    """The run in the sandbox; what it wrote in its output folder is collected into the run
    folder once its whole process tree is gone."""
    root = workspace.root
    settings = workspace.config.sandbox
    request = SandboxRequest(
        root=root,
        commit=protocol[GIT_HEAD],
        excluded=workspace.config.evidence.locations,
        command=command,
        cwd=place.cwd,
        output_at=place.folder,
        protocol=protocol,
        network=settings.network,
        env_names=settings.env,
        inputs=settings.inputs,
        writable_copies=settings.writable_copies,
        host=host,
    )
    with prepared(found, request) as ready:
        finished = launch(
            ready.argv,
            ready.env,
            ready.output.parent,
            protocol[RUN_ID],
            log=log,
            own_code=root,
            sandboxed=True,
        )
        collect(ready.output, place.folder, place.relpath)
    return finished, ready.isolation


def launch_run(
    workspace: Workspace,
    command: list[str],
    found: SandboxSupport | None,
    place: Place,
    *,
    protocol: Mapping[str, str],
    log: Path,
    host: SandboxHost,
) -> tuple[Finished, Isolation]:
    """The run in the sandbox, or (``found`` None: --no-sandbox) in the workspace with the
    environment gates was started with and the run protocol's variables."""
    if found is not None:
        return sandboxed(workspace, command, found, place, protocol=protocol, log=log, host=host)
    child_env = {**host.environment, **protocol}
    finished = launch(
        command, child_env, place.cwd, protocol[RUN_ID], log=log, own_code=workspace.root
    )
    names = tuple(sorted(child_env))
    isolation = Isolation(
        mechanism="none", network=True, commit=protocol[GIT_HEAD], environment=names
    )
    return finished, isolation
