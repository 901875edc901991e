"""The policy ref names one thing (issue 16, item 5): a short name that more than one ref
could mean is refused with its candidates, a full refname or a commit id is accepted, and
every report prints the full refname and the full commit."""

from __future__ import annotations

import json

import pytest

from tests.helpers import REPO_ROOT, Workspace, commit_all, run_script


def _main_with_a_pr(ws: Workspace) -> str:
    """main holds the policy (committed); the PR is a branch off it. Returns main's commit."""
    commit_all(ws.repo, "policy on main")
    main = ws.repo.head.commit.hexsha
    ws.repo.git.checkout("-q", "-b", "pr")
    return main


def test_a_local_branch_origin_main_shadowing_the_remote_one_is_refused(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    main = _main_with_a_pr(ws)
    ws.repo.git.update_ref("refs/remotes/origin/main", main)
    ws.repo.git.branch("origin/main")  # what a PR's script can create in CI's clone
    monkeypatch.setenv("GATES_POLICY_REF", "origin/main")
    for args in (("audit",), ("audit", "--format", "json"), ("status",), ("steps",)):
        result = ws.gates(capsys, *args)
        assert result.code == 2, (args, result.out)
        assert "ambiguous" in result.err
        assert "refs/heads/origin/main" in result.err
        assert "refs/remotes/origin/main" in result.err
        if "json" in args:  # one document even when nothing can be judged: verdict error
            assert json.loads(result.out)["verdict"] == "error"
        else:
            assert result.out == ""
    script = run_script(str(REPO_ROOT / "audit_source_freeze.py"), "-C", str(ws.root))
    assert script.code == 2
    assert "ambiguous" in script.err


def test_a_tag_named_like_the_policy_branch_is_refused(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    main = _main_with_a_pr(ws)
    ws.repo.git.tag("main", "HEAD")  # the PR's head, tagged with the protected branch's name
    result = ws.gates(capsys, "--policy-ref", "main", "audit")
    assert result.code == 2
    assert "refs/tags/main" in result.err and "refs/heads/main" in result.err
    script = run_script(
        str(REPO_ROOT / "audit_source_freeze.py"), "-C", str(ws.root), "--policy-ref", "main"
    )
    assert script.code == 2 and "ambiguous" in script.err
    full = ws.gates(capsys, "--policy-ref", "refs/heads/main", "audit", "--format", "json")
    assert full.code in (0, 1), full.err
    assert json.loads(full.out)["policy"]["commit"] == main


def test_a_pseudo_ref_is_refused(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    _main_with_a_pr(ws)
    result = ws.gates(capsys, "--policy-ref", "HEAD", "audit")
    assert result.code == 2
    assert "not a branch or tag" in result.err


def test_every_report_prints_the_full_refname_and_commit(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    main = _main_with_a_pr(ws)
    outputs = {
        fmt: ws.gates(capsys, "--policy-ref", "main", "audit", "--format", fmt)
        for fmt in ("text", "json", "github", "junit")
    }
    outputs["status"] = ws.gates(capsys, "--policy-ref", "main", "status")
    for fmt, result in outputs.items():
        assert result.code in (0, 1), (fmt, result.err)
        assert "refs/heads/main" in result.out, fmt
        assert main in result.out, fmt
    policy = json.loads(outputs["json"].out)["policy"]
    assert (policy["ref"], policy["commit"]) == ("refs/heads/main", main)


def test_a_full_commit_id_is_accepted(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    main = _main_with_a_pr(ws)
    result = ws.gates(capsys, "--policy-ref", main, "audit", "--format", "json")
    assert result.code in (0, 1), result.err
    policy = json.loads(result.out)["policy"]
    assert policy["ref"] == f"commit {main}"
    assert policy["commit"] == main
    short = ws.gates(capsys, "--policy-ref", main[:12], "audit")
    assert short.code == 2  # an abbreviated id could come to mean another commit
    assert "does not name a commit" in short.err


def test_a_trust_ref_that_is_ambiguous_is_refused(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GATES_TRUST")  # anchors from [trust] ref + path only
    config = ws.root / "gates.toml"
    config.write_text(config.read_text() + '\n[trust]\nref = "main"\npath = "trust/trust.toml"\n')
    (ws.root / "trust").mkdir()
    (ws.root / "trust/trust.toml").write_text("")
    main = _main_with_a_pr(ws)
    ws.repo.git.tag("main", main)
    ws.repo.git.update_ref("refs/heads/other", main)
    result = ws.gates(capsys, "--policy-ref", "other", "audit")
    assert result.code == 2
    assert "[trust] ref main is ambiguous" in result.err
