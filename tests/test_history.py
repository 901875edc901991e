"""`gates history`: signed git notes per commit (refs/notes/gates), read back as fact only
when a trusted key signed them for that very commit. Real repositories, keys and notes."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest

from gates.engine.summary import AuditSummary, ContractStatus, PolicyRef
from gates.reporters.history import NOTES_REF, record
from gates.trust.envelope import STATEMENT_TYPE, sign_statement
from gates.trust.keys import load_key
from tests.helpers import (
    TrustSetup,
    Workspace,
    commit_all,
    make_trust,
    write,
)


def summary(commit: str, formal: int) -> AuditSummary:
    return AuditSummary(
        commit=commit,
        verdict="pass" if formal == 100 else "blocked",
        formal_alignment_steps=formal,
        required_steps=100,
        tensor_aligned_steps=None,
        contracts=(
            ContractStatus(
                id="acceptance_oracle.results-schema-and-provenance",
                blocking=True,
                status="discharged" if formal == 100 else "discharging",
            ),
        ),
        policy=PolicyRef(protected=True, ref="refs/heads/main", commit=commit),
    )


def commits(ws: Workspace, count: int) -> list[str]:
    made = []
    for index in range(count):
        write(ws.root, f"paddleformers/glm/change_{index}.py", f"X = {index}\n")
        made.append(commit_all(ws.repo, f"change {index}"))
    return made


def history(ws: Workspace, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    result = ws.gates(capsys, "history", *args, "--format", "json")
    assert result.code == 0, result.err
    document: dict[str, object] = json.loads(result.out)
    return document


def by_commit(document: dict[str, object]) -> dict[str, dict[str, object]]:
    return {c["commit"]: c for c in document["commits"]}  # type: ignore[attr-defined,index]


def test_since_when_is_step_58_bit_exact_and_which_commit_broke_it(
    ws: Workspace, capsys: pytest.CaptureFixture[str], signing: TrustSetup
) -> None:
    made = commits(ws, 6)
    key = load_key(signing.key)
    figures = [40, 100, 100, 57, 100, 100]  # step 58 reached, lost at made[3], back at made[4]
    for commit, formal in zip(made, figures, strict=True):
        record(ws.root, summary(commit, formal), key)
    text = ws.gates(capsys, "history", f"{made[0]}~1..HEAD", "--step", "58")
    assert text.code == 0, text.err
    assert f'step 58: bit-exact since {made[4][:12]} "change 4"' in text.out
    assert f'step 58: broken by {made[3][:12]} "change 3" (last bit-exact at {made[2][:12]}' in (
        text.out
    )
    document = history(ws, capsys, f"{made[0]}~1..HEAD", "--step", "57")
    assert document["step"] == {
        "step": 57,
        "bit_exact_now": True,
        "bit_exact_since": made[1],
        "broken_by": None,
        "last_bit_exact_before_break": None,
        "commits_judged": 6,
        "commits_not_judged": 0,
    }
    row = by_commit(document)[made[3]]
    assert row["note"] == "trusted"
    assert row["summary"]["formal_alignment_steps"] == 57  # type: ignore[index]


def test_untrusted_and_hand_edited_notes_are_claims_not_facts(
    ws: Workspace, capsys: pytest.CaptureFixture[str], signing: TrustSetup, tmp_path: Path
) -> None:
    made = commits(ws, 4)
    key = load_key(signing.key)
    record(ws.root, summary(made[0], 57), key)
    stranger = make_trust(tmp_path / "stranger", name="stranger")
    record(ws.root, summary(made[1], 100), load_key(stranger.key))  # a key nobody trusts
    record(ws.root, summary(made[2], 57), key)
    note = ws.repo.git.notes("--ref", NOTES_REF, "show", made[2])
    envelope = json.loads(note)
    edited = json.loads(base64.b64decode(envelope["payload"]))
    edited["predicate"]["summary"]["formal_alignment_steps"] = 100  # edited by hand
    envelope["payload"] = base64.b64encode(json.dumps(edited).encode()).decode()
    ws.repo.git.notes("--ref", NOTES_REF, "add", "-f", "-m", json.dumps(envelope), made[2])
    ws.repo.git.notes("--ref", NOTES_REF, "add", "-f", "-m", note, made[3])  # copied elsewhere
    document = history(ws, capsys, f"{made[0]}~1..HEAD", "--step", "58")
    rows = by_commit(document)
    assert rows[made[0]]["note"] == "trusted"
    stranger_row = rows[made[1]]
    assert stranger_row["note"] == "untrusted"
    assert "not a trust anchor" in str(stranger_row["reason"])
    assert stranger_row["summary"] is None
    assert stranger_row["claimed"]["formal_alignment_steps"] == 100  # type: ignore[index]
    assert rows[made[2]]["note"] == "untrusted"
    assert "does not verify" in str(rows[made[2]]["reason"])
    assert rows[made[3]]["note"] == "untrusted"
    assert (
        f"signed for commit {made[2][:12]}, attached to {made[3][:12]}" == rows[made[3]]["reason"]
    )
    assert document["step"]["bit_exact_now"] is False  # type: ignore[index]
    assert document["step"]["bit_exact_since"] is None  # type: ignore[index]
    assert document["step"]["commits_judged"] == 1  # type: ignore[index]
    text = ws.gates(capsys, "history", f"{made[0]}~1..HEAD")
    line = next(x for x in text.out.splitlines() if x.startswith(made[1][:12]))
    assert "[100/100]" in line and "UNTRUSTED, not fact" in line


def test_a_note_written_by_hand_is_untrusted(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    head = ws.repo.head.commit.hexsha
    ws.repo.git.notes("--ref", NOTES_REF, "add", "-m", "formal_alignment_steps = 100", head)
    document = history(ws, capsys)
    row = by_commit(document)[head]
    assert row["note"] == "untrusted"
    assert row["reason"] == "not a signed note (not JSON): written by hand?"
    assert row["summary"] is None and row["claimed"] is None


def test_record_audits_head_and_fill_audits_the_rest_in_a_temporary_worktree(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    made = commits(ws, 2)
    result = ws.gates(capsys, "history", "--record", "--format", "json")
    assert result.code == 0, result.err
    assert f"recorded {made[1][:12]}: verdict=blocked formal_alignment_steps = 0 / 100" in (
        result.err
    )
    rows = by_commit(json.loads(result.out))
    assert rows[made[1]]["note"] == "trusted"
    assert rows[made[0]]["note"] == "missing"
    filled = ws.gates(capsys, "history", "--fill", "--format", "json")
    assert filled.code == 0, filled.err
    rows = by_commit(json.loads(filled.out))
    assert rows[made[0]]["note"] == "trusted"
    assert rows[made[0]]["summary"]["commit"] == made[0]  # type: ignore[index]
    first = ws.repo.git.rev_list("--max-parents=0", "HEAD")
    assert rows[first]["note"] == "missing"  # before `gates init`: no gates.toml to audit
    assert "not recorded" in filled.err and "no gates.toml" in filled.err
    worktrees = subprocess.run(
        ["git", "-C", str(ws.root), "worktree", "list", "--porcelain"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert worktrees.count("worktree ") == 1  # the temporary worktrees are gone


def test_recording_needs_a_key_and_a_bad_range_is_one_error_line(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GATES_SIGNING_KEY")
    result = ws.gates(capsys, "history", "--record")
    assert result.code == 2
    assert "recording history needs a signing key" in result.err
    assert ws.repo.git.notes("--ref", NOTES_REF, "list") == ""
    bad = ws.gates(capsys, "history", "no-such-branch..HEAD")
    assert bad.code == 2
    assert len(bad.err.strip().splitlines()) == 1
    assert "revision range no-such-branch..HEAD does not resolve" in bad.err
    option = ws.gates(capsys, "history", "--", "--output=/tmp/x")
    assert option.code == 2
    assert "not a revision range: --output=/tmp/x" in option.err


@pytest.mark.slow
def test_the_html_report_charts_the_history_and_marks_untrusted_notes(
    ws: Workspace, capsys: pytest.CaptureFixture[str], signing: TrustSetup, tmp_path: Path
) -> None:
    made = commits(ws, 3)
    record(ws.root, summary(made[0], 57), load_key(signing.key))
    record(ws.root, summary(made[1], 100), load_key(signing.key))
    stranger = make_trust(tmp_path / "stranger", name="stranger")
    record(ws.root, summary(made[2], 100), load_key(stranger.key))
    out = tmp_path / "report"
    result = ws.gates(capsys, "report", "--html", str(out), "--history", f"{made[0]}~1..HEAD")
    assert result.code == 0, result.err
    page = (out / "report.html").read_text()
    assert 'id="history-formal-steps"' in page
    assert 'id="history-untrusted"' in page
    assert "1 note(s) are not signed by a trusted key: shown, never counted as fact." in page


def test_a_trusted_signature_over_something_else_is_not_a_summary(
    ws: Workspace, capsys: pytest.CaptureFixture[str], signing: TrustSetup
) -> None:
    """A genuine envelope of the CI key (a receipt's, say) attached as a note proves nothing."""
    head = ws.repo.head.commit.hexsha
    other = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": "commit", "digest": {"gitCommit": head}}],
        "predicateType": "https://gates.dev/attestation/receipt/v1",
        "predicate": {"anything": 1},
    }
    envelope = sign_statement(other, load_key(signing.key))
    ws.repo.git.notes("--ref", NOTES_REF, "add", "-m", json.dumps(envelope), head)
    row = by_commit(history(ws, capsys))[head]
    assert row["note"] == "untrusted"
    assert row["reason"] == "signed, but not an audit summary"
    assert row["summary"] is None
