"""The command-line definitions of `gates report`, `gates history` and `gates attest verify`,
kept out of gates/cli/app.py, which registers them with a few lines (docs/html-report.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import click

from gates.cli.options import rendered_by
from gates.core.echo import Output
from gates.core.invocation import Given

if TYPE_CHECKING:
    from gates.core.invocation import Invocation
    from gates.engine.inputs import AuditInputs
    from gates.workspace.repository import Workspace


class State(Protocol):
    """What these commands use of gates.cli.app's State (not imported: no cycle)."""

    policy_ref: str | None
    trust: Path | None

    def workspace(self) -> Workspace: ...

    def inputs(self) -> AuditInputs: ...

    def invocation(self) -> Invocation: ...

    def cwd(self) -> Path: ...


@click.command("verify")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--trust",
    "trust_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The trust file to verify with (default: gates --trust, then GATES_TRUST).",
)
@click.option("--expect-pass", is_flag=True, help="Also fail unless the VSA says PASSED.")
@rendered_by("gates.commands.attest:VERIFY_RENDERERS", "text")
@click.pass_obj
def attest_verify(
    state: State, folder: Path, trust_path: Path | None, expect_pass: bool, out: Output
) -> int:
    """Verify exported envelopes and the VSA with a trust file: exit 0 verified, 1 not."""
    from gates.commands import attest as attest_command

    given = state.invocation().trust
    if trust_path is not None:
        given = Given(trust_path, "--trust")
    anchors = attest_command.anchors_for_verify(given)
    return attest_command.verify(state.cwd() / folder, anchors, expect_pass=expect_pass, out=out)


@click.command()
@click.option(
    "--html",
    "folder",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder to write report.html into (one self-contained page).",
)
@click.option(
    "--history",
    "history_range",
    metavar="RANGE",
    help="Add the chart of formal_alignment_steps over RANGE from the signed notes.",
)
@rendered_by("gates.commands.report:RENDERERS", "text")
@click.pass_obj
def report(state: State, folder: Path, history_range: str | None, out: Output) -> int:
    """The audit as one page: verdict, contracts, loss curves, tensor map, evidence."""
    from gates.commands import report as report_command

    return report_command.report(
        state.inputs(), state.cwd() / folder, out=out, history_range=history_range
    )


@click.command()
@click.argument("revision_range", metavar="[RANGE]", required=False)
@click.option("--step", type=click.IntRange(min=1), help="Since when is step N bit-exact?")
@click.option("--record", is_flag=True, help="Audit HEAD and record its signed note first.")
@click.option("--fill", is_flag=True, help="Audit commits without a note (temporary worktree).")
@click.option(
    "--key",
    "key_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Sign notes with this key (default: GATES_SIGNING_KEY).",
)
@click.option("--max-count", "depth", default=50, show_default=True, help="Without RANGE.")
@rendered_by("gates.commands.history:RENDERERS", "text")
@click.pass_obj
def history(
    state: State,
    revision_range: str | None,
    step: int | None,
    record: bool,
    fill: bool,
    key_path: Path | None,
    depth: int,
    out: Output,
) -> int:
    """formal_alignment_steps per commit, from signed notes (refs/notes/gates)."""
    from gates.commands import history as history_command

    return history_command.history_command(
        state.inputs(),
        revision_range,
        step=step,
        record=record,
        fill=fill,
        key_path=key_path,
        depth=depth,
        out=out,
    )
