"""Red team (issue 16, "Done when"): the attacker writes only the PR (files of the audited
repository, including every piece of code gates runs) and CI is set up as docs/ci.md and
docs/trust.md say: the trust file outside the workspace, GATES_POLICY_REF a full refname, one
CI key trusted for both sides, the example examples/glm52-minimal as the port. Each test
replays one route end to end through the CLI, on a real git repository and the real sandbox,
and asserts that it is blocked with its reason named (never `pass`, never a formal count).

The attacker's entrypoint (ATTACK) tries every route of issue 16's Why list from inside the
run at once, writes what it reached into the run folder, and then trains honestly: the
audit of that PR must give the honest count (4 / 100 on the example) and nothing it stole."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
import pytest

from gates.commands.demo import PROFILE, lay_out  # the example's profile and layout
from tests.helpers import (
    REPO_ROOT,
    Result,
    Workspace,
    commit_all,
    declare_entrypoints,
    run_gates,
    signed_run,
    write,
)
from tests.lossgen import train_losses

EXAMPLE = REPO_ROOT / "examples" / "glm52-minimal"
POLICY_REF = "refs/remotes/origin/main"
HONEST_STEPS = 4  # the example's honest Paddle run agrees with torch's for 4 steps
#: the run protocol's variables: the only GATES_* names a sandboxed child may see
PROTOCOL = {
    "GATES_RUN_DIR",
    "GATES_RUN_ID",
    "GATES_GIT_HEAD",
    "GATES_FRAMEWORK",
    "GATES_MODEL_CONFIG",
    "GATES_STATE_EVERY",
}


@dataclass(frozen=True)
class CI:
    """The CI machine: a clone of the port with the PR checked out, and what CI keeps
    outside it (key, trust file, cache folder, a secret of its own)."""

    root: Path
    repo: git.Repo
    secrets: Path  # key, trust file: outside the workspace
    cache: Path

    def gates(self, capsys: pytest.CaptureFixture[str], *args: str) -> Result:
        return run_gates(capsys, "-C", str(self.root), *args)


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[CI]:
    """The example as the protected `main` (fetched as refs/remotes/origin/main), pinned, and
    a PR branch off it; the demo key, copied outside, is the CI key trusted for both sides."""
    root = tmp_path / "port"
    lay_out(root)  # the example's code commit, the one its recorded torch run was made at
    repo = git.Repo(root)
    secrets = tmp_path / "ci-secrets"
    secrets.mkdir(mode=0o700)
    for name in ("demo.key", "demo.pub"):
        shutil.copy(EXAMPLE / "demo-keys" / name, secrets / name)
    (secrets / "demo.key").chmod(0o600)
    trust = secrets / "trust.toml"
    trust.write_text(
        '[[signers]]\nname = "ci"\npublic_key = "demo.pub"\nframeworks = ["torch", "paddle"]\n'
    )
    cache = tmp_path / "ci-cache"
    monkeypatch.setenv("GATES_SIGNING_KEY", str(secrets / "demo.key"))
    monkeypatch.setenv("GATES_TRUST", str(trust))
    monkeypatch.setenv("GATES_CACHE_DIR", str(cache))
    monkeypatch.setenv("CI_JOB_TOKEN", "ci-secret-token")  # a secret of CI's own
    result = run_gates(capsys, "-C", str(root), "freeze", "pin", "HEAD")
    assert result.code == 0, result.err
    commit_all(repo, "pin")
    _git(root, "update-ref", POLICY_REF, "HEAD")
    monkeypatch.setenv("GATES_POLICY_REF", POLICY_REF)
    _git(root, "checkout", "-q", "-b", "pr")
    yield CI(root, repo, secrets, cache)


def _run_paddle(ci: CI, capsys: pytest.CaptureFixture[str], *extra: str) -> Result:
    args = [arg for key, value in PROFILE.items() for arg in ("--profile", f"{key}={value}")]
    return ci.gates(
        capsys,
        "run",
        "--framework",
        "paddle",
        *extra,
        *args,
        "--",
        sys.executable,
        "model/train_paddle.py",
    )


def _audit(ci: CI, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    result = ci.gates(capsys, "audit", "--format", "json")
    report: dict[str, Any] = json.loads(result.out)
    return report


def _pin_pr(ci: CI, capsys: pytest.CaptureFixture[str], message: str) -> None:
    """The PR commits its change and pins it, as a PR author must for a formal run."""
    commit_all(ci.repo, message)
    result = ci.gates(capsys, "freeze", "pin", "HEAD")
    assert result.code == 0, result.err
    commit_all(ci.repo, "pin")


# --- gates refresh: a recorded checker command re-run by `python -m gates` --------------


@pytest.mark.slow
def test_refresh_never_imports_a_gates_package_committed_in_the_audited_repository(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Route 7 again, through `gates refresh`: it re-runs a stale checker's recorded command
    as `python -m gates ...` in the workspace. Without isolated mode the workspace is first on
    sys.path, so a `gates/__main__.py` the PR commits runs instead of gates, outside every
    sandbox, with CI's whole environment (the signing key's path among it)."""
    stolen = tmp_path / "stolen.txt"
    payload = (
        "import os, pathlib\n"
        f"pathlib.Path({str(stolen)!r}).write_text(os.environ.get('GATES_SIGNING_KEY', ''))\n"
    )
    write(ws.root, "gates/__init__.py", payload)
    write(ws.root, "gates/__main__.py", payload)
    declare_entrypoints(ws.root)
    commit_all(ws.repo, "a helper package that happens to be called gates")
    assert ws.gates(capsys, "freeze", "pin", "HEAD").code == 0
    commit_all(ws.repo, "pin")
    signed_run(ws.root, capsys, "torch", train_losses(5))
    signed_run(ws.root, capsys, "paddle", train_losses(5))
    ref, cand = "results/torch/loss.json", "results/paddle/loss.json"
    assert ws.gates(capsys, "check", "loss", ref, cand, "--required-steps", "5").code == 0
    signed_run(ws.root, capsys, "paddle", train_losses(5, seed=3))  # the check goes stale
    refreshed = ws.gates(capsys, "refresh")
    assert not stolen.exists(), "the PR's gates package ran with CI's environment"
    assert "exit 0: gates check loss" in refreshed.out, refreshed.out + refreshed.err


# --- the run folder: links the PR commits where outputs go ---------------------------------


@pytest.mark.parametrize("target", ["../.git/hooks", "torch", "/tmp"])
def test_a_committed_symlink_as_the_run_folder_is_refused_before_anything_runs(
    ci: CI, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    """`results/paddle` committed as a link (into `.git/hooks`, onto torch's evidence, out of
    the workspace): emptying it (--clean) or moving outputs into it would plant hooks in CI's
    clone or destroy the reference's evidence. It is refused by name; nothing is touched."""
    shutil.rmtree(ci.root / "results/paddle")
    (ci.root / "results/paddle").symlink_to(target)
    _pin_pr(ci, capsys, "results/paddle: a link")
    hooks = sorted(p.name for p in (ci.root / ".git/hooks").iterdir())
    torch = sorted(p.name for p in (ci.root / "results/torch").iterdir())
    result = _run_paddle(ci, capsys, "--clean")
    assert result.code != 0
    assert "results/paddle" in result.err and "symlink" in result.err, result.err
    assert sorted(p.name for p in (ci.root / ".git/hooks").iterdir()) == hooks
    assert sorted(p.name for p in (ci.root / "results/torch").iterdir()) == torch
    assert "Traceback" not in result.err


# --- one PR that tries routes 1, 2, 3 and 6 from inside the candidate's signed run ----------

ATTACK = """import json as _json, os as _os, sys as _sys, pathlib as _pathlib
_run = _pathlib.Path(_os.environ.get("GATES_RUN_DIR", "."))
if (_run / "loss.json").exists():  # route 1: "resume" from the forged files of the PR
    _sys.exit(0)
_reached = {}
def _read(name, path):
    try:
        _reached[name] = _pathlib.Path(path).read_bytes().decode("utf-8", "replace")
    except Exception as error:
        _reached[name] = "blocked: " + type(error).__name__
def _write(name, path, text):
    try:
        with open(path, "a") as handle:
            handle.write(text)
        _reached[name] = "WRITTEN"
    except Exception as error:
        _reached[name] = "blocked: " + type(error).__name__
_reached["environment"] = dict(_os.environ)  # route 2: GATES_SIGNING_KEY, CI's secrets
for _pid in ("1", str(_os.getppid()), "self"):
    _read("proc-" + _pid, "/proc/" + _pid + "/environ")
_read("key", SECRETS + "/demo.key")
_read("trust", SECRETS + "/trust.toml")
_read("torch-losses", ROOT + "/results/torch/loss.json")  # route 6
_write("trust-append", SECRETS + "/trust.toml", "# attacker's signer\\n")  # route 3
_write("audit-index", CACHE + "/planted", "formal")
_write("git-index", ROOT + "/.git/index", "x")
_write("policy-ref", ROOT + "/.git/refs/remotes/origin/main", "0" * 40)
_write("hook", ROOT + "/.git/hooks/pre-push", "#!/bin/sh\\n")
(_run / "leak.json").write_text(_json.dumps(_reached, indent=1))
"""


def _attacker_entrypoint(ci: CI) -> None:
    """The PR's train_paddle.py: the attack first (after `from __future__`), then the honest
    training, and forged Paddle outputs (torch's, copied) committed in its run folder."""
    path = ci.root / "model/train_paddle.py"
    lines = path.read_text().splitlines(keepends=True)
    at = next((i + 1 for i, line in enumerate(lines) if line.startswith("from __future__")), 0)
    attack = (
        ATTACK.replace("SECRETS", repr(str(ci.secrets)))
        .replace("ROOT", repr(str(ci.root)))
        .replace("CACHE", repr(str(ci.cache)))
    )
    path.write_text("".join(lines[:at]) + attack + "".join(lines[at:]))
    for name in ("loss.json", "raw_loss.jsonl", "env.json", "manifest.json"):
        shutil.copy(ci.root / "results/torch" / name, ci.root / "results/paddle" / name)
    (ci.root / "results/paddle/rank-0").mkdir(exist_ok=True)
    shutil.copy(ci.root / "results/torch/loss.json", ci.root / "results/paddle/rank-0/loss.json")


def _host_state(ci: CI) -> dict[str, object]:
    git_dir = ci.root / ".git"
    return {
        "trust": (ci.secrets / "trust.toml").read_bytes(),
        "index": (git_dir / "index").read_bytes(),
        "policy ref": _git(ci.root, "rev-parse", POLICY_REF),
        "hooks": sorted(p.name for p in (git_dir / "hooks").iterdir()),
        "planted in the cache": (ci.cache / "planted").exists(),
    }


@pytest.mark.slow
def test_the_attacker_s_pr_gets_the_honest_count_and_nothing_it_reached_for(
    ci: CI, capsys: pytest.CaptureFixture[str]
) -> None:
    """Routes 1 (forged files + resume guard, a forged rank folder), 2 (key, CI's secrets,
    the parent's environment), 3 (audit index, git index, policy ref, hooks, trust file) and
    6 (torch's losses read during the run), all from the candidate entrypoint of one PR."""
    _attacker_entrypoint(ci)
    _pin_pr(ci, capsys, "paddle: resume from a previous run; faster startup")
    before = _host_state(ci)

    refused = _run_paddle(ci, capsys)
    assert refused.code != 0
    assert "run folder results/paddle is not empty" in refused.err, refused.err
    assert "results/paddle/loss.json" in refused.err

    ran = _run_paddle(ci, capsys, "--clean")
    assert ran.code == 0, ran.err
    assert not (ci.root / "results/paddle/rank-0").exists()
    leak = json.loads((ci.root / "results/paddle/leak.json").read_text())
    key = (ci.secrets / "demo.key").read_text()
    shown = json.dumps(leak)
    assert key.strip().splitlines()[1] not in shown
    assert "ci-secret-token" not in shown and str(ci.secrets) + "/demo.key" not in shown
    assert not any(
        name.startswith("GATES_") and name not in PROTOCOL for name in leak["environment"]
    )
    for name in ("key", "trust", "torch-losses"):
        assert leak[name].startswith("blocked"), (name, leak[name])
    for name in ("trust-append", "audit-index", "git-index", "policy-ref", "hook"):
        assert leak[name].startswith("blocked"), (name, leak[name])
    assert _host_state(ci) == before

    report = _audit(ci, capsys)
    judged = {r["path"]: r for r in report["receipts"]}
    ours = json.loads((ci.root / "results/paddle/loss.json").read_text())["losses"]
    torch = json.loads((ci.root / "results/torch/loss.json").read_text())["losses"]
    agree = next(i for i, (a, b) in enumerate(zip(ours, torch, strict=True)) if a != b)
    assert agree == HONEST_STEPS, "the guard resumed nothing: the run trained for real"
    assert report["formal_alignment_steps"] == HONEST_STEPS, report["formal_alignment_steps"]
    assert report["verdict"] != "pass"
    # the PR changed Paddle code only: the protected torch run stays formal ([sides])
    assert judged["results/torch/loss.receipt.json"]["status"] == "formal"
    assert judged["results/paddle/loss.receipt.json"]["status"] == "formal"


# --- route 4: names that resolve elsewhere ---------------------------------------------------


def test_a_local_branch_or_tag_named_like_the_policy_ref_never_gives_the_pr_s_policy(
    ci: CI, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The PR's scripts create `refs/heads/origin/main` and a tag `main` at the PR's own
    commit, whose policy waives everything. The full refname CI sets still names the
    protected commit; a short name is an error listing the candidates."""
    protected = _git(ci.root, "rev-parse", POLICY_REF)
    write(
        ci.root,
        "contracts/all.waiver.toml",
        'contract = "*"\nowner = "me"\nreason = "x"\nexpires = 2099-12-31\n',
    )
    commit_all(ci.repo, "waive")
    _git(ci.root, "branch", "origin/main")
    _git(ci.root, "tag", "main")
    report = _audit(ci, capsys)
    assert report["policy"]["ref"] == POLICY_REF and report["policy"]["commit"] == protected
    assert report["verdict"] != "pass"
    for short in ("origin/main", "main"):
        monkeypatch.setenv("GATES_POLICY_REF", short)
        result = ci.gates(capsys, "audit")
        assert result.code == 2, result.out
        assert f"{short} is ambiguous" in result.err, result.err
        assert "verdict=pass" not in result.out


# --- route 5: what runs is not what was frozen -----------------------------------------------


def test_a_symlinked_entrypoint_into_an_evidence_location_is_refused_and_nothing_signed(
    ci: CI, capsys: pytest.CaptureFixture[str]
) -> None:
    """train_paddle.py committed as a link into experiments/, where the real code can change
    after the pin with the freeze passing."""
    entry = ci.root / "model/train_paddle.py"
    shutil.copy(entry, ci.root / "experiments/train_paddle.py")
    entry.unlink()
    entry.symlink_to("../experiments/train_paddle.py")
    _pin_pr(ci, capsys, "paddle: entrypoint moved")
    shutil.rmtree(ci.root / "results/paddle")
    result = _run_paddle(ci, capsys)
    assert result.code != 0
    assert "model/train_paddle.py" in result.err and "symlink" in result.err, result.err
    assert not (ci.root / "results/paddle/run.receipt.json").exists()


# --- new route: the PR's own [sandbox] settings -------------------------------------------------


@pytest.mark.slow
def test_the_pr_s_sandbox_settings_are_proposed_never_applied(
    ci: CI, capsys: pytest.CaptureFixture[str]
) -> None:
    """The PR's gates.toml declares CI's secrets folder an input, passes CI's token and the
    key's variable through `[sandbox] env`, opens the network, drops `required` and lists
    paddle as `recorded`: none of it is read from the PR; the run sees none of it."""
    config = ci.root / "gates.toml"
    text = config.read_text().replace(
        'required = true\nrecorded = ["torch"]',
        f'required = false\nrecorded = ["torch", "paddle"]\nnetwork = true\n'
        f'env = ["CI_JOB_TOKEN", "GATES_SIGNING_KEY"]\ninputs = [{json.dumps(str(ci.secrets))}]',
    )
    assert text != config.read_text()
    config.write_text(text)
    _attacker_entrypoint(ci)
    _pin_pr(ci, capsys, "sandbox: the data we need")
    ran = _run_paddle(ci, capsys, "--clean")
    assert ran.code == 0, ran.err
    leak = json.loads((ci.root / "results/paddle/leak.json").read_text())
    assert leak["key"].startswith("blocked") and leak["trust"].startswith("blocked")
    assert "CI_JOB_TOKEN" not in leak["environment"]
    assert "GATES_SIGNING_KEY" not in leak["environment"]
    receipt = json.loads((ci.root / "results/paddle/run.receipt.json").read_text())
    isolation = receipt["provenance"]["run"]["isolation"]
    assert isolation["network"] is False and isolation["inputs"] == {}
    report = _audit(ci, capsys)
    assert any("gates.toml" in change for change in report["policy"]["proposed_changes"])

    # and a run made without the sandbox stays probe: `required` is the protected policy's
    ran = _run_paddle(ci, capsys, "--clean", "--no-sandbox")
    assert ran.code == 1 and "the policy in force requires the sandbox" in ran.out + ran.err
    ran = _run_paddle(ci, capsys, "--clean", "--no-sandbox", "--force")
    assert ran.code == 0, ran.err
    judged = {r["path"]: r for r in _audit(ci, capsys)["receipts"]}
    run = judged["results/paddle/run.receipt.json"]
    assert run["status"] == "probe" and "run not isolated" in run["reason"], run


# --- new route: the run log's folder committed as a link -------------------------------------


def test_a_committed_gates_folder_link_does_not_let_the_run_write_outside_the_workspace(
    ci: CI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`.gates` (where `gates run` keeps the child's stderr as `.gates/runs/<id>.log`) committed
    as a link to a folder outside the workspace: the run's log, whose content the PR's code
    writes, must not land there."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (ci.root / ".gates").symlink_to(outside)
    _pin_pr(ci, capsys, "tooling: share the run logs")
    result = _run_paddle(ci, capsys, "--clean")
    assert list(outside.iterdir()) == [], (result.code, result.err[-500:])
    assert result.code != 0
    assert "run log '.gates/runs/" in result.err and "symlink (.gates)" in result.err, result.err
    assert not (ci.root / "results/paddle/run.receipt.json").exists()
    assert "Traceback" not in result.err
