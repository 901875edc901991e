"""History: each audit's summary as a signed git note on the audited commit
(`refs/notes/gates`), read back per commit and judged like any attestation.

A note is a DSSE envelope over an in-toto Statement whose subject is the commit
(`gitCommit`) and whose predicate is the audit summary. A note counts only when its
signature verifies against a signer in force and its subject is the commit it is
attached to; anything else (unsigned, another key, edited by hand, copied from another
commit) is shown as untrusted, its figures as claims, never as fact.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gates.core.errors import GatesError, GitError
from gates.core.git import run_git
from gates.core.json_writer import pretty_json
from gates.engine.summary import AuditSummary
from gates.trust.anchors import Anchors
from gates.trust.envelope import STATEMENT_TYPE, Attested, sign_statement, verify_envelope
from gates.trust.keys import SigningKey

NOTES_REF = "refs/notes/gates"
NOTE_PREDICATE = "https://gates.dev/attestation/audit-summary/v1"
DEFAULT_DEPTH = 50


class HistoryError(GatesError):
    """A range that does not resolve, or a note that cannot be written."""


class NoteState(StrEnum):
    TRUSTED = "trusted"
    UNTRUSTED = "untrusted"
    MISSING = "missing"


@dataclass(frozen=True)
class Entry:
    commit: str
    subject: str  # the commit's first line
    state: NoteState
    reason: str = ""
    summary: AuditSummary | None = None  # the note's figures: fact only when TRUSTED

    @property
    def fact(self) -> AuditSummary | None:
        return self.summary if self.state is NoteState.TRUSTED else None


def note_statement(summary: AuditSummary) -> dict[str, Any]:
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": "commit", "digest": {"gitCommit": summary.commit or ""}}],
        "predicateType": NOTE_PREDICATE,
        "predicate": {
            "summary": summary.model_dump(mode="json"),
            "timeRecorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    }


def _identity(root: Path) -> tuple[str, ...]:
    """Notes are commits on refs/notes/gates: use the user's identity, or name gates."""
    configured = run_git(root, "config", "user.email", check=False).strip()
    return () if configured else ("-c", "user.name=gates", "-c", "user.email=gates@localhost")


def record(root: Path, summary: AuditSummary, key: SigningKey) -> str:
    """Sign the summary and attach it to its commit (replacing an older note)."""
    if not summary.commit:
        raise HistoryError("nothing to record: the repository has no commit", file=root)
    envelope = sign_statement(note_statement(summary), key)
    run_git(
        root,
        *_identity(root),
        "notes",
        "--ref",
        NOTES_REF,
        "add",
        "-f",
        "-F",
        "-",
        summary.commit,
        stdin=pretty_json(envelope).encode("utf-8"),
    )
    return summary.commit


def commits_in(root: Path, revision_range: str | None, depth: int) -> list[tuple[str, str]]:
    """(commit, first line) of the range, oldest first; without a range, HEAD's last `depth`."""
    spec = revision_range or "HEAD"
    if spec.startswith("-"):
        raise HistoryError(f"not a revision range: {spec}", hint="e.g. main~20..HEAD")
    limit = (f"--max-count={depth}",) if revision_range is None else ()
    try:
        listing = run_git(root, "log", *limit, "--format=%H %s", "--end-of-options", spec)
    except GitError as error:
        raise HistoryError(
            f"revision range {spec} does not resolve ({error.message})",
            file=root,
            hint="give a range git log accepts, e.g. main~20..HEAD",
        ) from None
    pairs = [line.partition(" ") for line in listing.decode("utf-8", "replace").splitlines()]
    return [(commit, subject) for commit, _, subject in reversed(pairs) if commit]


def _notes(root: Path) -> dict[str, str]:
    """commit -> note blob, from one `git notes list`."""
    listing = run_git(root, "notes", "--ref", NOTES_REF, "list", check=False)
    notes = {}
    for line in listing.decode("ascii", "replace").splitlines():
        parts = line.split()
        if len(parts) == 2:
            notes[parts[1]] = parts[0]
    return notes


def _blobs(root: Path, blobs: list[str]) -> dict[str, bytes]:
    """Every blob's content with one `git cat-file --batch`."""
    if not blobs:
        return {}
    output = run_git(root, "cat-file", "--batch", stdin=("\n".join(blobs) + "\n").encode())
    contents: dict[str, bytes] = {}
    position = 0
    for blob in blobs:
        end = output.index(b"\n", position)
        header = output[position:end].split()
        if len(header) != 3:  # "<sha> missing"
            position = end + 1
            continue
        size = int(header[2])
        contents[blob] = output[end + 1 : end + 1 + size]
        position = end + 1 + size + 1
    return contents


def judge_note(commit: str, data: bytes, anchors: Anchors) -> tuple[NoteState, str, Any]:
    """Trusted only when the signature verifies with a signer in force and the statement
    is an audit summary of this very commit."""
    try:
        envelope = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return NoteState.UNTRUSTED, "not a signed note (not JSON): written by hand?", None
    claimed = _claimed(envelope)
    attestation, payload = verify_envelope(envelope, anchors, None)
    if attestation.state is not Attested.TRUSTED or payload is None:
        return NoteState.UNTRUSTED, f"{attestation.state.value}: {attestation.reason}", claimed
    try:
        statement = json.loads(payload)
        signed_for = statement["subject"][0]["digest"]["gitCommit"]
        summary = statement["predicate"]["summary"]
    except (ValueError, KeyError, IndexError, TypeError):
        return NoteState.UNTRUSTED, "signed, but not an audit summary", claimed
    if statement.get("predicateType") != NOTE_PREDICATE:
        return NoteState.UNTRUSTED, "signed, but not an audit summary", claimed
    if signed_for != commit:
        return (
            NoteState.UNTRUSTED,
            f"signed for commit {str(signed_for)[:12]}, attached to {commit[:12]}",
            claimed,
        )
    return NoteState.TRUSTED, attestation.reason, summary


def _claimed(envelope: object) -> Any:
    """What an untrusted note says, to show as a claim."""
    if not isinstance(envelope, dict):
        return None
    try:
        statement = json.loads(base64.b64decode(str(envelope.get("payload", "")), validate=True))
        return statement["predicate"]["summary"]
    except (binascii.Error, ValueError, KeyError, TypeError):
        return None


def history(
    root: Path, revision_range: str | None, anchors: Anchors, depth: int = DEFAULT_DEPTH
) -> list[Entry]:
    commits = commits_in(root, revision_range, depth)
    notes = _notes(root)
    contents = _blobs(root, sorted({notes[c] for c, _ in commits if c in notes}))
    entries = []
    for commit, subject in commits:
        blob = notes.get(commit)
        if blob is None or blob not in contents:
            entries.append(Entry(commit, subject, NoteState.MISSING, "no note"))
            continue
        state, reason, raw = judge_note(commit, contents[blob], anchors)
        try:
            summary = AuditSummary.model_validate(raw) if raw is not None else None
        except ValidationError:
            summary = None
            if state is NoteState.TRUSTED:
                state, reason = NoteState.UNTRUSTED, "signed, but the summary is not valid"
        entries.append(Entry(commit, subject, state, reason, summary))
    return entries


@dataclass(frozen=True)
class StepStory:
    """Step N over the range, from trusted notes only."""

    step: int
    aligned_since: str | None  # first commit of the latest run of trusted notes with step N
    broken_by: str | None  # latest commit whose trusted note lost step N after one had it
    last_aligned_before_break: str | None
    judged: int  # commits with a trusted note
    unjudged: int  # commits without one (missing or untrusted)
    aligned_now: bool | None  # at the newest commit with a trusted note


def step_story(entries: list[Entry], step: int) -> StepStory:
    since: str | None = None
    broken_by: str | None = None
    last_good_before: str | None = None
    previous: tuple[str, bool] | None = None
    judged = 0
    for entry in entries:
        fact = entry.fact
        if fact is None:
            continue
        judged += 1
        aligned = fact.step_aligned(step)
        if aligned and (previous is None or not previous[1]):
            since = entry.commit
        if not aligned:
            if previous is not None and previous[1]:
                broken_by, last_good_before = entry.commit, previous[0]
            since = None
        previous = (entry.commit, aligned)
    return StepStory(
        step,
        since,
        broken_by,
        last_good_before,
        judged,
        len(entries) - judged,
        previous[1] if previous else None,
    )
