"""The shared fixtures: an isolated HOME and git identity, a CI signing key and trust
file, a pinned workspace. Helpers live in tests/helpers.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import TrustSetup, Workspace, make_repo, make_trust, run_gates

#: Slow tests in files other sessions are editing in parallel, marked here at collection
#: rather than by a decorator in each file (docs/performance.md, "The test suite"): real
#: two-rank launchers, a 60,000-tensor page, a memory measurement of 200 MB loss files.
SLOW_TESTS = frozenset(
    (
        "tests/test_checkpoint_ranks.py::test_ranks_started_seconds_apart_all_read_the_verdict_before_the_store_closes",
        "tests/test_sandbox.py::test_paddle_s_launcher_runs_two_ranks_in_the_sandbox_on_loopback",
        "tests/test_report.py::test_sixty_thousand_tensors_aggregate_and_the_page_stays_small",
        "tests/test_loss_stream.py::test_memory_grows_by_less_than_the_files_size",
    )
)
#: The replay tests that need the module's real Paddle training runs (40 s each here).
SLOW_FIXTURES = {"tests/test_replay.py": frozenset(("base", "forged"))}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        name = f"{path}::{getattr(item, 'originalname', item.name)}"
        fixtures = set(getattr(item, "fixturenames", ()))
        if name in SLOW_TESTS or fixtures & SLOW_FIXTURES.get(path, frozenset()):
            item.add_marker(pytest.mark.slow)


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
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "Gates Test")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "test@gates.invalid")
        monkeypatch.setenv(f"GIT_{role}_DATE", "2026-01-01T00:00:00+00:00")


@pytest.fixture
def ws(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[Workspace]:
    """A pinned, clean workspace: `gates init --pin HEAD` on a committed repository."""
    root = tmp_path / "ws"
    repo = make_repo(root)
    result = run_gates(capsys, "-C", str(root), "init", "--pin", "HEAD")
    assert result.code == 0, result.err
    yield Workspace(root, repo, repo.head.commit.hexsha)
