"""The source-freeze check, one test per reason, through audit_source_freeze.py and the CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import git
import pytest

import audit_source_freeze
from gates.freeze.check import evaluate_freeze
from gates.workspace.config import parse_config
from tests.helpers import REPO_ROOT, Workspace, commit_all, make_repo, run_script, write


def freeze_json(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    capsys.readouterr()
    code = audit_source_freeze.main(["-C", str(ws.root), "--json"])
    return code, json.loads(capsys.readouterr().out)


def codes(report: dict[str, object]) -> list[str]:
    reasons = report["reasons"]
    assert isinstance(reasons, list)
    return [reason["code"] for reason in reasons]


def messages(report: dict[str, object]) -> str:
    reasons = report["reasons"]
    assert isinstance(reasons, list)
    return "\n".join(reason["message"] for reason in reasons)


def set_config(ws: Workspace, text: str) -> None:
    (ws.root / "gates.toml").write_text(text, encoding="utf-8")


def test_clean_pinned_workspace_passes(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = freeze_json(ws, capsys)
    assert code == 0
    assert report["verdict"] == "pass"
    assert report["head"] == ws.pin
    assert report["pin"] == ws.pin
    assert report["head_equals_pin"] is True
    assert report["reasons"] == []


def test_text_output_is_verdict_then_one_reason_a_line(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write(ws.root, "paddleformers/glm/modeling.py", "def forward(x):\n    return 2 * x\n")
    write(ws.root, "scratch.py", "print(1)\n")
    capsys.readouterr()
    code = audit_source_freeze.main(["-C", str(ws.root)])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert lines[0] == "verdict=blocked"
    assert lines[1:] == [
        "reason=unstaged changes inside the source tree: paddleformers/glm/modeling.py",
        "reason=untracked files inside the source tree: scratch.py",
    ]


def test_no_pin_blocks_with_the_fixing_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "ws"
    make_repo(root)
    write(root, "gates.toml", "[freeze]\n")
    capsys.readouterr()
    assert audit_source_freeze.main(["-C", str(root)]) == 1
    out = capsys.readouterr().out
    assert "verdict=blocked" in out
    assert "gates freeze pin" in out


def test_staged_change_blocks(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    write(ws.root, "paddleformers/glm/config.py", "HIDDEN = 32\n")
    ws.repo.git.add("paddleformers/glm/config.py")
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert codes(report) == ["staged"]
    assert "paddleformers/glm/config.py" in messages(report)


def test_unstaged_change_blocks(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    write(ws.root, "README.md", "model, edited\n")
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert codes(report) == ["unstaged"]


def test_deleted_file_blocks(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    (ws.root / "README.md").unlink()
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert codes(report) == ["unstaged"]


def test_untracked_file_blocks_but_ignored_file_does_not(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write(ws.root, "train.log", "ignored by .gitignore\n")
    code, report = freeze_json(ws, capsys)
    assert (code, report["verdict"]) == (0, "pass")
    write(ws.root, "paddleformers/glm/new_layer.py", "x = 1\n")
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert codes(report) == ["untracked"]
    assert "paddleformers/glm/new_layer.py" in messages(report)


def test_evidence_written_to_governance_paths_keeps_the_freeze(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    for location in (
        "results/paddle/loss.json",
        "experiments/e1/raw.jsonl",
        "outputs/survey.json",
        ".gates/cache/x.json",
        "contracts/extra.toml",
    ):
        write(ws.root, location, "{}\n")
    code, report = freeze_json(ws, capsys)
    assert (code, report["verdict"]) == (0, "pass")


def test_lint_only_commit_moves_head_and_blocks(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write(ws.root, "paddleformers/glm/modeling.py", "def forward(x):\n    return x  # lint\n")
    commit_all(ws.repo, "style: apply GLM lint formatting")
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert codes(report) == ["tree_differs"]
    assert "paddleformers/glm/modeling.py" in messages(report)
    assert report["head_equals_pin"] is False


def test_commit_adding_only_results_and_receipts_still_passes(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write(ws.root, "results/paddle/loss.json", '{"losses": [1.0]}\n')
    write(ws.root, "results/paddle/loss.receipt.json", "{}\n")
    commit_all(ws.repo, "evidence only")
    code, report = freeze_json(ws, capsys)
    assert (code, report["verdict"]) == (0, "pass")
    assert report["head_equals_pin"] is False


def test_strict_freeze_requires_head_to_be_the_pin(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (ws.root / "gates.toml").read_text().replace("strict = false", "strict = true")
    set_config(ws, text)
    write(ws.root, "results/paddle/loss.json", "{}\n")
    commit_all(ws.repo, "evidence only")
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert codes(report) == ["head_not_pin"]


def test_pin_missing_from_clone(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    text = (ws.root / "gates.toml").read_text().replace(ws.pin, "0123456789" * 4)
    set_config(ws, text)
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert codes(report) == ["pin_missing"]
    assert "not in this clone" in messages(report)
    assert "shallow" not in messages(report)


def test_shallow_clone_names_itself(
    ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commit_all(ws.repo, "governance files")
    write(ws.root, "paddleformers/glm/config.py", "HIDDEN = 64\n")
    commit_all(ws.repo, "newer model code")
    clone = tmp_path / "shallow"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", f"file://{ws.root}", str(clone)], check=True
    )
    capsys.readouterr()
    code = audit_source_freeze.main(["-C", str(clone), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert "pin_missing" in codes(report)
    assert "shallow clone?" in messages(report)


def test_pin_that_is_not_a_commit(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    tree = ws.repo.head.commit.tree.hexsha
    set_config(ws, (ws.root / "gates.toml").read_text().replace(ws.pin, tree))
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert codes(report) == ["pin_not_commit"]
    assert "is a tree, not a commit" in messages(report)


def test_unborn_head(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "empty"
    git.Repo.init(root)
    write(root, "gates.toml", '[freeze]\npin = "main"\n')
    capsys.readouterr()
    assert audit_source_freeze.main(["-C", str(root), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert "unborn_head" in codes(report)
    assert report["head"] is None


def test_detached_head_at_the_pin_passes(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    ws.repo.git.checkout("--detach", ws.pin)
    code, report = freeze_json(ws, capsys)
    assert (code, report["verdict"]) == (0, "pass")


def test_submodule_changes_block(
    ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    library = tmp_path / "kernels"
    make_repo(library, {"kernel.py": "K = 1\n"})
    ws.repo.git.execute(
        [
            "git",
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            str(library),
            "third_party/kernels",
        ]
    )
    pinned = commit_all(ws.repo, "add kernels submodule")
    set_config(ws, (ws.root / "gates.toml").read_text().replace(ws.pin, pinned))
    code, report = freeze_json(ws, capsys)
    assert (code, report["verdict"]) == (0, "pass")
    write(ws.root, "third_party/kernels/kernel.py", "K = 2\n")
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert codes(report) == ["submodule"]
    assert "third_party/kernels" in messages(report)


def test_concurrent_writer_between_the_two_reads_is_named(ws: Workspace) -> None:
    config = parse_config((ws.root / "gates.toml").read_text(), source=ws.root / "gates.toml")

    def writer() -> None:
        write(ws.root, "paddleformers/glm/launcher.py", "# written mid-audit\n")

    report = evaluate_freeze(ws.root, config, between_reads=writer)
    assert report.verdict == "blocked"
    concurrent = [r for r in report.reasons if r.code == "concurrent_writer"]
    assert len(concurrent) == 1
    assert "paddleformers/glm/launcher.py" in concurrent[0].message


def test_narrowed_source_tree_ignores_changes_outside_it(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (ws.root / "gates.toml").read_text().replace("paths = []", 'paths = ["paddleformers"]')
    set_config(ws, text)
    write(ws.root, "README.md", "docs only\n")
    write(ws.root, "notes.txt", "scratch\n")
    code, report = freeze_json(ws, capsys)
    assert (code, report["verdict"]) == (0, "pass")
    write(ws.root, "paddleformers/glm/config.py", "HIDDEN = 8\n")
    code, report = freeze_json(ws, capsys)
    assert codes(report) == ["unstaged"]


def test_excluded_paths_are_governance(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    text = (ws.root / "gates.toml").read_text().replace("exclude = []", 'exclude = ["docs"]')
    set_config(ws, text)
    write(ws.root, "docs/notes.md", "written during review\n")
    code, report = freeze_json(ws, capsys)
    assert (code, report["verdict"]) == (0, "pass")


def test_not_a_repository_is_an_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "plain/gates.toml", "[freeze]\n")
    capsys.readouterr()
    assert audit_source_freeze.main(["-C", str(tmp_path / "plain")]) == 2
    err = capsys.readouterr().err
    assert "root of a git repository" in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_script_runs_standalone_from_the_repository(ws: Workspace) -> None:
    result = run_script(str(REPO_ROOT / "audit_source_freeze.py"), "--json", cwd=ws.root)
    assert result.code == 0, result.err
    assert json.loads(result.out)["verdict"] == "pass"
    write(ws.root, "README.md", "dirty\n")
    result = run_script(str(REPO_ROOT / "audit_source_freeze.py"), "-C", str(ws.root))
    assert result.code == 1
    assert result.out.startswith("verdict=blocked\n")
