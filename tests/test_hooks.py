"""The pre-merge hooks for real: the pre-commit framework running our hooks from a consumer
repository that references this repository by file:// URL, and `gates hook install` under
a real `git push`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT, Workspace, commit_all, make_repo, run_gates, write

PRE_COMMIT = [sys.executable, "-m", "pre_commit"]


def only_freeze_contract(root: Path) -> None:
    for path in (root / "contracts").glob("*.toml"):
        if "source-freeze" not in path.name:
            path.unlink()


def run(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)


@pytest.fixture
def consumer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, dict[str, str]]:
    """A GLM port repository whose .pre-commit-config.yaml uses this repository's hooks."""
    root = tmp_path / "consumer"
    repo = make_repo(root)
    rev = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    write(
        root,
        ".pre-commit-config.yaml",
        "\n".join(
            [
                "repos:",
                f"  - repo: file://{REPO_ROOT}",
                f"    rev: {rev}",
                "    hooks:",
                "      - id: audit-source-freeze",
                "      - id: gates-audit",
                "",
            ]
        ),
    )
    assert run_gates(capsys, "-C", str(root), "init").code == 0
    only_freeze_contract(root)
    pin = commit_all(repo, "governance and hooks")
    assert run_gates(capsys, "-C", str(root), "freeze", "pin", pin).code == 0
    commit_all(repo, "pin")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    env.pop("PRE_COMMIT", None)
    return root, env


@pytest.mark.slow
@pytest.mark.heavy
def test_pre_commit_runs_our_hooks_from_a_file_url(consumer: tuple[Path, dict[str, str]]) -> None:
    root, env = consumer
    passing = run([*PRE_COMMIT, "run", "--all-files", "--hook-stage", "pre-push"], root, env)
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert "audit source freeze" in passing.stdout and "Passed" in passing.stdout

    write(root, "paddleformers/glm/modeling.py", "def forward(x):\n    return x + 1\n")
    blocked = run([*PRE_COMMIT, "run", "--all-files", "--hook-stage", "pre-push"], root, env)
    assert blocked.returncode == 1
    assert "verdict=blocked" in blocked.stdout
    assert (
        "unstaged changes inside the source tree: paddleformers/glm/modeling.py" in blocked.stdout
    )
    assert "verdict=blocked" in blocked.stdout.split("gates audit")[-1]


@pytest.mark.slow
@pytest.mark.heavy
def test_changes_stashed_by_pre_commit_are_named(consumer: tuple[Path, dict[str, str]]) -> None:
    root, env = consumer
    write(root, "results/notes.txt", "staged evidence\n")
    subprocess.run(["git", "-C", str(root), "add", "results/notes.txt"], check=True)
    write(root, "paddleformers/glm/config.py", "HIDDEN = 4096\n")  # unstaged: pre-commit hides it
    result = run([*PRE_COMMIT, "run", "audit-source-freeze", "--hook-stage", "manual"], root, env)
    assert result.returncode == 1, result.stdout
    assert (
        "pre-commit stashed unstaged changes inside the source tree while hooks run"
        in result.stdout
    )
    assert "paddleformers/glm/config.py" in result.stdout
    assert (root / "paddleformers/glm/config.py").read_text() == "HIDDEN = 4096\n"  # restored


@pytest.mark.slow
def test_git_hook_install_blocks_a_push_until_the_audit_passes(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    only_freeze_contract(ws.root)
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    ws.repo.git.remote("add", "origin", str(remote))
    assert ws.gates(capsys, "hook", "install").code == 0
    hook = ws.root / ".git/hooks/pre-push"
    assert os.access(hook, os.X_OK)
    write(ws.root, "paddleformers/glm/wip.py", "x = 1\n")
    push = run(["git", "push", "-q", "origin", "main"], ws.root, dict(os.environ))
    assert push.returncode != 0
    assert (
        "untracked files inside the source tree: paddleformers/glm/wip.py"
        in push.stdout + push.stderr
    )
    (ws.root / "paddleformers/glm/wip.py").unlink()
    push = run(["git", "push", "-q", "origin", "main"], ws.root, dict(os.environ))
    assert push.returncode == 0, push.stdout + push.stderr
    assert ws.gates(capsys, "hook", "uninstall").code == 0
    assert not hook.exists()


def test_hook_install_keeps_a_foreign_hook(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    hook = ws.root / ".git/hooks/pre-push"
    hook.write_text("#!/bin/sh\necho theirs\n")
    refused = ws.gates(capsys, "hook", "install")
    assert refused.code == 2
    assert "a hook that gates did not write is already there" in refused.err
    assert ws.gates(capsys, "hook", "install", "--force").code == 0
    assert (ws.root / ".git/hooks/pre-push.pre-gates").read_text() == "#!/bin/sh\necho theirs\n"
    assert ws.gates(capsys, "hook", "uninstall").code == 0
    assert hook.read_text() == "#!/bin/sh\necho theirs\n"
    assert ws.gates(capsys, "hook", "uninstall").code == 2


PLANTED = """import os, pathlib, sys
pathlib.Path(os.environ["PLANTED_MARKER"]).write_text(
    "ran with " + " ".join(sorted(k for k in os.environ if k.startswith("GATES_")))
)
sys.exit(0)
"""


@pytest.mark.slow
def test_the_installed_hook_never_imports_a_gates_package_committed_in_the_repository(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Route 7: a `gates/` package with a `__main__.py` that exits 0 (and would see the
    pusher's GATES_* variables), committed and pinned in the port repository."""
    only_freeze_contract(ws.root)
    write(ws.root, "gates/__init__.py", "")
    write(ws.root, "gates/__main__.py", PLANTED)
    write(ws.root, "gates/cli/app.py", PLANTED)
    pin = commit_all(ws.repo, "a gates package in the port repository")
    assert ws.gates(capsys, "freeze", "pin", pin).code == 0
    commit_all(ws.repo, "pin")
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    ws.repo.git.remote("add", "origin", str(remote))
    assert ws.gates(capsys, "hook", "install").code == 0
    hook = (ws.root / ".git/hooks/pre-push").read_text()
    assert f'"{sys.executable}" -I -m gates audit' in hook
    marker = tmp_path / "planted-ran"
    env = {**os.environ, "PLANTED_MARKER": str(marker), "PYTHONPATH": str(ws.root)}
    write(ws.root, "paddleformers/glm/wip.py", "x = 1\n")
    blocked = run(["git", "push", "-q", "origin", "main"], ws.root, env)
    assert blocked.returncode != 0  # the planted __main__ would have exited 0
    assert "paddleformers/glm/wip.py" in blocked.stdout + blocked.stderr
    (ws.root / "paddleformers/glm/wip.py").unlink()
    passed = run(["git", "push", "-q", "origin", "main"], ws.root, env)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "verdict" in passed.stdout + passed.stderr  # the real audit's report
    assert not marker.exists()


@pytest.mark.slow
def test_hook_install_refuses_an_interpreter_that_cannot_import_gates_isolated(
    ws: Workspace, tmp_path: Path
) -> None:
    """gates reached only through PYTHONPATH: the hook's `-I` would not find it."""
    python = tmp_path / "venv/bin/python"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    for name in ("cryptography", "click", "pydantic"):  # make `import gates.cli.app` possible
        env["PYTHONPATH"] += os.pathsep + str(Path(__import__(name).__file__).parent.parent)
    done = run([str(python), "-m", "gates", "-C", str(ws.root), "hook", "install"], ws.root, env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "-I does not import this gates" in done.stderr
    assert not (ws.root / ".git/hooks/pre-push").exists()


DOCUMENTED_CONFIG = """repos:
  - repo: {url}
    rev: {rev}
    hooks:
      - id: audit-source-freeze-system
"""


@pytest.mark.slow
def test_the_documented_pre_push_setup_judges_the_pushed_commit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/hooks.md as written: the `-system` freeze hook at pre-push with the real
    pre-commit and a real `git push`; an edit in progress does not block a push of a frozen
    commit, a committed source change does, and no commit is blocked by it."""
    root = tmp_path / "port"
    repo = make_repo(root)
    rev = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    write(
        root,
        ".pre-commit-config.yaml",
        DOCUMENTED_CONFIG.format(url=f"file://{REPO_ROOT}", rev=rev),
    )
    assert run_gates(capsys, "-C", str(root), "init").code == 0
    pin = commit_all(repo, "governance and hooks")
    assert run_gates(capsys, "-C", str(root), "freeze", "pin", pin).code == 0
    commit_all(repo, "pin")
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    repo.git.remote("add", "origin", str(remote))
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("PRE_COMMIT", None)
    installed = run([*PRE_COMMIT, "install", "--hook-type", "pre-push"], root, env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert not (root / ".git/hooks/pre-commit").exists(), "nothing runs at every commit"

    write(root, "paddleformers/glm/modeling.py", "def forward(x):\n    return x + 1\n")
    push = run(["git", "push", "-q", "origin", "main"], root, env)
    assert push.returncode == 0, push.stdout + push.stderr  # the edit in progress is not pushed

    commit_all(repo, "change the model")
    push = run(["git", "push", "-q", "origin", "main"], root, env)
    assert push.returncode != 0
    out = push.stdout + push.stderr
    assert "verdict=blocked" in out
    assert "source tree differs from the pin's in 1 path(s): paddleformers/glm/modeling.py" in out


def test_init_sets_up_policy_and_trust_and_has_git_ignore_local_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "port"
    repo = make_repo(root)
    before = (root / ".gitignore").read_text()
    assert run_gates(capsys, "-C", str(root), "init").code == 0
    text = (root / "gates.toml").read_text()
    assert "# [policy]\n# ref = " in text and "# [trust]\n" in text
    assert (root / ".gitignore").read_text() == before, "the source .gitignore is not edited"
    write(root, ".gates/cache/stat.json", "{}")
    assert repo.git.status("--porcelain", "--untracked-files=all", ".gates") == ""
    monkeypatch.delenv("GATES_TRUST")
    installed = run_gates(capsys, "-C", str(root), "hook", "install")
    assert installed.code == 0
    assert "[policy] ref is empty" in installed.out and "no trust anchors" in installed.out
