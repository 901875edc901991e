"""Test helpers: real git repositories in temporary folders, real keys and trust files,
and a way to run the real CLI in-process and capture its exit code and output.
The fixtures that use them live in tests/conftest.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import git
import pytest

from gates.cli.app import main as gates_main
from gates.core.hashing import StatCache, cache_path
from gates.core.invocation import Invocation, read_invocation
from gates.engine.inputs import AuditInputs, load_inputs
from gates.sandbox import SandboxHost, SandboxSupport
from gates.trust.keys import load_key, new_key, public_pem
from gates.workspace.repository import open_workspace

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class TrustSetup:
    """A signing key and a trust file that trusts it, both outside every workspace."""

    key: Path
    trust: Path
    keyid: str


def make_trust(folder: Path, frameworks: str = '["*"]', name: str = "ci") -> TrustSetup:
    """`gates key new` + a trust file naming its public key (real keys, real signatures)."""
    folder.mkdir(parents=True, exist_ok=True)
    key = folder / f"{name}.key"
    keyid = new_key(key)
    (folder / f"{name}.pub").write_text(public_pem(load_key(key)))
    trust = folder / "trust.toml"
    trust.write_text(
        f'[[signers]]\nname = "{name}"\npublic_key = "{name}.pub"\nframeworks = {frameworks}\n'
    )
    return TrustSetup(key, trust, keyid)


def write(root: Path, relpath: str, text: str) -> Path:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def commit_all(repo: git.Repo, message: str) -> str:
    repo.git.add(A=True)
    repo.git.commit("-q", "--allow-empty", "-m", message)
    return repo.head.commit.hexsha


def git_identity(home: Path) -> dict[str, str]:
    """The environment under which git reads no user or system config and commits with a
    fixed identity and date: the same commit ids in every test, every worker, every run."""
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "GIT_CONFIG_NOSYSTEM": "1"}
    for role in ("AUTHOR", "COMMITTER"):
        env[f"GIT_{role}_NAME"] = "Gates Test"
        env[f"GIT_{role}_EMAIL"] = "test@gates.invalid"
        env[f"GIT_{role}_DATE"] = "2026-01-01T00:00:00+00:00"
    return env


def make_repo(root: Path, files: dict[str, str] | None = None) -> git.Repo:
    """A git repository with a small model package committed once."""
    root.mkdir(parents=True, exist_ok=True)
    repo = git.Repo.init(root, initial_branch="main")
    for relpath, text in (files or SOURCE_FILES).items():
        write(root, relpath, text)
    commit_all(repo, "model code")
    return repo


TRAIN_SCRIPT = """import json, os, sys
from pathlib import Path

folder = Path(os.environ["GATES_RUN_DIR"])
framework, losses = sys.argv[1], json.loads(sys.argv[2])
options = dict(arg.partition("=")[::2] for arg in sys.argv[3:])
if "dump" in options:  # a dump staged by the test (a declared sandbox input), as written
    import shutil

    shutil.copytree(options["dump"], folder / "tensors")
elif "raw" in options:
    lines = [json.dumps({"step": i, "loss": v}) for i, v in enumerate(losses, 1)]
    (folder / "raw_loss.jsonl").write_text("\\n".join(lines) + "\\n")
else:
    (folder / "loss.json").write_text(json.dumps({"losses": losses}) + "\\n")
    env = json.loads(options["env"])
    (folder / "env.json").write_text(json.dumps({"framework": framework, **env}) + "\\n")
"""


SOURCE_FILES = {
    "trainer/train.py": TRAIN_SCRIPT,
    "paddleformers/glm/modeling.py": "def forward(x):\n    return x\n",
    "paddleformers/glm/config.py": "HIDDEN = 16\n",
    "README.md": "model\n",
    ".gitignore": "*.log\n__pycache__/\n",
}


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


RUN_ENV = {
    "framework_version": "3.2.0",
    "device_name": "NVIDIA H800",
    "weights_loaded": True,
    "revision": "b4734de4facf877f85769a911abafc5283eab3d9",
    "model_config_sha256": "1" * 64,
}


CPU_PROFILE = {**GLM_PROFILE, "device": "cpu", "world": "1"}


RESULTS_CONTRACT = "contracts/results-schema-and-provenance.toml"


def declare_entrypoints(root: Path, profile: dict[str, str] = CPU_PROFILE) -> None:
    """Give the workspace's results contract both entrypoints, and every contract the profile
    this machine really runs (device, world size)."""
    path = root / RESULTS_CONTRACT
    path.write_text(
        path.read_text()
        .replace(
            "reference_entrypoint = []", 'reference_entrypoint = ["python", "trainer/train.py"]'
        )
        .replace(
            "candidate_entrypoint = []", 'candidate_entrypoint = ["python", "trainer/train.py"]'
        )
        # the fake trainer commits no training state: it cannot be replayed (test_replay.py
        # tests the shipped set's replay rule on the example's real model)
        .replace("replay_windows = 8", "replay_windows = 0")
    )
    for contract in (root / "contracts").glob("*.toml"):
        text = contract.read_text()
        text = re.sub(
            r"^device = .*$", f"device = {json.dumps(profile['device'])}", text, flags=re.M
        )
        text = re.sub(r"^world = .*$", f"world = {int(profile['world'])}", text, flags=re.M)
        contract.write_text(text)


def signed_run(
    root: Path,
    capsys: pytest.CaptureFixture[str],
    framework: str,
    losses: list[float],
    *,
    out: str | None = None,
    profile: dict[str, str] = CPU_PROFILE,
    raw: bool = False,
    program: tuple[str, ...] = (),
    probe: bool = False,
    expect: int = 0,
    dump: Path | None = None,
    force: bool | None = None,
) -> Result:
    """`gates run` of the workspace's training entrypoint, signed with the CI key. The run
    is sandboxed: what it needs comes in its argv (the env.json body) or as a declared input
    of gates.toml (a staged dump). Another `program` than the entrypoint is launched past the
    pre-flight (--force) unless `force=False`: such tests are about what the audit makes of it."""
    if force is None:
        force = bool(program)
    command = program or (sys.executable, "trainer/train.py", framework, json.dumps(losses))
    extra: tuple[str, ...] = () if program else (f"env={json.dumps(RUN_ENV)}",)
    if raw and not program:
        extra = ("raw",)
    if dump is not None:
        extra = (f"dump={dump}",)
        config = root / "gates.toml"
        text, entry = config.read_text(), json.dumps(str(dump))
        if "\n[sandbox]\ninputs = [" in text:
            text = text.replace("\n[sandbox]\ninputs = [", f"\n[sandbox]\ninputs = [{entry}, ", 1)
        else:
            text += f"\n[sandbox]\ninputs = [{entry}]\n"
        config.write_text(text)
    result = run_gates(
        capsys,
        "-C",
        str(root),
        "run",
        "--framework",
        framework,
        "--clean",  # a re-run replaces what the folder held: outputs are what the run writes
        *(["--probe"] if probe else []),
        *(["--force"] if force else []),
        "--out",
        str(root / (out or f"results/{framework}")),
        *profile_args(profile),
        "--",
        *command,
        *extra,
    )
    assert result.code == expect, result.err
    return result


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


def invocation_now(**options: object) -> Invocation:
    """What the command line would resolve now: the options and the test's environment
    (the CI key and trust file the fixtures set, its HOME and cache)."""
    return read_invocation(os.environ, **options)  # type: ignore[arg-type]


def inputs_at(root: Path, **options: object) -> AuditInputs:
    """A command's inputs for the workspace at ``root``, resolved as the command line does."""
    invocation = invocation_now(**options)
    return load_inputs(open_workspace(root, invocation.environment), invocation)


def cache_file(root: Path, kind: str = "") -> Path | None:
    """Where the command line keeps the cache ``kind`` of the workspace at ``root`` now."""
    return cache_path(invocation_now().caching, root, kind)


def sandbox_support() -> SandboxSupport:
    """The sandbox the command line could start here now."""
    return SandboxHost.of(invocation_now(), StatCache(None)).support()
