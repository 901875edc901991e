"""The run's environment against the verifier's: which framework build and hardware fields
differ. Bit-exact replay is promised only on the run's own build and hardware; the policy
decides whether a replay elsewhere may count (`replay_across_builds`, docs/replay.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

#: what makes a framework build: the same numbers need the same kernels
BUILD_FIELDS = (
    "framework",
    "framework_version",
    "framework_commit",
    "cuda_build",
    "cuda_version",
    "cudnn_version",
)
#: what the run ran on; a CPU is told apart by its vendor and the extensions that pick its
#: kernels (`cpu_kernels`: the same build computes other last bits with IFMA and VBMI, or
#: AMX and AVX512-FP16, than on a Cascade Lake)
HARDWARE_FIELDS = ("device_name", "device_count", "cpu_kernels")


class EnvironmentDifference(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    field: str
    kind: Literal["build", "hardware"]
    run: str | None
    replay: str | None


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def environment_of(env: dict[str, Any]) -> dict[str, str | None]:
    """The build and hardware fields of an env.json (or of a capture), as text."""
    return {name: _text(env.get(name)) for name in BUILD_FIELDS + HARDWARE_FIELDS}


def environment_differences(
    run: dict[str, Any], replay: dict[str, Any]
) -> tuple[EnvironmentDifference, ...]:
    """Every build or hardware field the verifier's environment does not share with the
    run's. A field the run did not record (null there) is not a difference."""
    found = []
    for name in BUILD_FIELDS + HARDWARE_FIELDS:
        theirs, mine = _text(run.get(name)), _text(replay.get(name))
        if theirs is not None and theirs != mine:
            kind: Literal["build", "hardware"] = "build" if name in BUILD_FIELDS else "hardware"
            found.append(EnvironmentDifference(field=name, kind=kind, run=theirs, replay=mine))
    return tuple(found)


def describe(differences: tuple[EnvironmentDifference, ...]) -> str:
    """One line: `framework_version 2.14.1+cu130 (run) vs 2.13.0+cpu (replay)`."""
    return "; ".join(f"{d.field} {d.run} (run) vs {d.replay} (replay)" for d in differences)
