"""Recording a training run from inside the training code.

    from gates.training.recorder import RunRecorder

    with RunRecorder(model_config="config.json") as run:
        for step in range(1, 101):
            loss = train_step()
            run.record(step, loss)          # a paddle Tensor or a float

Safe by default: the framework comes from the launching `gates run --framework`
(GATES_FRAMEWORK in the child's environment) or is passed; it is never guessed.
The model config is required (argument, or `gates run --model-config`, which
passes GATES_MODEL_CONFIG): env.json must carry its digest. A NaN or infinite
loss is recorded as such (`"non_finite"`), never written into loss.json as a
number: loss.json ends before it, so the comparison names that step as the
first divergence.

Each loss is appended to `raw_loss.jsonl` as it comes (flushed, so a killed
run keeps every finished step), as the float64 `float(loss)`, whose JSON
form round-trips exactly: never rounded. On a clean exit the recorder writes
`loss.json` and `env.json` atomically. Under `gates run` the run folder comes
from GATES_RUN_DIR and `gates run` stamps the receipts; used alone inside a
gates workspace, the recorder writes them itself.

In a paddle.distributed job every rank records into `rank-<PADDLE_TRAINER_ID>/`
of the run folder; `aggregate_ranks` checks that the ranks agree before one
run receipt is written.

`GatesCallback` plugs the recorder into a PaddleFormers (or HF) Trainer:
on_step_end / on_log / on_train_end. Trainers log losses averaged and
rounded (`round(x, 4)`); log every step (`logging_steps=1`) and prefer
`record()` from the training step when bit-exact losses matter: the loss
checker flags rounded series.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from gates.core.atomic import write_text_atomic
from gates.core.errors import GatesError
from gates.core.json_writer import pretty_json
from gates.replay.commitments import StepCommitter, chosen_save_every

if TYPE_CHECKING:  # the numeric code loads with the first state committed
    from gates.replay.state import TrainingState
from gates.core.run_protocol import RunProtocol, protocol, rank_folder
from gates.training.env import capture

FRAMEWORKS = ("torch", "paddle")


class RecorderError(GatesError):
    """Raised in the training code: its traceback shows the whole line, fix included."""

    def __str__(self) -> str:
        return self.one_line()


def _framework(given: str | None, launched: str | None) -> str:
    """The side, from the launching `gates run` or the caller; they must agree; never guessed."""
    chosen = given or launched
    if chosen is None:
        raise RecorderError(
            "no framework for this run's env.json and receipts",
            hint="run under `gates run --framework torch|paddle`, or pass "
            "RunRecorder(framework='torch'|'paddle')",
        )
    if chosen not in FRAMEWORKS:
        raise RecorderError(f"framework {chosen!r} is not torch or paddle")
    if given and launched and given != launched:
        raise RecorderError(
            f"RunRecorder(framework={given!r}) but `gates run --framework {launched}` launched it",
            hint="launch each side with its own --framework",
        )
    return chosen


def _model_config(given: str | Path | None, launched: str | None) -> Path:
    """The model's config.json: env.json carries its sha256 (the results schema needs it)."""
    chosen = given or launched
    if chosen is None:
        raise RecorderError(
            "no model config: env.json needs model_config_sha256",
            hint="pass RunRecorder(model_config='path/to/config.json'), or "
            "`gates run --model-config path/to/config.json`",
        )
    path = Path(chosen)
    if not path.is_file():
        raise RecorderError("model config not found", file=str(path), hint="check the path")
    return path


class RunRecorder:
    """Records one run's losses (unrounded) and environment into a run folder."""

    def __init__(
        self,
        folder: str | Path | None = None,
        *,
        framework: str | None = None,
        model_config: str | Path | None = None,
        weights_loaded: bool = False,
        revision: str | None = None,
        first_step: int = 1,
        save_every: int | None = None,
    ) -> None:
        self.protocol: RunProtocol = protocol()
        chosen = folder or self.protocol.run_dir
        if chosen is None:
            raise GatesError("no run folder: pass one, or run under `gates run`")
        self.framework = _framework(framework, self.protocol.framework)
        self.model_config = _model_config(model_config, self.protocol.model_config)
        self.folder = rank_folder(Path(chosen))
        self.folder.mkdir(parents=True, exist_ok=True)
        self.non_finite: dict[str, object] | None = None
        self.weights_loaded = weights_loaded
        self.revision = revision
        self.losses: list[float] = []
        self.first_step = first_step  # a replayed window resumes after step first_step - 1
        self.steps = first_step - 1  # the last step recorded
        self._raw = (self.folder / "raw_loss.jsonl").open("w", encoding="utf-8")
        every = chosen_save_every(save_every, self.protocol.save_every)
        self._committer = StepCommitter(self.folder, self.framework, every)

    def start(self, state: TrainingState) -> None:
        """Commit the state training starts from (step 0 of a run: always saved)."""
        self._committer.commit(self.first_step - 1, None, state)

    def record(self, step: int, loss: Any, *, state: TrainingState | None = None) -> None:
        """Append step ``step`` (1, 2, 3, ...) with ``float(loss)``, unrounded; with
        ``state`` (the training state after the step), commit its digest (docs/replay.md)."""
        expected = self.steps + 1
        if step != expected:
            raise GatesError(
                f"step {step} recorded where step {expected} was expected",
                hint="record every step, in order (with a Trainer: logging_steps=1)",
            )
        value = float(loss)
        self.steps = step
        if not math.isfinite(value) or self.non_finite is not None:
            self._record_non_finite(step, value)
            return
        self._raw.write(json.dumps({"step": step, "loss": value}) + "\n")
        self._raw.flush()
        self.losses.append(value)
        if state is not None:
            self._committer.commit(step, value, state)

    def _record_non_finite(self, step: int, value: float) -> None:
        """A NaN or infinite loss: its raw line says so (loss null, never a number), and
        loss.json ends before the first one, naming it."""
        word = str(value) if math.isfinite(value) else repr(value)  # nan, inf, -inf
        line: dict[str, object] = {"step": step, "loss": None, "non_finite": word}
        if math.isfinite(value):  # a step after the first non-finite one
            line = {"step": step, "loss": None, "after_non_finite": value}
        self._raw.write(json.dumps(line) + "\n")
        self._raw.flush()
        if self.non_finite is None:
            self.non_finite = {"step": step, "loss": word}
            print(
                f"gates: step {step} loss is {word}: recorded as non-finite; "
                f"loss.json stops at step {step - 1} and names it",
                file=sys.stderr,
            )

    def environment(self) -> dict[str, Any]:
        found = capture(model_config=self.model_config, framework=self.framework)
        found.update(
            {
                "framework": self.framework,
                "weights_loaded": self.weights_loaded,
                "revision": self.revision,
                "git_head": self.protocol.git_head,
                "run_id": self.protocol.run_id,
            }
        )
        return found

    def finish(self) -> None:
        """Write loss.json and env.json atomically (and receipts when used alone)."""
        self._raw.close()
        self._committer.finish()
        series: dict[str, object] = {"losses": self.losses}
        if self.non_finite is not None:
            series["non_finite"] = self.non_finite
        write_text_atomic(self.folder / "loss.json", json.dumps(series) + "\n")
        write_text_atomic(self.folder / "env.json", pretty_json(self.environment()))
        if not self.protocol.under_gates_run:
            _receipt_alone(self.folder, self.framework, self.protocol)

    def __enter__(self) -> RunRecorder:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if kind is None:
            self.finish()
        else:
            self._raw.close()  # finished steps stay; no loss.json for a failed run


def _receipt_alone(folder: Path, framework: str, run: RunProtocol) -> None:
    """Outside `gates run`: stamp the files here, if this is a gates workspace (signed with
    the key GATES_SIGNING_KEY names, if any)."""
    from gates.receipts.create import ReceiptRequest, create_receipt  # noqa: PLC0415
    from gates.receipts.model import ArtifactKind, Framework  # noqa: PLC0415
    from gates.trust.keys import configured_key  # noqa: PLC0415
    from gates.workspace.repository import open_workspace  # noqa: PLC0415

    try:
        workspace = open_workspace(folder)
    except GatesError:
        return
    base = folder.resolve().relative_to(workspace.root).as_posix()
    key = configured_key(run.signing_key)
    for name, kind in (
        ("loss.json", ArtifactKind.LOSS),
        ("raw_loss.jsonl", ArtifactKind.RAW_LOSS),
        ("env.json", ArtifactKind.ENV),
    ):
        request = ReceiptRequest(
            kind=kind, subjects=(f"{base}/{name}",), framework=Framework(framework), overwrite=True
        )
        create_receipt(workspace, request, signing_key=key)


class GatesCallback:
    """A PaddleFormers/HF Trainer callback that records the logged loss of every step and,
    with ``commit_state``, the training state after it (docs/replay.md): the Trainer hands
    the model and optimizer to on_step_end, which comes before on_log."""

    def __init__(self, recorder: RunRecorder, *, commit_state: bool = False) -> None:
        self.recorder = recorder
        self.commit_state = commit_state
        self._state: tuple[int, TrainingState] | None = None

    def _capture(self, args: Any, state: Any, kwargs: dict[str, Any]) -> TrainingState | None:
        model, optimizer = kwargs.get("model"), kwargs.get("optimizer")
        if not self.commit_state or model is None or optimizer is None:
            return None
        from gates.replay.capture import capture_paddle  # noqa: PLC0415

        batches = int(state.global_step) * int(getattr(args, "gradient_accumulation_steps", 1) or 1)
        return capture_paddle(dict(model.named_parameters()), optimizer, data_position=batches)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        captured = self._capture(args, state, kwargs)
        if captured is not None:  # the state training starts from: step 0, always saved
            self.recorder.start(captured)
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        captured = self._capture(args, state, kwargs)
        if captured is not None:
            self._state = (int(state.global_step), captured)
        return control

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        if logs and "loss" in logs:
            step = int(state.global_step)
            committed = self._state[1] if self._state and self._state[0] == step else None
            self.recorder.record(step, logs["loss"], state=committed)
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self.recorder.finish()
        return control


def aggregate_ranks(folder: Path) -> tuple[list[Path], list[str]]:
    """The rank folders of a run, and why they disagree (git head, config hash, framework)."""
    ranks = sorted(p for p in folder.glob("rank-*") if p.is_dir())
    problems: list[str] = []
    seen: dict[str, set[str]] = {
        "git_head": set(),
        "model_config_sha256": set(),
        "framework": set(),
    }
    for rank in ranks:
        try:
            env = json.loads((rank / "env.json").read_text())
        except (OSError, ValueError):
            problems.append(f"{rank.name}: no readable env.json")
            continue
        for key, values in seen.items():
            values.add(str(env.get(key)))
    problems += [
        f"ranks disagree on {key}: {', '.join(sorted(values))}"
        for key, values in seen.items()
        if len(values) > 1
    ]
    return ranks, problems
