"""Entrypoint binding: evidence a training run wrote counts as formal only through a
signed run attestation of its side's declared entrypoint, and only when what the
run claims about itself (its parallel profile) agrees with what it captured.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping

from gates.receipts.kinds import RUN_OUTPUT_KINDS, ArtifactKind
from gates.receipts.model import Receipt

_PYTHON = re.compile(r"python(\d+(\.\d+)*)?")

Entrypoints = Mapping[str, tuple[str, ...]]
"""framework -> the argv prefix the results contract declares for that side."""


def _program(argument: str) -> str:
    name = posixpath.basename(argument)
    return "python" if _PYTHON.fullmatch(name) else name


def _looks_like_path(argument: str) -> bool:
    return "/" in argument or argument.endswith(".py")


def argv_matches(argv: tuple[str, ...], cwd: str, declared: tuple[str, ...]) -> bool:
    """``argv`` (run from workspace folder ``cwd``) starts with the declared entrypoint.

    The program is compared by name (any python3.X is `python`), paths as
    workspace paths (so `train.py` run from `model/` is `model/train.py`), and
    every other argument literally.
    """
    if not declared or len(argv) < len(declared):
        return False
    for index, want in enumerate(declared):
        have = argv[index]
        if index == 0:
            same = _program(have) == _program(want)
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


def run_problems(run: Receipt, entrypoints: Entrypoints) -> list[str]:
    """Why a run attestation cannot back formal evidence (empty when it can)."""
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
