"""`gates history [RANGE]`: formal_alignment_steps per commit from signed git notes;
`--record` audits HEAD and writes its note; `--fill` audits commits without a note in a
temporary worktree; `--step N` says since when step N is bit-exact and what broke it."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gates.core import exitcodes
from gates.core.echo import Output, note
from gates.core.errors import GatesError
from gates.core.git import run_git
from gates.core.invocation import SIGNING_KEY_VARIABLE, Invocation
from gates.core.json_writer import indented_json
from gates.reporters.history import Entry, NoteState, StepStory, history, record, step_story
from gates.trust.anchors import Anchors
from gates.trust.keys import SigningKey, SigningKeyError, configured_key, load_key
from gates.workspace.repository import open_workspace

if TYPE_CHECKING:
    from gates.engine.audit import AuditResult
    from gates.engine.inputs import AuditInputs


def _audit(inputs: AuditInputs) -> AuditResult:
    """The audit, imported only when one runs: listing notes needs none of it."""
    from gates.engine.audit import run_audit  # noqa: PLC0415

    return run_audit(inputs)


def key_hidden(invocation: Invocation) -> Invocation:
    """The key is in memory: the audits that follow (and any process they start) are not
    told where its file is."""
    environment = {k: v for k, v in invocation.environment.items() if k != SIGNING_KEY_VARIABLE}
    return dataclasses.replace(invocation, signing_key=None, environment=environment)


def signing_key(key_path: Path | None, configured: Path | None) -> SigningKey:
    """The key that signs notes: --key, else the invocation's (GATES_SIGNING_KEY)."""
    key = load_key(key_path) if key_path else configured_key(configured)
    if key is None:
        raise SigningKeyError(
            "recording history needs a signing key: an unsigned note would count for nothing",
            hint="pass --key FILE or set GATES_SIGNING_KEY",
        )
    return key


def record_head(inputs: AuditInputs, key: SigningKey) -> None:
    workspace = inputs.workspace
    from gates.engine.summary import summarize  # noqa: PLC0415

    result = _audit(inputs)
    commit = record(workspace.root, summarize(result), key)
    note(
        f"recorded {commit[:12]}: verdict={result.verdict} formal_alignment_steps = "
        f"{result.formal_alignment_steps} / {result.required_steps}"
    )


def fill_missing(
    root: Path, entries: list[Entry], key: SigningKey, *, invocation: Invocation
) -> list[str]:
    """Audit each commit without a note in a temporary worktree (removed afterwards) and
    record it; a commit that cannot be audited is said and skipped."""
    from gates.engine.inputs import load_inputs  # noqa: PLC0415
    from gates.engine.summary import summarize  # noqa: PLC0415

    recorded = []
    for entry in entries:
        if entry.state is not NoteState.MISSING:
            continue
        scratch = Path(tempfile.mkdtemp(prefix="gates-history-"))
        tree = scratch / "worktree"
        try:
            run_git(root, "worktree", "add", "--detach", "--quiet", str(tree), entry.commit)
            workspace = open_workspace(tree, invocation.environment)
            inputs = load_inputs(workspace, invocation)
            record(root, summarize(_audit(inputs)), key)
            recorded.append(entry.commit)
            note(f"filled {entry.commit[:12]}")
        except GatesError as error:
            note(f"{entry.commit[:12]}: not recorded: {error.one_line()}")
        finally:
            run_git(root, "worktree", "remove", "--force", str(tree), check=False)
            shutil.rmtree(scratch, ignore_errors=True)
            run_git(root, "worktree", "prune", check=False)
    return recorded


def _figures(entry: Entry) -> tuple[str, str, str]:
    summary = entry.summary
    if summary is None:
        return "-", "-", "-"
    tensor = (
        f"{summary.tensor_aligned_steps}/{summary.tensor_required_steps}"
        if summary.tensor_aligned_steps is not None
        else "-"
    )
    return summary.verdict, f"{summary.formal_alignment_steps}/{summary.required_steps}", tensor


def _entry_json(entry: Entry) -> dict[str, object]:
    summary = entry.summary.model_dump(mode="json") if entry.summary else None
    return {
        "commit": entry.commit,
        "subject": entry.subject,
        "note": entry.state.value,
        "reason": entry.reason,
        # an untrusted note's figures are claims, never facts: under another key
        "summary": summary if entry.state is NoteState.TRUSTED else None,
        "claimed": summary if entry.state is NoteState.UNTRUSTED else None,
    }


def _story_lines(story: StepStory, entries: list[Entry]) -> list[str]:
    subjects = {e.commit: e.subject for e in entries}

    def name(commit: str | None) -> str:
        return f'{commit[:12]} "{subjects.get(commit, "")}"' if commit else "-"

    lines = []
    if story.aligned_now is None:
        lines.append(f"step {story.step}: no commit in the range has a trusted note")
    elif story.aligned_now:
        lines.append(f"step {story.step}: bit-exact since {name(story.aligned_since)}")
    else:
        lines.append(f"step {story.step}: not bit-exact at the newest commit with a trusted note")
    if story.broken_by:
        lines.append(
            f"step {story.step}: broken by {name(story.broken_by)} "
            f"(last bit-exact at {name(story.last_aligned_before_break)})"
        )
    elif story.aligned_now:
        lines.append(f"step {story.step}: never broken in the range")
    if story.unjudged:
        lines.append(
            f"({story.unjudged} commit(s) without a trusted note are not judged; "
            "--fill audits the missing ones)"
        )
    return lines


@dataclass(frozen=True)
class Listing:
    """What `gates history` lists: each commit of the range with its note judged, the
    story of one step (--step), the range as asked for and where the anchors came from."""

    entries: tuple[Entry, ...]
    story: StepStory | None
    range: str
    anchors_source: str


def listing(
    root: Path, anchors: Anchors, revision_range: str | None, *, step: int | None, depth: int
) -> Listing:
    """The notes of the range, judged with ``anchors``."""
    entries = history(root, revision_range, anchors, depth)
    story = step_story(entries, step) if step is not None else None
    shown_range = revision_range or f"HEAD (last {depth})"
    return Listing(tuple(entries), story, shown_range, anchors.source)


def render_json(found: Listing) -> str:
    story = found.story
    document: dict[str, object] = {
        "range": found.range,
        "notes_ref": "refs/notes/gates",
        "trust_anchors": found.anchors_source,
        "commits": [_entry_json(e) for e in found.entries],
        "step": (
            {
                "step": story.step,
                "bit_exact_now": story.aligned_now,
                "bit_exact_since": story.aligned_since,
                "broken_by": story.broken_by,
                "last_bit_exact_before_break": story.last_aligned_before_break,
                "commits_judged": story.judged,
                "commits_not_judged": story.unjudged,
            }
            if story
            else None
        ),
    }
    return indented_json(document)


def _entry_line(entry: Entry) -> str:
    verdict, formal, tensor = _figures(entry)
    if entry.state is NoteState.TRUSTED:
        unprotected = entry.summary and not entry.summary.policy.protected
        state = f"trusted ({entry.reason})" + (" [policy unprotected]" if unprotected else "")
    elif entry.state is NoteState.MISSING:
        state = "no note"
        verdict = formal = tensor = "-"
    else:
        state = f"UNTRUSTED, not fact: {entry.reason}"
        verdict, formal, tensor = (f"[{v}]" if v != "-" else v for v in (verdict, formal, tensor))
    figures = f"{verdict:<8} {formal:<9} {tensor:<9}"
    return f"{entry.commit[:12]}  {figures} {state}  {entry.subject}"


def render_text(found: Listing) -> str:
    lines = [f"{'COMMIT':<12}  {'VERDICT':<8} {'FORMAL':<9} {'TENSOR':<9} NOTE"]
    lines += [_entry_line(entry) for entry in found.entries]
    if not found.entries:
        lines.append("(no commits in the range)")
    if found.story is not None:
        lines += _story_lines(found.story, list(found.entries))
    return "\n".join(lines)


#: --format -> the renderer of a Listing
RENDERERS: dict[str, Callable[[Listing], str]] = {"text": render_text, "json": render_json}


def show(
    root: Path,
    anchors: Anchors,
    revision_range: str | None,
    *,
    step: int | None,
    depth: int,
    out: Output,
) -> int:
    """List the range (exit 0: a listing is not a verdict)."""
    out.render(RENDERERS, listing(root, anchors, revision_range, step=step, depth=depth))
    return exitcodes.OK


def history_command(
    inputs: AuditInputs,
    revision_range: str | None,
    *,
    step: int | None,
    record: bool,
    fill: bool,
    key_path: Path | None,
    depth: int,
    out: Output,
) -> int:
    workspace = inputs.workspace
    policy = inputs.policy
    root = workspace.root
    if record or fill:
        key = signing_key(key_path, inputs.invocation.signing_key)
        hidden = key_hidden(inputs.invocation)
        if record:
            record_head(dataclasses.replace(inputs, invocation=hidden), key)
        if fill:
            missing = history(root, revision_range, policy.anchors, depth)
            fill_missing(root, missing, key, invocation=hidden)
    return show(
        root,
        policy.anchors,
        revision_range,
        step=step,
        depth=depth,
        out=out,
    )
