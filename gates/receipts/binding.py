"""Entrypoint binding: evidence a training run wrote counts as formal only through a
signed run attestation of its side's declared entrypoint, and only when what the
run claims about itself (its parallel profile) agrees with what it captured.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gates.freeze.check import FreezeConfig, entrypoint_script_problems
from gates.receipts.kinds import RUN_OUTPUT_KINDS, ArtifactKind
from gates.receipts.model import Receipt, RunRecord

_PYTHON = re.compile(r"python(\d+(\.\d+)*)?")

Entrypoints = Mapping[str, tuple[str, ...]]
"""framework -> the argv prefix the results contract declares for that side."""


def _resolved(program: str) -> str | None:
    """The real file an absolute program path, or a bare name looked up on PATH, runs."""
    if "/" not in program:
        found = shutil.which(program)
        return os.path.realpath(found) if found else None
    if not program.startswith("/"):
        return None  # a path relative to the run folder names a file of the audited repository
    return os.path.realpath(program) if os.access(program, os.X_OK) else None


def program_matches(have: str, want: str) -> bool:
    """argv[0] ``have`` runs the declared program ``want``: the same bare name (looked up on
    PATH by the launcher), or a path that resolves to the same file as ``want`` does here.
    A declared python also matches the interpreter gates itself runs with. Never by basename:
    ``/anything/python`` or a committed ``tools/python`` is not `python`."""
    if have == want:
        return True
    target = _resolved(have)
    if target is None:
        return False
    allowed = {_resolved(want)}
    if _PYTHON.fullmatch(posixpath.basename(want)):
        allowed.add(os.path.realpath(sys.executable))
    return target in allowed


def _looks_like_path(argument: str) -> bool:
    return "/" in argument or argument.endswith(".py")


def argv_matches(argv: tuple[str, ...], cwd: str, declared: tuple[str, ...]) -> bool:
    """``argv`` (run from workspace folder ``cwd``) starts with the declared entrypoint.

    The program is resolved (`program_matches`), paths compared as
    workspace paths (so `train.py` run from `model/` is `model/train.py`), and
    every other argument literally.
    """
    if not declared or len(argv) < len(declared):
        return False
    for index, want in enumerate(declared):
        have = argv[index]
        if index == 0:
            same = program_matches(have, want)
        elif _looks_like_path(want):
            same = posixpath.normpath(posixpath.join(cwd, have)) == posixpath.normpath(want)
        else:
            same = have == want
        if not same:
            return False
    return True


def declared_scripts(declared: tuple[str, ...]) -> list[str]:
    """The path arguments of an entrypoint (they must lie in the pinned source tree)."""
    return [argument for argument in declared[1:] if _looks_like_path(argument)]


@dataclass(frozen=True)
class DeclaredEntrypoint:
    """One side's entrypoint as the results contract in force declares it."""

    side: str  # reference or candidate
    framework: str
    argv: tuple[str, ...]
    #: why each declared script cannot be trusted to be what was frozen (outside the pinned tree)
    outside: tuple[str, ...] = ()

    @property
    def scripts(self) -> list[str]:
        return declared_scripts(self.argv)

    def problems(self) -> list[str]:
        """What keeps this declaration from binding anything, as the results contract says it."""
        if not self.argv:
            return [f"params.{self.side}_entrypoint is not declared"]
        problems = []
        if not self.scripts:
            problems.append(f"params.{self.side}_entrypoint names no script of the source tree")
        return problems + [f"params.{self.side}_entrypoint: {problem}" for problem in self.outside]


def declared_entrypoints(
    root: Path, config: FreezeConfig, sides: tuple[tuple[str, str, tuple[str, ...]], ...]
) -> tuple[DeclaredEntrypoint, ...]:
    """Each (side, framework, argv) with the scripts of it that lie outside the pinned tree:
    the one place the rule "entrypoint scripts lie in the pinned tree" is applied."""
    return tuple(
        DeclaredEntrypoint(
            side,
            framework,
            argv,
            tuple(entrypoint_script_problems(root, config, declared_scripts(argv)).values()),
        )
        for side, framework, argv in sides
    )


def entrypoints_in_force(declared: tuple[DeclaredEntrypoint, ...]) -> tuple[Entrypoints, list[str]]:
    """framework -> declared entrypoint, and the problems that void a side's entrypoint (a
    script outside the pinned source tree: nothing of that side can be formal)."""
    found = {d.framework: d.argv for d in declared if d.argv and not d.outside}
    voided = [
        f"{d.side}_entrypoint: {'; '.join(d.outside)}: nothing of that side can be formal"
        for d in declared
        if d.outside
    ]
    return found, voided


def _captured_device(environment: Mapping[str, str]) -> str:
    name = environment.get("device_name", "")
    cuda = environment.get("cuda_build") == "True" and name not in ("", "cpu", "None")
    return "cuda" if cuda else "cpu"


def profile_problems(run: Receipt) -> list[str]:
    """Where a run's declared profile contradicts what its signed capture recorded."""
    framework = run.framework.value if run.framework else None
    return environment_problems(run.provenance.profile, run.provenance.environment, framework)


def environment_problems(
    profile: Mapping[str, str], environment: Mapping[str, str], declared: str | None
) -> list[str]:
    """Where a profile contradicts a capture (as `gates run` records it, values as strings):
    the audit's rule, also asked by `gates run`'s pre-flight before anything runs."""
    problems = []
    device = profile.get("device")
    captured = _captured_device(environment)
    if device is not None and device.lower() != captured:
        build = "a CUDA build" if environment.get("cuda_build") == "True" else "a CPU build"
        problems.append(
            f"profile claims device={device} but the run captured {captured} on {build}"
        )
    world = profile.get("world")
    captured_world = environment.get("world_size", "1")
    if world is not None and world != captured_world:
        problems.append(
            f"profile claims world={world} but the launcher's rank environment says "
            f"{captured_world}"
        )
    framework = environment.get("framework")  # absent: gates could not import it (unknown)
    if declared is not None and framework and framework != declared:
        problems.append(f"run is declared {declared} but captured framework {framework}")
    return problems


@dataclass(frozen=True)
class IsolationPolicy:
    """``[sandbox]`` as the judge reads it: does a formal run need the sandbox, and which
    sides' runs may be recorded after the fact (mechanism "recorded") instead."""

    required: bool = False
    recorded: tuple[str, ...] = ()


def isolation_problem(record: RunRecord, framework: str, policy: IsolationPolicy) -> str | None:
    """Why a run was not isolated as the policy requires (None: it was)."""
    isolation = record.isolation
    if not policy.required:
        return None
    if isolation is None:
        return "run not isolated: its attestation has no isolation record (signed before sandboxes)"
    if isolation.mechanism == "none":
        return "run not isolated: it ran without the sandbox (gates run --no-sandbox)"
    if isolation.mechanism == "recorded" and framework not in policy.recorded:
        return (
            "run not isolated: recorded after the fact, no sandbox vouched for it "
            f"([sandbox] recorded does not name {framework})"
        )
    return None


def run_problems(
    run: Receipt, entrypoints: Entrypoints, *, isolation: IsolationPolicy | None = None
) -> list[str]:
    """Why a run attestation cannot back formal evidence (empty when it can). Where the
    policy requires isolation ([sandbox] required), a run that had none is one reason."""
    if run.framework is None:
        return ["the run names no framework (gates run --framework ...)"]
    declared = entrypoints.get(run.framework.value)
    if not declared:
        return [
            f"the results contract declares no entrypoint for {run.framework.value} "
            "(params reference_entrypoint / candidate_entrypoint)"
        ]
    record = run.provenance.run
    argv = run.provenance.command or ()
    problems = []
    if record is None:
        problems.append("the run attestation has no run record")
    elif not argv_matches(tuple(argv), record.cwd, declared):
        problems.append(
            f"argv {' '.join(argv)!r} is not the declared {run.framework.value} entrypoint "
            f"{' '.join(declared)!r}"
        )
    elif record.exit_status != 0:
        problems.append(f"the run exited with status {record.exit_status}")
    if record is not None and isolation is not None:
        unisolated = isolation_problem(record, run.framework.value, isolation)
        if unisolated is not None:
            problems.append(unisolated)
    return problems + profile_problems(run)


def needs_run(receipt: Receipt) -> bool:
    return receipt.kind in RUN_OUTPUT_KINDS


def is_run(receipt: Receipt) -> bool:
    return receipt.kind is ArtifactKind.RUN


def run_covers(run: Receipt, output: Receipt) -> bool:
    """The run attestation is of the output's framework and bound each of its files, with
    the same digest: a run cannot vouch for files it did not write."""
    bound = {(subject.path, subject.sha256) for subject in run.subjects}
    return run.framework == output.framework and all(
        (subject.path, subject.sha256) in bound for subject in output.subjects
    )
