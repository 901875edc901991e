"""The freeze is not fooled by git's local state: each bypass is made real, shown to fool
`git status`, and must block through audit_source_freeze.py with its named reason."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

import audit_source_freeze
from tests.helpers import Workspace, commit_all, write

MODEL = "paddleformers/glm/modeling.py"
CONFIG = "paddleformers/glm/config.py"
EDITED = "def forward(x):\n    return 9 * x  # changed\n"


def freeze_json(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    capsys.readouterr()
    code = audit_source_freeze.main(["-C", str(ws.root), "--json"])
    return code, json.loads(capsys.readouterr().out)


def reasons(report: dict[str, object]) -> dict[str, str]:
    listed = report["reasons"]
    assert isinstance(listed, list)
    return {reason["code"]: reason["message"] for reason in listed}


def git_status_is_clean(ws: Workspace) -> bool:
    """What plain `git status` says of the model package (gates.toml and contracts aside)."""
    return ws.repo.git.status("--porcelain", "--untracked-files=all", "--", "paddleformers") == ""


def age_files(root: Path, seconds: int = 3600) -> None:
    """Give every file an old mtime, so the stat cache may keep its answer."""
    past = (Path(root / "README.md").stat().st_mtime_ns // 10**9 - seconds) * 10**9
    for path in root.rglob("*"):
        if ".git" not in path.relative_to(root).parts and path.is_file():
            os.utime(path, ns=(past, past))


def test_assume_unchanged_edit_blocks(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    ws.repo.git.update_index("--assume-unchanged", MODEL)
    write(ws.root, MODEL, EDITED)
    assert git_status_is_clean(ws)
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert list(reasons(report)) == ["assume_unchanged"]
    assert MODEL in reasons(report)["assume_unchanged"]
    assert "--no-assume-unchanged" in reasons(report)["assume_unchanged"]


def test_assume_unchanged_flag_alone_is_refused(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    ws.repo.git.update_index("--assume-unchanged", CONFIG)
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert list(reasons(report)) == ["assume_unchanged"]


def test_skip_worktree_edit_blocks(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    ws.repo.git.update_index("--skip-worktree", CONFIG)
    write(ws.root, CONFIG, "HIDDEN = 4096\n")
    assert git_status_is_clean(ws)
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert list(reasons(report)) == ["skip_worktree"]
    assert CONFIG in reasons(report)["skip_worktree"]


def test_git_replace_of_the_pin_blocks(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    write(ws.root, MODEL, EDITED)
    changed = commit_all(ws.repo, "change the model")
    ws.repo.git.replace(ws.pin, changed)
    assert ws.repo.git.rev_parse(f"{ws.pin}^{{tree}}") == ws.repo.git.rev_parse("HEAD^{tree}")
    code, report = freeze_json(ws, capsys)
    assert code == 1
    found = reasons(report)
    assert set(found) == {"tree_differs", "replaced_object"}
    assert MODEL in found["tree_differs"]
    assert f"git replace -d {ws.pin}" in found["replaced_object"]


def test_file_hidden_by_info_exclude_blocks(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write(ws.root, "paddleformers/glm/evil.py", "import os\n")
    (ws.root / ".git" / "info").mkdir(exist_ok=True)
    (ws.root / ".git" / "info" / "exclude").write_text("evil.py\n", encoding="utf-8")
    assert git_status_is_clean(ws)
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert list(reasons(report)) == ["local_ignore_rule"]
    assert "paddleformers/glm/evil.py" in reasons(report)["local_ignore_rule"]


def test_file_hidden_by_core_excludes_file_blocks(
    ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    excludes = tmp_path / "global-ignore"
    excludes.write_text("*.py\n", encoding="utf-8")
    ws.repo.git.config("core.excludesFile", str(excludes))
    write(ws.root, "paddleformers/glm/hook.py", "x = 1\n")
    assert git_status_is_clean(ws)
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert list(reasons(report)) == ["local_ignore_rule"]
    assert "paddleformers/glm/hook.py" in reasons(report)["local_ignore_rule"]


def test_untracked_gitignore_that_hides_itself_blocks(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write(ws.root, "paddleformers/glm/ops/.gitignore", "*\n")
    write(ws.root, "paddleformers/glm/ops/kernel.py", "K = 1\n")
    assert git_status_is_clean(ws)
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert list(reasons(report)) == ["local_ignore_rule"]
    assert "paddleformers/glm/ops/.gitignore" in reasons(report)["local_ignore_rule"]


def test_edit_that_restores_mtime_under_trustctime_false_blocks(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    age_files(ws.root)
    ws.repo.git.update_index("--really-refresh")
    code, _ = freeze_json(ws, capsys)
    assert code == 0
    code, _ = freeze_json(ws, capsys)
    assert code == 0, "second run, from the stat cache"
    ws.repo.git.config("core.trustctime", "false")
    before = (ws.root / CONFIG).stat()
    write(ws.root, CONFIG, "HIDDEN = 61\n")
    os.utime(ws.root / CONFIG, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert git_status_is_clean(ws), "git trusts the index stat data"
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert list(reasons(report)) == ["content_differs"]
    assert CONFIG in reasons(report)["content_differs"]


def test_local_clean_filter_is_named(
    ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pristine = tmp_path / "pristine.py"
    pristine.write_bytes((ws.root / MODEL).read_bytes())
    copy_pristine = "import sys; sys.stdout.write(open(sys.argv[1]).read())"
    clean = shlex.join([sys.executable, "-c", copy_pristine, str(pristine)])
    ws.repo.git.config("filter.pristine.clean", clean)
    (ws.root / ".git" / "info" / "attributes").write_text(f"{MODEL} filter=pristine\n")
    same_size = "def forward(x):\n    return 0\n"
    assert len(same_size) == (ws.root / MODEL).stat().st_size
    write(ws.root, MODEL, same_size)
    assert git_status_is_clean(ws)
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert list(reasons(report)) == ["filtered"]
    message = reasons(report)["filtered"]
    assert f"{MODEL} (filter=pristine)" in message
    assert "filter.pristine.clean" in message
    assert ".git/config" in message


def test_fsmonitor_is_never_asked(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    hook = ws.root / ".git" / "quiet-fsmonitor"
    hook.write_text("#!/bin/sh\nprintf 'token\\0'\n", encoding="utf-8")
    hook.chmod(0o755)
    ws.repo.git.config("core.fsmonitor", str(hook))
    ws.repo.git.update_index("--fsmonitor")
    ws.repo.git.status()  # writes the index with every entry marked fsmonitor-valid
    write(ws.root, MODEL, EDITED)
    assert git_status_is_clean(ws), "the hook says nothing changed"
    code, report = freeze_json(ws, capsys)
    assert code == 1
    assert list(reasons(report)) == ["unstaged"]
