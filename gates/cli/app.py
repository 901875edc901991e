"""The `gates` command line: options -> a typed request -> one plain function per command.

Every error becomes one line on stderr and exit 2; `--debug` adds the traceback.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from gates import __version__
from gates.cli.options import _echo, rendered_by
from gates.core import exitcodes
from gates.core.echo import Output
from gates.core.errors import GatesError
from gates.core.invocation import CheckerMode, Invocation, read_invocation
from gates.receipts.kinds import ArtifactKind, EvidenceClass, Framework
from gates.workspace.repository import Workspace, open_workspace

if TYPE_CHECKING:
    from gates.engine.inputs import AuditInputs

F = TypeVar("F", bound=Callable[..., Any])

_PROFILE_KEY_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_")


class State:
    """The global options, and the one place the environment is read: `invocation`."""

    def __init__(
        self,
        directory: Path,
        policy_ref: str | None,
        trust: Path | None,
        *,
        machine_output: bool = False,
    ) -> None:
        self.directory = directory
        self.policy_ref = policy_ref
        self.trust = trust
        self.machine_output = machine_output  # `--format json` on the command line

    def invocation(
        self, *, verify_all: bool = False, checker: CheckerMode | None = None
    ) -> Invocation:
        """What this command takes from outside its arguments, resolved once: the options
        and the environment."""
        return read_invocation(
            os.environ,
            policy_ref=self.policy_ref,
            trust=self.trust,
            verify_all=verify_all,
            checker=checker,
            terminal=sys.stderr.isatty(),
            machine_output=self.machine_output,
        )

    def inputs(
        self, *, verify_all: bool = False, checker: CheckerMode | None = None
    ) -> AuditInputs:
        """The command's inputs: the workspace under the policy in force (its settings; the
        worktree's pin), that policy, what is read from it once, and the invocation."""
        from gates.engine.inputs import load_inputs

        invocation = self.invocation(verify_all=verify_all, checker=checker)
        return load_inputs(open_workspace(self.directory, invocation.environment), invocation)

    def workspace(self) -> Workspace:
        """The workspace under the policy in force, for a command that judges nothing."""
        return self.inputs().workspace

    def cwd(self) -> Path:
        """Relative paths on the command line start here (-C DIR, like git -C)."""
        return self.directory.resolve()


pass_state = click.make_pass_decorator(State)


@dataclasses.dataclass(frozen=True)
class _Started:
    """What `main` saw of the whole command line before click parsed it."""

    machine_output: bool  # `--format json` somewhere: no progress bars beside the document


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-C",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    help="Run as if started in this folder (the workspace is found from there upwards).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.option(
    "--policy-ref",
    metavar="REF",
    help="Protected git ref whose contracts, waivers and settings judge (env GATES_POLICY_REF).",
)
@click.option(
    "--trust",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Trust file outside the workspace: who may sign formal evidence (env GATES_TRUST).",
)
@click.version_option(__version__, prog_name="gates")
@click.pass_context
def cli(
    ctx: click.Context, directory: Path, debug: bool, policy_ref: str | None, trust: Path | None
) -> None:
    """Evidence-gated governance for cross-framework training alignment."""
    del debug  # read by main() from the parsed options: tracebacks for errors
    machine_output = isinstance(ctx.obj, _Started) and ctx.obj.machine_output
    ctx.obj = State(directory, policy_ref, trust, machine_output=machine_output)


@cli.command()
@click.option("--pin", metavar="REV", help="Pin the source freeze at this commit.")
@click.option("--force", is_flag=True, help="Overwrite an existing gates.toml and contracts.")
@pass_state
def init(state: State, pin: str | None, force: bool) -> int:
    """Write gates.toml and the default GLM-5.2 contract set."""
    from gates.commands import init as init_command

    return init_command.init(state.directory, pin=pin, force=force, echo=_echo)


_VERIFY_ALL = click.option(
    "--verify-all",
    is_flag=True,
    help="Ignore the stat cache: hash every file again (catches content replaced in place).",
)


@cli.command()
@rendered_by("gates.commands.audit:RENDERERS", "text")
@_VERIFY_ALL
@pass_state
def audit(state: State, out: Output, verify_all: bool) -> int:
    """Evaluate every contract: exit 0 pass, 1 blocked, 2 error."""
    from gates.commands import audit as audit_command

    try:
        code = audit_command.audit(state.inputs(verify_all=verify_all), out=out)
    except Exception as error:
        if out.as_json:  # stdout holds exactly one JSON document, even now
            out.echo(audit_command.error_document(error))
        raise
    return code


@cli.group()
def freeze() -> None:
    """The source freeze: show the verdict, or move the pin."""


def _output(default: str) -> Callable[[F], F]:
    """-o/--output: where a checker's receipt goes; its output file goes beside it; plus
    --no-receipt (a throwaway check) and --force (replace even by a downgrade)."""
    from gates.cli.options import checker_options

    return checker_options(default)


_RULES = click.option(
    "--rules",
    metavar="CONTRACT",
    help="Naming rules from this contract (default: the workspace's tensor-inventory).",
)


@freeze.command("show")
@rendered_by("gates.commands.freeze:RENDERERS", "text")
@pass_state
def freeze_show(state: State, out: Output) -> int:
    """Print verdict=pass|blocked and one reason a line."""
    from gates.commands import freeze as freeze_command

    inputs = state.inputs()
    return freeze_command.show(inputs.workspace, inputs.freeze_inputs, out=out)


@freeze.command("pin")
@click.argument("rev")
@pass_state
def freeze_pin(state: State, rev: str) -> int:
    """Set [freeze] pin to REV's commit, keeping the rest of gates.toml byte for byte."""
    from gates.commands import freeze as freeze_command

    return freeze_command.pin(state.workspace(), rev, echo=_echo)


@cli.group()
def receipt() -> None:
    """Create, verify and show receipts."""


def _parse_profile(pairs: tuple[str, ...]) -> dict[str, str]:
    profile: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or not set(key) <= _PROFILE_KEY_CHARS or not key[0].isalpha():
            raise click.BadParameter(
                f"{pair!r}: expected KEY=VALUE with a lowercase key (e.g. tp=2)",
                param_hint="--profile",
            )
        if key in profile:
            raise click.BadParameter(f"{key} given twice", param_hint="--profile")
        profile[key] = value
    return profile


@receipt.command("create")
@click.option(
    "--kind",
    required=True,
    type=click.Choice([k.value for k in ArtifactKind]),
    help="The artifact kind of the subjects.",
)
@click.option(
    "--subject",
    "subjects",
    multiple=True,
    required=True,
    metavar="PATH",
    help="A workspace-relative artifact file (repeatable).",
)
@click.option("--framework", type=click.Choice([f.value for f in Framework]))
@click.option(
    "--profile",
    "profile",
    multiple=True,
    metavar="KEY=VALUE",
    help="Parallel profile entry, e.g. tp=2 (repeatable).",
)
@click.option(
    "--class",
    "requested_class",
    type=click.Choice([c.value for c in EvidenceClass]),
    default="formal",
    show_default=True,
    help="formal is granted only while the source freeze passes; otherwise probe.",
)
@click.option(
    "-o",
    "--output",
    metavar="PATH",
    help="Workspace-relative receipt path (default: beside the first subject).",
)
@click.option("--force", is_flag=True, help="Overwrite an existing receipt.")
@pass_state
def receipt_create(
    state: State,
    kind: str,
    subjects: tuple[str, ...],
    framework: str | None,
    profile: tuple[str, ...],
    requested_class: str,
    output: str | None,
    force: bool,
) -> int:
    """Bind artifact files to provenance and stamp them formal or probe."""
    from gates.commands import receipt as receipt_command
    from gates.receipts.create import ReceiptRequest

    request = ReceiptRequest(
        kind=ArtifactKind(kind),
        subjects=subjects,
        framework=Framework(framework) if framework else None,
        profile=_parse_profile(profile),
        requested_class=EvidenceClass(requested_class),
        output=output,
        overwrite=force,
    )
    return receipt_command.create(state.inputs(), request, echo=_echo)


@receipt.command("verify")
@click.argument("paths", nargs=-1, required=True)
@rendered_by("gates.commands.receipt:VERIFY_RENDERERS", "text")
@pass_state
def receipt_verify(state: State, paths: tuple[str, ...], out: Output) -> int:
    """Re-judge receipts as the audit would; exit 1 when any is rejected."""
    from gates.commands import receipt as receipt_command

    return receipt_command.verify(state.inputs(), paths, cwd=state.cwd(), out=out)


@receipt.command("show")
@click.argument("path")
@rendered_by("gates.commands.receipt:SHOW_RENDERERS", "text")
@pass_state
def receipt_show(state: State, path: str, out: Output) -> int:
    """Print one receipt."""
    from gates.commands import receipt as receipt_command

    return receipt_command.show(state.workspace(), path, cwd=state.cwd(), out=out)


@cli.group()
def check() -> None:
    """Checkers: compare losses; each writes its output and a receipt."""


@check.command("loss")
@click.argument("reference")
@click.argument("candidate")
@click.option("--required-steps", type=click.IntRange(min=1), default=100, show_default=True)
@click.option(
    "--bit-exact", is_flag=True, help="Exit 1 unless the required steps are bit-identical."
)
@_output("outputs/loss_check.receipt.json")
@rendered_by("gates.commands.check:RENDERERS", "text")
@pass_state
def check_loss(
    state: State,
    reference: str,
    candidate: str,
    required_steps: int,
    bit_exact: bool,
    output: str,
    out: Output,
    checker: CheckerMode,
) -> int:
    """Compare REFERENCE and CANDIDATE losses (loss.json or raw_loss.jsonl, or run folders)."""
    from gates.commands import check as check_command

    return check_command.check_loss(
        state.inputs(checker=checker),
        reference,
        candidate,
        required_steps=required_steps,
        bit_exact=bit_exact,
        output=output,
        cwd=state.cwd(),
        out=out,
    )


@check.command("determinism")
@click.argument("runs", nargs=-1, required=True)
@_output("outputs/determinism_check.receipt.json")
@rendered_by("gates.commands.check:RENDERERS", "text")
@pass_state
def check_determinism(
    state: State, runs: tuple[str, ...], output: str, out: Output, checker: CheckerMode
) -> int:
    """Repeats of one side and profile: are all RUNS bit-identical?"""
    from gates.commands import check as check_command

    return check_command.check_determinism(
        state.inputs(checker=checker),
        runs,
        output=output,
        cwd=state.cwd(),
        out=out,
    )


@check.command("tensors")
@click.argument("reference")
@click.argument("candidate")
@_RULES
@click.option("--steps", metavar="A:B", help="Only these steps (both ends included; A:, :B, N).")
@click.option(
    "--phase",
    "phases",
    multiple=True,
    type=click.Choice(["activation", "grad", "optimizer", "param"]),
    help="Only this phase (repeatable); a phase given must be dumped.",
)
@_output("outputs/tensor_check.receipt.json")
@rendered_by("gates.commands.tensors:RENDERERS", "text")
@pass_state
def check_tensors(
    state: State,
    reference: str,
    candidate: str,
    rules: str | None,
    steps: str | None,
    phases: tuple[str, ...],
    output: str,
    out: Output,
    checker: CheckerMode,
) -> int:
    """Compare two tensor dumps bit for bit through the naming rules; locate the first
    divergence."""
    from gates.commands import tensors as tensors_command
    from gates.tensors.compare import Selection, parse_phases
    from gates.tensors.layout import PHASES, StepRange

    try:
        step_range = StepRange.parse(steps) if steps else StepRange()
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--steps") from None
    selection = Selection(step_range, parse_phases(phases) if phases else PHASES, bool(phases))
    return tensors_command.check_tensors(
        state.inputs(checker=checker),
        reference,
        candidate,
        rules=rules,
        selection=selection,
        output=output,
        cwd=state.cwd(),
        out=out,
    )


@check.command("checkpoint")
@click.argument("folder", required=False)
@click.option("--against", metavar="DIR", help="The reference checkpoint to compare with.")
@_RULES
@click.option("--shard-range", metavar="I/N", help="Hash only slice I of N of the shards.")
@click.option(
    "--merge",
    "merge",
    multiple=True,
    metavar="RECEIPT",
    help="Combine the partial receipts of every slice (repeatable).",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="Hashing threads (default: the CPU count, at most 8).",
)
@click.option(
    "--rank-timeout",
    type=click.FloatRange(min=1),
    default=7200,
    show_default=True,
    help="Under paddle.distributed.launch: how long rank 0 waits for every rank's report (s).",
)
@_VERIFY_ALL
@_output("outputs/checkpoint_check.receipt.json")
@rendered_by("gates.checkers.checkpoint_output:RENDERERS", "text")
@pass_state
def check_checkpoint(
    state: State,
    folder: str | None,
    against: str | None,
    rules: str | None,
    shard_range: str | None,
    merge: tuple[str, ...],
    threads: int | None,
    rank_timeout: float,
    verify_all: bool,
    output: str,
    out: Output,
    checker: CheckerMode,
) -> int:
    """Validity, hygiene, tensor count and canonical digest of the checkpoint in FOLDER.

    FOLDER may be below an external root (external:<root>/<path>, or its absolute
    path). Under `python -m paddle.distributed.launch` the ranks share the hashing.
    """
    from gates.commands import checkpoint as checkpoint_command

    if merge:
        if folder or against or shard_range:
            raise click.UsageError(
                "--merge takes receipts only: no FOLDER, --against or --shard-range"
            )
        return checkpoint_command.merge(
            state.inputs(verify_all=verify_all, checker=checker),
            merge,
            output=output,
            cwd=state.cwd(),
            out=out,
        )
    if folder is None:
        raise click.UsageError("give the checkpoint FOLDER (or --merge RECEIPT...)")
    if shard_range and against:
        raise click.UsageError("--against compares whole checkpoints; merge the slices first")
    try:
        from gates.checkpoints.check import ShardRange

        selected = ShardRange.parse(shard_range) if shard_range else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--shard-range") from None
    return checkpoint_command.check(
        state.inputs(verify_all=verify_all, checker=checker),
        folder,
        against=against,
        rules=rules,
        shard_range=selected,
        threads=threads,
        output=output,
        cwd=state.cwd(),
        out=out,
        rank_timeout=rank_timeout,
    )


@check.command("config")
@click.argument("official")
@click.option(
    "--class",
    "class_path",
    required=True,
    metavar="MODULE:CLASS",
    help="The candidate config class; imported in a subprocess, never in gates itself.",
)
@click.option(
    "--table",
    metavar="CONTRACT",
    help="The semantics table (default: the workspace's config-semantics contract).",
)
@click.option(
    "--path",
    "path",
    metavar="DIR",
    help="Import the class from this workspace folder and scan it for reads "
    "(default: the contract's source, else the installed package).",
)
@click.option(
    "--env",
    "env",
    multiple=True,
    metavar="ENV_JSON",
    help="An env.json whose revision and model_config_sha256 must be the pins (repeatable).",
)
@_output("outputs/config_check.receipt.json")
@rendered_by("gates.commands.config_check:RENDERERS", "text")
@pass_state
def check_config(
    state: State,
    official: str,
    class_path: str,
    table: str | None,
    path: str | None,
    env: tuple[str, ...],
    output: str,
    out: Output,
    checker: CheckerMode,
) -> int:
    """Load OFFICIAL (config.json) with the candidate class: covered, meant, read, saved."""
    from gates.commands import config_check

    return config_check.check_config(
        state.inputs(checker=checker),
        official,
        class_path=class_path,
        table=table,
        path=path,
        env=env,
        output=output,
        cwd=state.cwd(),
        out=out,
    )


@cli.group()
def probe() -> None:
    """Probes of the model itself."""


@probe.command("consumed")
@click.argument("entry", metavar="FILE.py:FUNCTION")
@click.option(
    "--tensor", "tensors", multiple=True, metavar="NAME", help="Probe this tensor (repeatable)."
)
@_output("outputs/consumption_probe.receipt.json")
@rendered_by("gates.commands.probe:RENDERERS", "text")
@pass_state
def probe_consumed(
    state: State,
    entry: str,
    tensors: tuple[str, ...],
    output: str,
    out: Output,
    checker: CheckerMode,
) -> int:
    """Which named tensors does ENTRY's forward consume? (FUNCTION returns (forward, tensors).)"""
    from gates.commands import probe as probe_command

    return probe_command.consumed(
        state.inputs(checker=checker),
        entry,
        tensors,
        output=output,
        cwd=state.cwd(),
        out=out,
    )


@cli.group()
def inventory() -> None:
    """Tensor inventories of checkpoints."""


@inventory.command("diff")
@click.argument("reference")
@click.argument("candidate")
@_RULES
@_output("outputs/surveys/structure-parity.receipt.json")
@rendered_by("gates.commands.inventory:RENDERERS", "text")
@pass_state
def inventory_diff(
    state: State,
    reference: str,
    candidate: str,
    rules: str | None,
    output: str,
    out: Output,
    checker: CheckerMode,
) -> int:
    """Every difference between two checkpoints' inventories, classified by the naming rules."""
    from gates.commands import inventory as inventory_command

    return inventory_command.diff(
        state.inputs(checker=checker),
        reference,
        candidate,
        rules=rules,
        output=output,
        cwd=state.cwd(),
        out=out,
    )


@cli.command()
@click.argument("run_folder", metavar="RUN")
@click.option(
    "--seed", help="The verifier's seed (CI passes its own; default: policy commit + now)."
)
@click.option("--seed-file", type=click.Path(path_type=Path), help="Read the seed from a file.")
@click.option("--windows", type=click.IntRange(min=0), help="Sampled windows (default: policy).")
@click.option(
    "--window-steps", type=click.IntRange(min=1), help="Steps a window (default: policy)."
)
@click.option("--window", "explicit", multiple=True, metavar="FIRST:LAST", help="Also replay this.")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds a window.")
@rendered_by("gates.commands.replay:RENDERERS", "text")
@pass_state
def replay(
    state: State,
    run_folder: str,
    seed: str | None,
    seed_file: Path | None,
    windows: int | None,
    window_steps: int | None,
    explicit: tuple[str, ...],
    timeout: float,
    out: Output,
) -> int:
    """Re-execute sampled windows of a signed run and sign the bit-for-bit result."""
    from gates.commands import replay as replay_command

    request = replay_command.ReplayRequest(
        run_folder, seed, seed_file, windows, window_steps, explicit, timeout
    )
    return replay_command.replay(state.inputs(), request, cwd=state.cwd(), out=out)


@cli.command()
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=None,
    help="Ledger rows to print (default: the required steps; 0: all).",
)
@rendered_by("gates.commands.steps:RENDERERS", "text")
@pass_state
def steps(state: State, limit: int | None, out: Output) -> int:
    """formal_alignment_steps = N / required, why, and the per-step ledger."""
    from gates.commands import steps as steps_command

    return steps_command.steps(state.inputs(), limit=limit, out=out)


@cli.command()
@rendered_by("gates.commands.status:RENDERERS", "markdown")
@click.option("--lang", type=click.Choice(["en", "zh"]), default="en", show_default=True)
@click.option(
    "--pr-body",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Replace the block between the gates:status markers in this file (or append it).",
)
@pass_state
def status(state: State, out: Output, lang: str, pr_body: Path | None) -> int:
    """The PR status block: verdict, contracts, blockers, evidence, what is unverified."""
    from gates.commands import status as status_command

    if pr_body is not None and not pr_body.is_absolute():
        pr_body = state.cwd() / pr_body
    return status_command.status(state.inputs(), lang=lang, pr_body=pr_body, out=out)


@cli.command()
@click.argument("contract_id", metavar="ID")
@rendered_by("gates.commands.explain:RENDERERS", "text")
@pass_state
def explain(state: State, contract_id: str, out: Output) -> int:
    """One contract: each criterion now, and the commands that would discharge it."""
    from gates.commands import explain as explain_command

    return explain_command.explain(state.inputs(), contract_id, out)


@cli.group()
def claims() -> None:
    """Figures claimed in PR texts."""


@claims.command("check")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@rendered_by("gates.commands.claims:RENDERERS", "text")
@pass_state
def claims_check(state: State, file: Path, out: Output) -> int:
    """List every figure FILE claims that no accepted receipt or checker output backs."""
    from gates.commands import claims as claims_command

    path = file if file.is_absolute() else state.cwd() / file
    return claims_command.claims_check(state.inputs(), path, out=out)


@cli.group()
def hook() -> None:
    """A plain git hook running `gates audit` (without the pre-commit framework)."""


_STAGE = click.option(
    "--stage",
    type=click.Choice(["pre-push", "pre-commit"]),
    default="pre-push",
    show_default=True,
)


@hook.command("install")
@_STAGE
@click.option("--force", is_flag=True, help="Keep an existing foreign hook aside and install.")
@pass_state
def hook_install(state: State, stage: str, force: bool) -> int:
    """Install the hook."""
    from gates.commands import hook as hook_command

    return hook_command.install(state.workspace(), stage, force=force, echo=_echo)


@hook.command("uninstall")
@_STAGE
@pass_state
def hook_uninstall(state: State, stage: str) -> int:
    """Remove the hook gates installed (restoring one it kept aside)."""
    from gates.commands import hook as hook_command

    return hook_command.uninstall(state.workspace(), stage, echo=_echo)


@cli.command(context_settings={"ignore_unknown_options": True})
@click.option("--framework", type=click.Choice([f.value for f in Framework]))
@click.option("--probe", is_flag=True, help="Run even while blocked; stamp everything probe.")
@click.option("--out", metavar="DIR", help="The run folder (default: results/<framework>).")
@click.option(
    "--output",
    "outputs",
    multiple=True,
    metavar="KIND=PATH",
    help="A declared output to receipt, e.g. checkpoint=results/paddle/checkpoint (repeatable).",
)
@click.option(
    "--profile",
    "profile",
    multiple=True,
    metavar="KEY=VALUE",
    help="Parallel profile entry, e.g. tp=2 (repeatable).",
)
@click.option(
    "--no-sandbox", is_flag=True, help="Run in the workspace itself (signed as not isolated)."
)
@click.option("--clean", is_flag=True, help="Empty the run folder first (it must be empty).")
@click.option(
    "--model-config",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The model's config.json, for the recorder's env.json (GATES_MODEL_CONFIG).",
)
@click.option("--force", is_flag=True, help="Launch despite pre-flight problems.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@pass_state
def run(
    state: State,
    framework: str | None,
    probe: bool,
    out: str | None,
    outputs: tuple[str, ...],
    profile: tuple[str, ...],
    no_sandbox: bool,
    clean: bool,
    model_config: Path | None,
    force: bool,
    command: tuple[str, ...],
) -> int:
    """Launch CMD under the source freeze and stamp what it leaves: gates run -- CMD ..."""
    from gates.commands import run as run_command

    declared = []
    for item in outputs:
        kind, sep, path = item.partition("=")
        if not sep or kind not in {k.value for k in ArtifactKind} or not path:
            raise click.BadParameter(f"{item!r}: expected KIND=PATH", param_hint="--output")
        declared.append((ArtifactKind(kind), path))
    request = run_command.RunRequest(
        command=list(command),
        framework=Framework(framework) if framework else None,
        probe=probe,
        out=out,
        outputs=declared,
        profile=_parse_profile(profile),
        sandbox=not no_sandbox,
        clean=clean,
        force=force,
        model_config=state.cwd() / model_config if model_config else None,
    )
    return run_command.run(state.inputs(), request, cwd=state.cwd(), echo=_echo)


@cli.command("evidence")
@rendered_by("gates.commands.evidence:RENDERERS", "text")
@pass_state
def evidence_list(state: State, out: Output) -> int:
    """Every piece of evidence the policy asks for: missing, stale, probe or formal, and the
    command that makes or refreshes it (exit 0 only when all is formal)."""
    from gates.commands import evidence as evidence_command

    workspace = state.inputs()
    return evidence_command.evidence(workspace, out=out)


@cli.command()
@click.option("--dry-run", is_flag=True, help="Only list the commands that would run.")
@rendered_by("gates.commands.evidence:REFRESH_RENDERERS", "text")
@pass_state
def refresh(state: State, dry_run: bool, out: Output) -> int:
    """Re-run the stale checkers from their recorded inputs (never the training runs)."""
    from gates.commands import evidence as evidence_command

    options = evidence_command.root_options(state.directory, state.policy_ref, state.trust)
    return evidence_command.refresh(
        state.inputs(),
        dry_run=dry_run,
        global_options=options,
        out=out,
    )


@cli.group()
def key() -> None:
    """Signing keys: make one, print its public half for a trust file."""


@key.command("new")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def key_new(path: Path) -> None:
    """Write a new ed25519 private key to PATH (mode 0600) and print its key id."""
    from gates.trust.keys import new_key

    _echo(new_key(path))


@key.command("pub")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def key_pub(path: Path) -> None:
    """Print the public key of the private key at PATH, as a trust file's public_key holds it."""
    from gates.trust.keys import load_key, public_pem

    click.echo(public_pem(load_key(path)), nl=False)


@cli.group()
def attest() -> None:
    """Standard attestations: every accepted envelope and the verdict as a SLSA VSA."""


@attest.command("export")
@click.option(
    "--out",
    "folder",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder to write the envelopes and the VSA into.",
)
@click.option(
    "--key",
    "key_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Sign the VSA with this key (default: GATES_SIGNING_KEY; unsigned without one).",
)
@click.option(
    "--resource-uri",
    metavar="URL",
    help="The repository as others clone it (default: the URL of the remote origin).",
)
@rendered_by("gates.commands.attest:EXPORT_RENDERERS", "text")
@pass_state
def attest_export(
    state: State, folder: Path, key_path: Path | None, resource_uri: str | None, out: Output
) -> int:
    """Write every accepted receipt's DSSE envelope and the verdict's VSA to OUT."""
    from gates.commands import attest as attest_command

    return attest_command.export(
        state.inputs(),
        state.cwd() / folder,
        key_path=key_path,
        out=out,
        resource_uri=resource_uri,
    )


@cli.command()
@click.option("--keep", is_flag=True, help="Keep the temporary workspace to explore it.")
@pass_state
def demo(state: State, keep: bool) -> int:
    """Show the whole story on a small workspace built in a temporary folder."""
    from gates.commands import demo as demo_command

    return demo_command.demo(state.invocation(), keep=keep, echo=_echo)


# report, history, attest verify (docs/html-report.md): defined in their own module
from gates.cli.report import attest_verify, history, report  # noqa: E402

cli.add_command(report)
cli.add_command(history)
attest.add_command(attest_verify)


def _fail(message: str, code: int = exitcodes.ERROR) -> NoReturn:
    click.echo(f"gates: error: {message}", err=True)
    sys.exit(code)


def main(argv: list[str] | None = None) -> NoReturn:
    """Entry point: run the CLI and map every failure to one line and an exit code.

    `--debug` is read from gates' own parsed options, never from the raw argv:
    `gates run -- python train.py --debug` passes it to the child only.
    """
    args = list(argv if argv is not None else sys.argv[1:])
    ctx: click.Context | None = None
    from gates.core.progress import asks_for_json

    try:
        ctx = cli.make_context("gates", args, obj=_Started(asks_for_json(args)))
        with ctx:
            code = cli.invoke(ctx)  # a command returns its exit code
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as usage:
        usage.show()
        sys.exit(exitcodes.ERROR)
    except click.Abort:
        _fail("aborted")
    except GatesError as error:
        if _debug(ctx):
            traceback.print_exc()
        _fail(error.one_line())
    except Exception as error:  # noqa: BLE001  (the single handler for the unexpected)
        if _debug(ctx):
            traceback.print_exc()
        _fail(f"internal error: {type(error).__name__}: {error} (rerun with --debug for details)")
    sys.exit(code)


def _debug(ctx: click.Context | None) -> bool:
    return ctx is not None and bool(ctx.params.get("debug"))
