"""The replay report (`<run>/replay.json`, bound and signed by the replay attestation) and
the audit's judgement of it: formal steps count only with the replay the policy asks for."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gates.core.json_writer import indented_json
from gates.replay.environments import EnvironmentDifference, describe
from gates.replay.windows import SEED_SOURCES, sample_windows

REPLAY_FILE = "replay.json"
REPLAY_FORMAT = "gates.replay/v1"
Outcome = Literal["match", "mismatch", "inconclusive", "error"]


class Mismatch(BaseModel):
    """The first step where the replay differs, and what differed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step: int
    what: str  # one line, e.g. "loss bits 3ff0... != 3ff1..."; "state differs in optimizer"
    loss_committed: str | None = None
    loss_replayed: str | None = None
    parts: tuple[str, ...] = ()


class WindowResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    first: int
    last: int
    resumed_from: int
    # "inconclusive": it differs, but the replay ran on another build or hardware than the
    # run, where bit-exact replay is not promised
    result: str  # "match", "mismatch", "inconclusive" or "error"
    mismatch: Mismatch | None = None
    error: str | None = None
    duration_s: float = 0.0


class ReplayReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["gates.replay/v1"]
    run: str  # the run folder
    framework: str
    run_attestation: str  # the run receipt's id
    commitments_sha256: str
    total_steps: Annotated[int, Field(ge=0)]
    seed: str
    seed_source: Literal["ci", "policy+time"]
    policy_commit: str | None
    replayed_at: str
    sampled: Annotated[int, Field(ge=0)]  # how many windows were drawn from the seed
    window_steps: Annotated[int, Field(ge=1)]
    windows: tuple[WindowResult, ...]
    result: Outcome
    environment: dict[str, Any]
    # the run's build and hardware (from its bound env.json) and every field the
    # verifier's environment does not share (docs/replay.md: cross-build judging)
    run_environment: dict[str, str | None] = Field(default_factory=dict)
    differences: tuple[EnvironmentDifference, ...] = ()


def read_report(path: Path) -> ReplayReport | str:
    try:
        return ReplayReport.model_validate_json(path.read_bytes())
    except OSError as exc:
        return f"cannot read: {exc.strerror}"
    except ValidationError as exc:
        first = exc.errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"


def report_problem(  # noqa: PLR0911  (one return per reason a replay does not count)
    report: ReplayReport,
    *,
    required: int,
    width: int,
    run_id: str,
    commitments_sha256: str,
    across_builds: bool = False,
) -> str | None:
    """Why a (signed, trusted) replay report does not discharge the policy's replay."""
    if report.run_attestation != run_id or report.commitments_sha256 != commitments_sha256:
        return "replays another run (its run attestation or commitments differ)"
    if report.differences and not across_builds:
        return (
            f"replayed on another build or hardware ({describe(report.differences)}): the "
            "policy counts only replays on the run's own (params.replay_across_builds = false)"
        )
    if report.seed_source not in SEED_SOURCES:
        return f"seed source {report.seed_source} is not the verifier's"
    if report.window_steps != width or report.sampled < required:
        return (
            f"replayed {report.sampled} sampled window(s) of {report.window_steps} step(s); "
            f"the policy requires {required} of {width}"
        )
    drawn = sample_windows(report.seed, report.total_steps, report.sampled, width)
    sampled = [(w.first, w.last) for w in report.windows[: report.sampled]]
    if sampled != [(w.first, w.last) for w in drawn]:
        return "its windows are not the ones its seed draws"
    failed = [w for w in report.windows if w.result != "match"]
    if failed or report.result != "match":
        first = failed[0] if failed else None
        where = f" (window {first.first}-{first.last}: {first.result})" if first else ""
        return f"replay result {report.result}{where}"
    return None


def report_json(report: ReplayReport) -> str:
    return indented_json(report.model_dump(mode="json"), sort_keys=True) + "\n"
