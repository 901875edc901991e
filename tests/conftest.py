"""The shared fixtures: an isolated HOME and git identity, a CI signing key and trust
file, a pinned workspace. Helpers live in tests/helpers.py.

The lanes (docs/performance.md, "The test suite"): a test that costs more than about half a
second of CPU of its own (a sandboxed run, a subprocess of gates, a Paddle or torch import)
carries `@pytest.mark.slow` where it is defined, as a decorator or the module's `pytestmark`;
one that launches training, a two-rank launcher or processes that size themselves to the
machine, or that measures memory, carries `@pytest.mark.heavy` besides: those run after the
others, two at a time."""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import git
import pytest

from gates.cli.app import main as gates_main
from tests.helpers import TrustSetup, Workspace, git_identity, make_repo, make_trust


@pytest.fixture(scope="session")
def session_trust(tmp_path_factory: pytest.TempPathFactory) -> TrustSetup:
    return make_trust(tmp_path_factory.mktemp("trust"))


@pytest.fixture(autouse=True)
def signing(session_trust: TrustSetup, monkeypatch: pytest.MonkeyPatch) -> TrustSetup:
    """Every test signs with a CI key and trusts it, as a provisioned CI machine does;
    tests of the trust layer override or remove these variables."""
    monkeypatch.setenv("GATES_SIGNING_KEY", str(session_trust.key))
    monkeypatch.setenv("GATES_TRUST", str(session_trust.trust))
    monkeypatch.delenv("GATES_POLICY_REF", raising=False)
    return session_trust


@pytest.fixture(autouse=True)
def isolated_git(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the user's git config; commits get a fixed identity."""
    for name, value in git_identity(tmp_path_factory.mktemp("home")).items():
        monkeypatch.setenv(name, value)


@pytest.fixture(scope="session")
def ws_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pinned workspace `ws` copies, built once per session (each xdist worker builds its
    own) under the tests' fixed git identity, so its commit is the one each test would make."""
    root = tmp_path_factory.mktemp("ws-template") / "ws"
    with pytest.MonkeyPatch.context() as patch:
        for name, value in git_identity(tmp_path_factory.mktemp("ws-template-home")).items():
            patch.setenv(name, value)
        make_repo(root)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                gates_main(["-C", str(root), "init", "--pin", "HEAD"])
            except SystemExit as done:
                assert done.code in (0, None), f"gates init --pin HEAD failed: {err.getvalue()}"
    return root


@pytest.fixture
def ws(tmp_path: Path, ws_template: Path) -> Iterator[Workspace]:
    """A pinned, clean workspace: `gates init --pin HEAD` on a committed repository (a copy
    of `ws_template` with fresh file times; git's index is refreshed to match the copy, as
    the commit left it)."""
    root = tmp_path / "ws"
    shutil.copytree(ws_template, root, symlinks=True, copy_function=shutil.copy)
    subprocess.run(["git", "update-index", "-q", "--refresh"], cwd=root, check=False)
    repo = git.Repo(root)
    yield Workspace(root, repo, repo.head.commit.hexsha)
