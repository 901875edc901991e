"""The sandbox (issue 16): the PR's code, run by `gates run` and `gates probe consumed`,
reaches neither the signing key, nor the auditor's state, nor the other side's evidence.
Real bubblewrap (and the `unshare` fallback), real git repositories, through the CLI."""

from __future__ import annotations

import json
import py_compile
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gates.core.hashing import BLOB_TABLE, INDEX_KIND
from tests.helpers import (
    CPU_PROFILE,
    RUN_ENV,
    SOURCE_FILES,
    TrustSetup,
    Workspace,
    cache_file,
    declare_entrypoints,
    make_repo,
    profile_args,
    run_gates,
    signed_run,
)

#: A child that looks for everything it must not reach and reports what it found.
SPY = """import json, os, sys
from pathlib import Path

found = {"gates_env": sorted(n for n in os.environ if n.startswith("GATES_"))}
for name, path in zip(sys.argv[1::2], sys.argv[2::2]):
    try:
        found[name] = Path(path).read_bytes()[:40].decode("latin-1")
    except OSError as exc:
        found[name] = f"unreadable: {type(exc).__name__}"
for pid in ("1", str(os.getppid())):
    try:
        found[f"environ-{pid}"] = "GATES_SIGNING_KEY" in Path(f"/proc/{pid}/environ").read_text()
    except OSError as exc:
        found[f"environ-{pid}"] = f"unreadable: {type(exc).__name__}"
(Path(os.environ["GATES_RUN_DIR"]) / "spy.json").write_text(json.dumps(found))
"""

#: A child that tries to write each file it is given and reports which writes went through.
VANDAL = """import json, os, sys
from pathlib import Path

done = {}
for path in sys.argv[1:]:
    try:
        with open(path, "a") as handle:
            handle.write("forged")
        done[path] = "written"
    except OSError as exc:
        done[path] = type(exc).__name__
(Path(os.environ["GATES_RUN_DIR"]) / "vandal.json").write_text(json.dumps(done))
"""


def _attacker_ws(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, str]
) -> Workspace:
    """A pinned workspace whose committed source already holds the attacker's files."""
    root = tmp_path / "ws"
    repo = make_repo(root, {**SOURCE_FILES, **files})
    assert run_gates(capsys, "-C", str(root), "init", "--pin", "HEAD").code == 0
    declare_entrypoints(root)
    return Workspace(root, repo, repo.head.commit.hexsha)


def _run(ws: Workspace, capsys: pytest.CaptureFixture[str], *args: str, expect: int = 0) -> str:
    # --force: these runs are the attacker's programs, not the declared entrypoint; the
    # pre-flight would refuse them (tests/test_preflight.py), the sandbox is what is tested
    result = ws.gates(
        capsys, "run", "--framework", "paddle", "--force", *profile_args(CPU_PROFILE), *args
    )
    assert result.code == expect, result.err
    return result.out + result.err


def _attestation(ws: Workspace, folder: str = "results/paddle") -> dict[str, object]:
    """The run attestation's provenance (its `run` record holds the isolation)."""
    receipt = json.loads((ws.root / folder / "run.receipt.json").read_text())
    provenance: dict[str, object] = receipt["provenance"]
    return provenance


def test_a_child_reads_no_key_no_trust_file_no_cache_and_no_parent_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], signing: TrustSetup
) -> None:
    ws = _attacker_ws(tmp_path, capsys, {"trainer/spy.py": SPY})
    signed_run(ws.root, capsys, "torch", [3.0, 2.0])
    ws.gates(capsys, "audit")  # the cache folder exists and holds the audit index
    cache = cache_file(ws.root)
    assert cache is not None and cache.parent.is_dir()
    index = cache_file(ws.root, INDEX_KIND)
    assert index is not None and index.is_file()
    targets = {
        "key": str(signing.key),
        "trust": str(signing.trust),
        "index": str(index),
        "git-config": str(ws.root / ".git" / "config"),
        "home-gitconfig": str(Path.home() / ".gitconfig"),
    }
    program = (sys.executable, "trainer/spy.py", *[x for kv in targets.items() for x in kv])
    signed_run(ws.root, capsys, "paddle", [], program=program)
    found = json.loads((ws.root / "results/paddle/spy.json").read_text())
    assert found["gates_env"] == [
        "GATES_FRAMEWORK",
        "GATES_GIT_HEAD",
        "GATES_RUN_DIR",
        "GATES_RUN_ID",
        "GATES_STATE_EVERY",
    ]
    for name in targets:
        assert str(found[name]).startswith("unreadable"), (name, found[name])
    assert all(v is not True for k, v in found.items() if k.startswith("environ-"))
    isolation = _attestation(ws)["run"]["isolation"]  # type: ignore[index]
    assert isolation["mechanism"] == "bwrap"
    assert isolation["commit"] == ws.pin and len(isolation["tree"]) == 40
    assert isolation["network"] is False
    assert "GATES_SIGNING_KEY" not in isolation["environment"]


@pytest.mark.slow
def test_a_child_writes_neither_audit_index_stat_cache_git_index_refs_nor_trust_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], signing: TrustSetup
) -> None:
    ws = _attacker_ws(tmp_path, capsys, {"trainer/vandal.py": VANDAL})
    signed_run(ws.root, capsys, "torch", [3.0, 2.0])
    ws.gates(capsys, "audit")
    # gates itself may rewrite its caches and git's index during the run (the freeze's blob
    # cache fills once files are older than git's racy window): those must only hold no
    # bytes of the child's; the rest must not change at all
    caches = [
        cache_file(ws.root, INDEX_KIND),
        cache_file(ws.root),
        cache_file(ws.root, BLOB_TABLE),  # the freeze's blob cache
        ws.root / ".git" / "index",
    ]
    fixed = [
        ws.root / ".git" / "refs" / "heads" / "main",
        ws.root / ".git" / "HEAD",
        signing.trust,
        ws.root / "gates.toml",
        ws.root / "trainer" / "train.py",
    ]
    paths = [Path(str(t)) for t in (*caches, *fixed)]
    before = {p: p.read_bytes() if p.exists() else None for p in paths}
    signed_run(
        ws.root,
        capsys,
        "paddle",
        [],
        program=(sys.executable, "trainer/vandal.py", *map(str, paths)),
    )
    done = json.loads((ws.root / "results/paddle/vandal.json").read_text())
    assert "written" not in done.values(), done
    assert set(done) == set(map(str, paths)), "the child tried every file"
    for path in paths[: len(caches)]:
        assert not path.exists() or not path.read_bytes().endswith(b"forged"), path
    for path in paths[len(caches) :]:
        assert (path.read_bytes() if path.exists() else None) == before[path], path


def test_files_already_in_the_run_folder_are_refused_or_cleared_never_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The "resume guard" route: forged outputs committed in the run folder (and a forged
    rank-0 folder), and an entrypoint that exits early when loss.json is there."""
    guard = (
        "import os, sys\nfrom pathlib import Path\n"
        "if (Path(os.environ['GATES_RUN_DIR']) / 'loss.json').exists():\n    sys.exit(0)\n"
    )
    forged = json.dumps({"losses": [1.0, 0.5]})
    ws = _attacker_ws(
        tmp_path,
        capsys,
        {
            "trainer/train.py": guard + SOURCE_FILES["trainer/train.py"],
            "results/paddle/loss.json": forged,
            "results/paddle/rank-0/loss.json": forged,
        },
    )
    command = [
        "--",
        sys.executable,
        "trainer/train.py",
        "paddle",
        "[2.0, 1.5]",
        f"env={json.dumps(RUN_ENV)}",
    ]
    refused = _run(ws, capsys, *command, expect=2)
    assert "run folder results/paddle is not empty (results/paddle/loss.json" in refused
    assert "--clean" in refused
    assert not (ws.root / "results/paddle/run.receipt.json").exists()
    _run(ws, capsys, "--clean", *command)
    assert json.loads((ws.root / "results/paddle/loss.json").read_text()) == {"losses": [2.0, 1.5]}
    assert not (ws.root / "results/paddle/rank-0").exists()
    audit = json.loads(ws.gates(capsys, "audit", "--format", "json").out)
    stamped = {r["path"]: r["status"] for r in audit["receipts"]}
    assert stamped["results/paddle/loss.receipt.json"] == "formal"
    assert not any(path.startswith("results/paddle/rank-0") for path in stamped)


def test_the_candidate_cannot_read_the_reference_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copier = (
        "import os, sys\nfrom pathlib import Path\n"
        "target = Path(os.environ['GATES_RUN_DIR']) / 'copied.txt'\n"
        "try:\n    target.write_text(Path(sys.argv[1]).read_text())\n"
        "except OSError as exc:\n    target.write_text(type(exc).__name__)\n"
    )
    ws = _attacker_ws(tmp_path, capsys, {"trainer/copy.py": copier})
    signed_run(ws.root, capsys, "torch", [3.0, 2.0])
    torch_loss = ws.root / "results/torch/loss.json"
    assert torch_loss.is_file()
    signed_run(
        ws.root, capsys, "paddle", [], program=(sys.executable, "trainer/copy.py", str(torch_loss))
    )
    assert (ws.root / "results/paddle/copied.txt").read_text() == "FileNotFoundError"


def test_an_ignored_stale_pyc_does_not_change_what_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = (
        "import os, sys\nfrom pathlib import Path\nsys.path.insert(0, os.path.dirname(__file__))\n"
        "import helper\n"
        "(Path(os.environ['GATES_RUN_DIR']) / 'value.txt').write_text(str(helper.VALUE))\n"
    )
    ws = _attacker_ws(
        tmp_path, capsys, {"trainer/entry.py": entry, "trainer/helper.py": "VALUE = 1\n"}
    )
    forged = tmp_path / "forged" / "helper.py"
    forged.parent.mkdir()
    forged.write_text("VALUE = 666\n")
    cache = ws.root / "trainer" / "__pycache__"
    cache.mkdir()
    tag = sys.implementation.cache_tag
    py_compile.compile(
        str(forged),
        cfile=str(cache / f"helper.{tag}.pyc"),
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    outside = "import sys; sys.path.insert(0, 'trainer'); import helper; print(helper.VALUE)"
    done = subprocess.run(  # outside the sandbox, the stale .pyc wins: the route is real
        [sys.executable, "-c", outside],
        cwd=ws.root, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == "666"
    signed_run(ws.root, capsys, "paddle", [], program=(sys.executable, "trainer/entry.py"))
    assert (ws.root / "results/paddle/value.txt").read_text() == "1"


def test_a_probe_entry_that_reads_the_key_gets_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], signing: TrustSetup
) -> None:
    entry = (
        "import os\nimport numpy as np\n\n"
        "def build():\n"
        f"    try:\n        key = bool(open({str(signing.key)!r}).read())\n"
        "    except OSError:\n        key = False\n"
        "    env = 'GATES_SIGNING_KEY' in os.environ\n"
        "    w = np.ones(2, dtype=np.float32)\n"
        "    return (lambda: w * 2), {f'key_{key}_env_{env}': w}\n"
    )
    ws = _attacker_ws(tmp_path, capsys, {"probes/entry.py": entry})
    result = ws.gates(capsys, "probe", "consumed", "probes/entry.py:build", "--format", "json")
    assert result.code == 0, result.err
    names = [t["name"] for t in json.loads(result.out)["tensors"]]
    assert names == ["key_False_env_False"]


def test_a_sandbox_that_cannot_start_is_named_and_nothing_is_signed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = _attacker_ws(tmp_path, capsys, {})
    bare = tmp_path / "bin"  # a host without bubblewrap and util-linux: git only
    bare.mkdir()
    (bare / "git").symlink_to("/usr/bin/git")
    monkeypatch.setenv("PATH", str(bare))
    command = [
        "--",
        sys.executable,
        "trainer/train.py",
        "paddle",
        "[1.0]",
        f"env={json.dumps(RUN_ENV)}",
    ]
    said = _run(ws, capsys, *command, expect=2)
    assert "cannot start a sandbox, nothing was run or signed" in said
    assert "install bubblewrap" in said
    assert "Traceback" not in said
    assert not (ws.root / "results/paddle").exists() or not any(
        (ws.root / "results/paddle").iterdir()
    )
    result = ws.gates(capsys, "probe", "consumed", "trainer/train.py:main")
    assert result.code != 0 and "no sandbox can start" in result.err


def _gates_process(ws: Workspace, *command: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gates", "-C", str(ws.root), "run", "--framework", "paddle",
         "--force", *profile_args(CPU_PROFILE), "--", *command],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode("latin-1"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _gone(marker: str) -> bool:
    deadline = time.monotonic() + 10
    while _processes_with(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.slow
def test_a_run_killed_midway_signs_nothing_and_leaves_no_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _attacker_ws(tmp_path, capsys, {})
    marker = "317.25"
    child = f"import time; print('up', flush=True); time.sleep({marker})"
    process = _gates_process(ws, sys.executable, "-c", child)
    assert process.stdout is not None
    assert process.stdout.readline() == "up\n", process.communicate()
    assert _processes_with(marker)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    assert _gone(marker), "the sandboxed child outlived gates"
    folder = ws.root / "results/paddle"
    assert not folder.exists() or not list(folder.rglob("*.receipt.json"))


def test_a_daemon_forked_by_the_run_dies_with_the_sandbox(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _attacker_ws(tmp_path, capsys, {})
    marker = "291.75"
    child = (
        "import subprocess\n"
        f"subprocess.Popen(['sleep', '{marker}'], start_new_session=True,"
        " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    )
    signed_run(ws.root, capsys, "paddle", [], program=(sys.executable, "-c", child))
    assert _gone(marker), "a daemon forked by the run outlived the sandbox"


@pytest.mark.slow
def test_the_unshare_fallback_isolates_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], signing: TrustSetup,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("GATES_SANDBOX", "unshare")
    ws = _attacker_ws(tmp_path, capsys, {"trainer/spy.py": SPY, "trainer/vandal.py": VANDAL})
    program = (
        sys.executable,
        "trainer/spy.py",
        "key",
        str(signing.key),
        "trust",
        str(signing.trust),
    )
    signed_run(ws.root, capsys, "paddle", [], program=program)
    found = json.loads((ws.root / "results/paddle/spy.json").read_text())
    assert str(found["key"]).startswith("unreadable") and str(found["trust"]).startswith(
        "unreadable"
    )
    assert "GATES_SIGNING_KEY" not in found["gates_env"]
    assert all(v is not True for k, v in found.items() if k.startswith("environ-"))
    assert _attestation(ws)["run"]["isolation"]["mechanism"] == "unshare"  # type: ignore[index]
    index = ws.root / ".git" / "index"
    before = index.read_bytes()
    signed_run(
        ws.root,
        capsys,
        "paddle",
        [],
        out="results/vandal",
        program=(sys.executable, "trainer/vandal.py", str(index), "/usr/lib/os-release"),
    )
    done = json.loads((ws.root / "results/vandal/vandal.json").read_text())
    assert index.read_bytes() == before
    assert "written" not in done.values(), done


def test_outputs_that_are_links_are_refused_and_nothing_is_signed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _attacker_ws(tmp_path, capsys, {})
    child = "import os; os.symlink('/etc/passwd', os.environ['GATES_RUN_DIR'] + '/loss.json')"
    said = _run(ws, capsys, "--", sys.executable, "-c", child, expect=2)
    assert "the run left results/paddle/loss.json, a symbolic link" in said
    assert not list((ws.root / "results/paddle").glob("*.receipt.json"))


def test_a_run_without_the_sandbox_is_signed_as_such_and_counts_probe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _attacker_ws(tmp_path, capsys, {})
    env = json.dumps({"framework_version": "3.2.0"})
    _run(
        ws,
        capsys,
        "--no-sandbox",
        "--",
        sys.executable,
        "trainer/train.py",
        "paddle",
        "[1.0]",
        f"env={env}",
    )
    isolation = _attestation(ws)["run"]["isolation"]  # type: ignore[index]
    assert isolation["mechanism"] == "none"
    audit = json.loads(ws.gates(capsys, "audit", "--format", "json").out)
    run = next(r for r in audit["receipts"] if r["path"] == "results/paddle/run.receipt.json")
    assert run["status"] == "probe"
    assert "run not isolated" in str(run["reason"])


@pytest.mark.slow
@pytest.mark.heavy
def test_paddle_s_launcher_runs_two_ranks_in_the_sandbox_on_loopback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m paddle.distributed.launch` inside the sandbox (network off: a private
    loopback only); every rank writes into the run folder as seen inside."""
    rank = (
        "import os\nfrom pathlib import Path\n"
        "import paddle.distributed as dist\n"
        "dist.init_parallel_env()\n"
        "folder = Path(os.environ['GATES_RUN_DIR']) / f'rank-{dist.get_rank()}'\n"
        "folder.mkdir(parents=True, exist_ok=True)\n"
        "(folder / 'hello.txt').write_text(str(dist.get_world_size()))\n"
    )
    ws = _attacker_ws(tmp_path, capsys, {"trainer/ranks.py": rank})
    launcher = (sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2")
    log_dir = ("--log_dir", "/tmp/launch-logs")  # the sandbox's own /tmp
    signed_run(ws.root, capsys, "paddle", [], program=(*launcher, *log_dir, "trainer/ranks.py"))
    for index in (0, 1):
        assert (ws.root / f"results/paddle/rank-{index}/hello.txt").read_text() == "2"


def test_a_config_class_that_reads_the_key_gets_nothing(
    ws: Workspace, capsys: pytest.CaptureFixture[str], signing: TrustSetup
) -> None:
    from tests.configsem_fixture import (  # noqa: PLC0415
        CLASS,
        FIXED,
        OFFICIAL_REL,
        candidate_files,
        set_files,
    )

    thief = (
        "import os\n"
        f"_stolen = [n for n in os.environ if n.startswith('GATES_')]\n"
        f"try:\n    _stolen.append(open({str(signing.key)!r}).read()[:8])\n"
        "except OSError:\n    pass\n"
        "if _stolen:\n    raise RuntimeError(f'stole {_stolen}')\n"
    )
    set_files(ws.root, ws.repo, candidate_files(thief + FIXED))
    result = ws.gates(
        capsys, "check", "config", OFFICIAL_REL, "--class", CLASS, "--path", "src",
        "--format", "json",
    )  # fmt: skip
    assert result.code in (0, 1), result.err
    report = json.loads(result.out)
    loads = next(c for c in report["criteria"] if c["name"] == "candidate_loads")
    assert loads["met"] is True, loads["detail"]
    assert "stole" not in result.out


def test_the_policy_s_environment_names_and_inputs_enter_and_gates_variables_never(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.bin").write_bytes(b"\x00\x01tokens")
    reader = (
        "import json, os, sys\nfrom pathlib import Path\n"
        "seen = {n: os.environ.get(n) for n in ('MY_SETTING', 'GATES_TRUST', 'OTHER')}\n"
        "seen['data'] = Path(sys.argv[1]).read_bytes().hex()\n"
        "try:\n    Path(sys.argv[1]).write_bytes(b'changed')\n    seen['wrote'] = True\n"
        "except OSError:\n    seen['wrote'] = False\n"
        "(Path(os.environ['GATES_RUN_DIR']) / 'seen.json').write_text(json.dumps(seen))\n"
    )
    ws = _attacker_ws(tmp_path, capsys, {"trainer/reader.py": reader})
    config = ws.root / "gates.toml"
    config.write_text(
        config.read_text()
        + f'\n[sandbox]\nenv = ["MY_SETTING", "GATES_TRUST"]\ninputs = ["{data}"]\n'
    )
    monkeypatch.setenv("MY_SETTING", "on")
    monkeypatch.setenv("OTHER", "secret")
    target = str(data / "train.bin")
    signed_run(ws.root, capsys, "paddle", [], program=(sys.executable, "trainer/reader.py", target))
    seen = json.loads((ws.root / "results/paddle/seen.json").read_text())
    assert seen == {
        "MY_SETTING": "on",
        "GATES_TRUST": None,
        "OTHER": None,
        "data": b"\x00\x01tokens".hex(),
        "wrote": False,
    }
    isolation = _attestation(ws)["run"]["isolation"]  # type: ignore[index]
    digest = __import__("hashlib").sha256(b"\x00\x01tokens").hexdigest()
    assert isolation["inputs"] == {f"{data}/train.bin": f"sha256:{digest}"}
    assert "MY_SETTING" in isolation["environment"]
    assert "GATES_TRUST" not in isolation["environment"]


def test_an_input_inside_an_evidence_location_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _attacker_ws(tmp_path, capsys, {})
    signed_run(ws.root, capsys, "torch", [3.0, 2.0])
    config = ws.root / "gates.toml"
    config.write_text(config.read_text() + '\n[sandbox]\ninputs = ["results/torch"]\n')
    said = _run(ws, capsys, "--", sys.executable, "-c", "pass", expect=2)
    assert "sandbox input results/torch lies in an evidence location" in said


def test_the_network_is_a_private_loopback_unless_the_policy_opens_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lister = (
        "import json, os, socket\nfrom pathlib import Path\n"
        "names = sorted(name for _, name in socket.if_nameindex())\n"
        "(Path(os.environ['GATES_RUN_DIR']) / 'net.json').write_text(json.dumps(names))\n"
    )
    ws = _attacker_ws(tmp_path, capsys, {"trainer/net.py": lister})
    signed_run(ws.root, capsys, "paddle", [], program=(sys.executable, "trainer/net.py"))
    assert json.loads((ws.root / "results/paddle/net.json").read_text()) == ["lo"]
    host = sorted(name for _, name in __import__("socket").if_nameindex())
    config = ws.root / "gates.toml"
    config.write_text(config.read_text() + "\n[sandbox]\nnetwork = true\n")
    signed_run(ws.root, capsys, "paddle", [], program=(sys.executable, "trainer/net.py"))
    assert json.loads((ws.root / "results/paddle/net.json").read_text()) == host
    assert _attestation(ws)["run"]["isolation"]["network"] is True  # type: ignore[index]


def test_a_committed_symlink_cannot_choose_what_a_declared_input_binds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ws = _attacker_ws(tmp_path, capsys, {})
    (ws.root / "data").symlink_to(elsewhere)
    ws.repo.git.add("data")
    ws.repo.git.commit("-q", "-m", "data")
    ws.gates(capsys, "freeze", "pin", "HEAD")
    config = ws.root / "gates.toml"
    config.write_text(config.read_text() + '\n[sandbox]\ninputs = ["data"]\n')
    # the freeze already refuses a committed link out of the repository; a probe run gets past
    # that refusal and meets the sandbox's own
    said = _run(ws, capsys, "--probe", "--", sys.executable, "-c", "pass", expect=2)
    assert "sandbox input data leaves the workspace through a symbolic link" in said


def test_an_export_ignore_attribute_cannot_drop_a_file_from_what_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _attacker_ws(
        tmp_path,
        capsys,
        {".gitattributes": "paddleformers/glm/config.py export-ignore\n"},
    )
    said = _run(ws, capsys, "--", sys.executable, "-c", "pass", expect=2)
    assert "paddleformers/glm/config.py is in the commit but not in its archive" in said
    assert "export-ignore" in said


def test_an_uncommitted_probe_entry_is_named_not_run(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    (ws.root / "probes").mkdir()
    (ws.root / "probes/entry.py").write_text("def build():\n    raise SystemExit('ran')\n")
    result = ws.gates(capsys, "probe", "consumed", "probes/entry.py:build")
    assert result.code == 2
    assert "probes/entry.py: not in the commit under audit (HEAD)" in result.err


#: A child that tries what a process with capabilities could do to the host.
ESCAPE = """import json, os, subprocess
from pathlib import Path

seen = {"caps": [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0]}
for path in ("/proc/sys/kernel/core_pattern", "/usr/lib/gates-sandbox-probe"):
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
        seen[path] = "writable"
    except OSError as exc:
        seen[path] = exc.strerror
done = subprocess.run(["mount", "-o", "remount,rw,bind", "/usr"], capture_output=True)
seen["remount"] = done.returncode
(Path(os.environ["GATES_RUN_DIR"]) / "escape.json").write_text(json.dumps(seen))
"""


@pytest.mark.parametrize("backend", ["bwrap", "unshare"])
def test_the_child_has_no_capabilities_and_cannot_remount_or_write_sysctls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:  # fmt: skip
    monkeypatch.setenv("GATES_SANDBOX", backend)
    ws = _attacker_ws(tmp_path, capsys, {"trainer/escape.py": ESCAPE})
    signed_run(ws.root, capsys, "paddle", [], program=(sys.executable, "trainer/escape.py"))
    seen = json.loads((ws.root / "results/paddle/escape.json").read_text())
    assert int(seen["caps"], 16) == 0
    assert seen["/proc/sys/kernel/core_pattern"] == "Read-only file system"
    assert seen["/usr/lib/gates-sandbox-probe"] == "Read-only file system"
    assert seen["remount"] != 0
    assert not Path("/usr/lib/gates-sandbox-probe").exists()


def test_a_declared_output_outside_the_run_folder_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _attacker_ws(tmp_path, capsys, {})
    said = _run(
        ws, capsys, "--output", "checkpoint=outputs/ckpt", "--", sys.executable, "-c", "pass",
        expect=2,
    )  # fmt: skip
    assert "declared output outputs/ckpt is outside the run folder results/paddle" in said
    assert not (ws.root / "results/paddle/run.receipt.json").exists()
