"""Shared helpers: real git repositories in temporary folders, an isolated HOME,
and a way to run the real CLI in-process and capture its exit code and output."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import git
import pytest

from gates.cli import main as gates_main

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def isolated_git(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the user's git config; commits get a fixed identity."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "Gates Test")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "test@gates.invalid")
        monkeypatch.setenv(f"GIT_{role}_DATE", "2026-01-01T00:00:00+00:00")


def write(root: Path, relpath: str, text: str) -> Path:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def commit_all(repo: git.Repo, message: str) -> str:
    repo.git.add(A=True)
    repo.git.commit("-q", "--allow-empty", "-m", message)
    return repo.head.commit.hexsha


def make_repo(root: Path, files: dict[str, str] | None = None) -> git.Repo:
    """A git repository with a small model package committed once."""
    root.mkdir(parents=True, exist_ok=True)
    repo = git.Repo.init(root, initial_branch="main")
    for relpath, text in (files or SOURCE_FILES).items():
        write(root, relpath, text)
    commit_all(repo, "model code")
    return repo


SOURCE_FILES = {
    "paddleformers/glm/modeling.py": "def forward(x):\n    return x\n",
    "paddleformers/glm/config.py": "HIDDEN = 16\n",
    "README.md": "model\n",
    ".gitignore": "*.log\n__pycache__/\n",
}


#: The parallel profile the shipped results contract requires (the seed PR's).
GLM_PROFILE = {
    "name": "minimum_complete",
    "mode": "optimizer",
    "device": "cuda",
    "dtype": "bfloat16",
    "tp": "2",
    "pp": "2",
    "ep": "1",
    "etp": "1",
    "sp": "true",
    "world": "4",
}

#: An env.json body (add "framework") as the seed PR's runs recorded it.
RUN_ENV = {
    "framework_version": "3.2.0",
    "device_name": "NVIDIA H800",
    "weights_loaded": True,
    "revision": "b4734de4facf877f85769a911abafc5283eab3d9",
    "model_config_sha256": "1" * 64,
}


def profile_args(profile: dict[str, str]) -> list[str]:
    return [arg for key, value in profile.items() for arg in ("--profile", f"{key}={value}")]


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_gates(capsys: pytest.CaptureFixture[str], *args: str) -> Result:
    """Run `gates ARGS` in-process through the real entry point."""
    capsys.readouterr()
    try:
        gates_main(list(args))
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 2)
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def run_script(*args: str, cwd: Path | None = None) -> Result:
    """Run a real subprocess with this interpreter (console scripts and audit_source_freeze.py)."""
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=cwd, check=False
    )
    return Result(done.returncode, done.stdout, done.stderr)


@dataclass
class Workspace:
    root: Path
    repo: git.Repo
    pin: str

    def gates(self, capsys: pytest.CaptureFixture[str], *args: str) -> Result:
        return run_gates(capsys, "-C", str(self.root), *args)


@pytest.fixture
def ws(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[Workspace]:
    """A pinned, clean workspace: `gates init --pin HEAD` on a committed repository."""
    root = tmp_path / "ws"
    repo = make_repo(root)
    result = run_gates(capsys, "-C", str(root), "init", "--pin", "HEAD")
    assert result.code == 0, result.err
    yield Workspace(root, repo, repo.head.commit.hexsha)
