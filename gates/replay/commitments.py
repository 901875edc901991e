"""The commitments file of a run: per step, the loss (and its float64 bits) and the digest
of the training state after the step, per part; which states were saved.

Written by the recorder inside the training process (`StepCommitter`), read by
`gates replay` and the audit (`read_commitments`). receipts/schemas/commitments.schema.json
mirrors the model.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from gates.core.atomic import write_text_atomic
from gates.core.errors import GatesError
from gates.replay.names import PARTS, state_file_name

if TYPE_CHECKING:
    from gates.replay.state import TrainingState

COMMITMENTS_FILE = "commitments.json"
COMMITMENTS_FORMAT = "gates.commitments/v1"
STATES_FOLDER = "states"
DEFAULT_SAVE_EVERY = 10

Hex64 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
LossBits = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{16}$")]


class CommitmentsError(GatesError):
    """A commitments file that is missing, unreadable or inconsistent."""


def loss_bits(value: float) -> str:
    """The IEEE-754 float64 bits of a loss, big-endian hex: -0.0 and 0.0 differ."""
    return struct.pack(">d", value).hex()


class StepCommitment(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    step: Annotated[int, Field(ge=0)]
    loss: float | None  # None for the state a run (or a window) starts from
    loss_bits: LossBits | None
    state: Hex64
    parts: dict[str, Hex64]
    saved: str | None  # the saved state, relative to the run folder


class Commitments(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["gates.commitments/v1"]
    framework: str
    save_every: Annotated[int, Field(ge=0)]
    steps: tuple[StepCommitment, ...]

    def by_step(self) -> dict[int, StepCommitment]:
        return {commitment.step: commitment for commitment in self.steps}

    @property
    def last_step(self) -> int:
        return self.steps[-1].step if self.steps else 0

    def saved_steps(self) -> list[int]:
        return [c.step for c in self.steps if c.saved is not None]


def _consistency_problem(commitments: Commitments) -> str | None:  # noqa: PLR0911
    steps = [c.step for c in commitments.steps]
    if not steps:
        return "commits no step"
    if steps != list(range(steps[0], steps[0] + len(steps))):
        return "steps are not consecutive"
    for c in commitments.steps:
        if sorted(c.parts) != sorted(PARTS):
            return f"step {c.step}: parts must be exactly {', '.join(PARTS)}"
        if (c.loss is None) != (c.loss_bits is None):
            return f"step {c.step}: loss and loss_bits go together"
        if c.loss is not None and loss_bits(c.loss) != c.loss_bits:
            return f"step {c.step}: loss_bits are not the bits of loss"
        if c.saved is not None and (c.saved.startswith("/") or ".." in c.saved.split("/")):
            return f"step {c.step}: saved state path {c.saved} leaves the run folder"
    return None


def read_commitments(path: Path, display: str) -> Commitments:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CommitmentsError(
            f"{display}: the run has no step commitments",
            hint="record the training state with run.record(step, loss, state=...) "
            "(docs/replay.md) and run it again under `gates run`",
        ) from None
    except OSError as exc:
        raise CommitmentsError(f"{display}: cannot read: {exc.strerror}") from None
    try:
        commitments = Commitments.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise CommitmentsError(f"{display}: {where}: {first['msg']}") from None
    problem = _consistency_problem(commitments)
    if problem:
        raise CommitmentsError(f"{display}: {problem}")
    return commitments


def chosen_save_every(given: int | None, protocol: str | None) -> int:
    """How often the full state is saved: as given, else as the run protocol says
    (GATES_STATE_EVERY, which `gates run` sets from the policy), else the default."""
    if given is not None:
        return given
    if protocol is not None and protocol.isdigit():
        return int(protocol)
    return DEFAULT_SAVE_EVERY


class StepCommitter:
    """Commits each step's state, saves every K-th (and the last) under `states/`."""

    def __init__(self, folder: Path, framework: str, save_every: int = DEFAULT_SAVE_EVERY) -> None:
        self.folder = folder
        self.framework = framework
        self.save_every = save_every
        self.steps: list[StepCommitment] = []
        self._last: TrainingState | None = None

    def commit(self, step: int, loss: float | None, state: TrainingState) -> None:
        # the numeric code loads with the first commitment, never on the audit's path
        from gates.replay.state import save_state, state_digest  # noqa: PLC0415

        parts = state.part_digests()
        saved = None
        if step == 0 or (self.save_every and step % self.save_every == 0):
            saved = f"{STATES_FOLDER}/{state_file_name(step)}"
            save_state(state, self.folder / saved)
        # constructed without validation per step (the fields are ours, by construction);
        # the file is validated as a whole when it is written and whenever it is read
        self.steps.append(
            StepCommitment.model_construct(
                step=step,
                loss=loss,
                loss_bits=None if loss is None else loss_bits(loss),
                state=state_digest(parts),
                parts=parts,
                saved=saved,
            )
        )
        self._last = state

    def finish(self) -> None:
        """Save the last state (always) and write the commitments file atomically."""
        if not self.steps or self._last is None:
            return
        last = self.steps[-1]
        if last.saved is None:
            from gates.replay.state import save_state  # noqa: PLC0415

            saved = f"{STATES_FOLDER}/{state_file_name(last.step)}"
            save_state(self._last, self.folder / saved)
            self.steps[-1] = last.model_copy(update={"saved": saved})
        document = Commitments.model_validate(
            {
                "format": COMMITMENTS_FORMAT,
                "framework": self.framework,
                "save_every": self.save_every,
                "steps": [c.model_dump() for c in self.steps],
            }
        )
        write_text_atomic(
            self.folder / COMMITMENTS_FILE, json.dumps(document.model_dump(mode="json")) + "\n"
        )
