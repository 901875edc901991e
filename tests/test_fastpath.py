"""The warm `gates audit` (gates/fastpath.py): the stored report, byte for byte, only while
nothing the audit reads has changed; any change falls back to the full path.

Real subprocesses through the real entry point (`gates.fastpath.main`, what the `gates`
script and `python -m gates` run); whether an answer came from the stored report is
seen from outside: the full path imports click, the warm one does not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import git
import pytest

from tests.helpers import REPO_ROOT, Workspace, commit_all, make_trust, run_gates, write

#: Every test here runs gates in subprocesses and waits out the racy window.
pytestmark = pytest.mark.slow

PROBE = """
import sys, time
sys.path.insert(0, {source!r})
if {days}:  # the warm path's clock, moved on (the full path's own date is not needed here)
    real_gmtime = time.gmtime
    time.gmtime = lambda *when: real_gmtime((when[0] if when else time.time()) + {days} * 86400)
sys.argv = ["gates", *{args!r}]
from gates.entry import main
try:
    main()
    code = 0
except SystemExit as done:
    code = done.code
sys.stdout.flush()
print("PATH=" + ("full" if "click" in sys.modules else "warm"), file=sys.stderr)
sys.exit(code)
"""

RACY_WAIT_S = 2.1  # files newer than the racy window (2 s) are never stored


@dataclass
class Answer:
    code: int
    out: bytes
    path: str


def audit(
    root: Path,
    *args: str,
    source: Path = REPO_ROOT,
    days: int = 0,
    env: dict[str, str] | None = None,
) -> Answer:
    """`gates -C ROOT audit ARGS` in a real subprocess: exit code, stdout bytes, which path."""
    code = PROBE.format(source=str(source), days=days, args=["-C", str(root), "audit", *args])
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        env={**os.environ, **(env or {})},
        check=False,
        cwd=root.parent,
    )
    err = done.stderr.decode()
    path = err.rsplit("PATH=", 1)[-1].strip()
    assert path in ("full", "warm"), err
    return Answer(done.returncode, done.stdout, path)


def stored(root: Path, *args: str, **kwargs: object) -> Answer:
    """Age the tree past the racy window, run the full path (which stores), then the warm.

    A first audit after a change may not store: git refreshes the index's stat data during
    it (the index changed under the audit), so the second one stores."""
    time.sleep(RACY_WAIT_S)
    full = audit(root, *args, **kwargs)  # type: ignore[arg-type]
    warm = audit(root, *args, **kwargs)  # type: ignore[arg-type]
    if warm.path == "full":
        assert (warm.code, warm.out) == (full.code, full.out)
        warm = audit(root, *args, **kwargs)  # type: ignore[arg-type]
    assert warm.path == "warm", "the report of an unchanged state was not stored"
    assert (warm.code, warm.out) == (full.code, full.out)
    return warm


def add_receipt(ws: Workspace, capsys: pytest.CaptureFixture[str], name: str) -> None:
    write(ws.root, f"results/{name}.json", json.dumps({"losses": [1.0, 0.5]}))
    subject = f"results/{name}.json"
    result = ws.gates(
        capsys, "receipt", "create", "--kind", "loss", "--subject", subject, "--framework", "paddle"
    )
    assert result.code == 0, result.err


@pytest.fixture
def receipted(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> Workspace:
    add_receipt(ws, capsys, "loss")
    add_receipt(ws, capsys, "loss2")
    return ws


@pytest.mark.parametrize("output_format", ["text", "json", "junit"])
def test_the_warm_answer_is_the_full_report_byte_for_byte(
    receipted: Workspace, capsys: pytest.CaptureFixture[str], output_format: str
) -> None:
    warm = stored(receipted.root, "--format", output_format)
    in_process = receipted.gates(capsys, "audit", "--format", output_format)
    assert warm.out.decode() == in_process.out
    assert warm.code == in_process.code == 1  # blocked: the loss receipts are probes


def test_the_example_answers_warm_byte_for_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "glm52-port"
    shutil.copytree(REPO_ROOT / "examples" / "glm52-minimal", root)
    repo = git.Repo.init(root, initial_branch="main")
    commit_all(repo, "example")
    assert run_gates(capsys, "-C", str(root), "freeze", "pin", "HEAD").code == 0
    commit_all(repo, "pin")
    for output_format in ("text", "json"):
        warm = stored(root, "--format", output_format)
        full = run_gates(capsys, "-C", str(root), "audit", "--format", output_format)
        assert warm.out.decode() == full.out
        assert warm.code == full.code


def _edit_receipt(ws: Workspace) -> None:
    path = ws.root / "results" / "loss.receipt.json"
    path.write_text(path.read_text().replace('"paddle"', '"torch"', 1))


def _touch_subject(ws: Workspace) -> None:
    os.utime(ws.root / "results" / "loss.json")


def _rewrite_subject_in_place(ws: Workspace) -> None:
    """Same size, mtime put back with `os.utime`: only the ctime (which no call sets) moves."""
    path = ws.root / "results" / "loss.json"
    before = path.stat()
    data = path.read_bytes()
    assert b"0.5" in data
    path.write_bytes(data.replace(b"0.5", b"0.7"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def _edit_contract(ws: Workspace) -> None:
    contract = sorted((ws.root / "contracts").glob("*.toml"))[0]
    contract.write_text(contract.read_text() + "\n# edited\n")


def _edit_source(ws: Workspace) -> None:
    write(ws.root, "paddleformers/glm/modeling.py", "def forward(x):\n    return x + 1\n")


def _new_untracked_file(ws: Workspace) -> None:
    write(ws.root, "paddleformers/glm/extra.py", "X = 1\n")


def _new_receipt(ws: Workspace) -> None:
    source = ws.root / "results" / "loss.receipt.json"
    shutil.copy(source, ws.root / "results" / "copy.receipt.json")


def _stage_a_file(ws: Workspace) -> None:
    ws.repo.git.add("results/loss.json", force=True)


def _move_head(ws: Workspace) -> None:
    commit_all(ws.repo, "an empty commit")


def _edit_gates_toml(ws: Workspace) -> None:
    path = ws.root / "gates.toml"
    path.write_text(path.read_text() + "\n")


CHANGES: dict[str, Callable[[Workspace], None]] = {
    "a receipt edited": _edit_receipt,
    "a subject touched": _touch_subject,
    "a subject rewritten in place, its size and mtime kept": _rewrite_subject_in_place,
    "a contract edited": _edit_contract,
    "a source file edited": _edit_source,
    "an untracked file added": _new_untracked_file,
    "a receipt added": _new_receipt,
    "the index changed": _stage_a_file,
    "HEAD moved": _move_head,
    "gates.toml edited": _edit_gates_toml,
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_changed_workspace_falls_back_to_the_full_path(
    receipted: Workspace, capsys: pytest.CaptureFixture[str], change: str
) -> None:
    stored(receipted.root, "--format", "json")
    CHANGES[change](receipted)
    after = audit(receipted.root, "--format", "json")
    assert after.path == "full"
    full = receipted.gates(capsys, "audit", "--format", "json")
    assert after.out.decode() == full.out


def test_the_policy_ref_moved_or_another_named_falls_back(receipted: Workspace) -> None:
    repo = receipted.repo
    commit_all(repo, "the policy in force")
    repo.git.branch("policy")
    policy = {"GATES_POLICY_REF": "refs/heads/policy"}
    stored(receipted.root, "--format", "json", env=policy)
    # another policy ref named: the stored answer was for refs/heads/policy
    assert audit(receipted.root, "--format", "json", env={"GATES_POLICY_REF": "main"}).path == (
        "full"
    )
    # the same name, moved to a new commit (HEAD stays where it is)
    moved = repo.git.commit_tree("HEAD^{tree}", "-p", "HEAD", "-m", "policy change")
    repo.git.update_ref("refs/heads/policy", moved)
    assert audit(receipted.root, "--format", "json", env=policy).path == "full"


def test_the_trust_file_or_a_key_it_names_changed_falls_back(
    receipted: Workspace, tmp_path: Path
) -> None:
    trust = make_trust(tmp_path / "own-trust")
    env = {"GATES_TRUST": str(trust.trust)}
    stored(receipted.root, "--format", "json", env=env)
    trust.trust.write_text(trust.trust.read_text() + "# reviewed\n")
    assert audit(receipted.root, "--format", "json", env=env).path == "full"
    stored(receipted.root, "--format", "json", env=env)
    public = trust.trust.parent / "ci.pub"
    public.write_text(public.read_text())
    assert audit(receipted.root, "--format", "json", env=env).path == "full"
    # --trust names another file: another answer
    other = make_trust(tmp_path / "other-trust")
    assert audit(
        receipted.root, "--format", "json", env={"GATES_TRUST": str(other.trust)}
    ).path == ("full")


def test_tomorrow_falls_back(receipted: Workspace) -> None:
    stored(receipted.root)
    assert audit(receipted.root, days=1).path == "full"


def test_an_edit_to_gates_own_source_falls_back(receipted: Workspace, tmp_path: Path) -> None:
    source = tmp_path / "installed"
    for folder in ("gates", "receipts", "contracts"):  # a checkout: gates/resources.py
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(REPO_ROOT / folder, source / folder, ignore=ignore)
    stored(receipted.root, source=source)
    engine = source / "gates" / "engine" / "audit.py"
    engine.write_text(engine.read_text() + "\n# patched\n")
    assert audit(receipted.root, source=source).path == "full"
    stored(receipted.root, source=source)
    schema = source / "receipts" / "schemas" / "receipt.schema.json"
    schema.write_bytes(schema.read_bytes() + b"\n")
    assert audit(receipted.root, source=source).path == "full"


def test_an_environment_variable_the_audit_reads_falls_back(receipted: Workspace) -> None:
    stored(receipted.root)
    assert audit(receipted.root, env={"GIT_INDEX_FILE": "/nonexistent/index"}).path == "full"
    assert audit(receipted.root, env={"GATES_SANDBOX": "none"}).path == "full"


def test_a_damaged_or_forged_store_is_never_trusted(receipted: Workspace) -> None:
    warm = stored(receipted.root, "--format", "json")
    cache = Path(os.environ["HOME"]) / ".cache" / "gates"
    (entry,) = cache.glob("*.report.*")
    version, skip, fingerprint, code, body = entry.read_bytes().split(b"\n", 4)
    entry.write_bytes(b"\n".join((version, skip, b"0" * 64, b"0", b'{"verdict": "pass"}\n')))
    forged = audit(receipted.root, "--format", "json")
    assert forged.path == "full"
    assert forged.out == warm.out
    entry.write_bytes(b"garbage")
    assert audit(receipted.root, "--format", "json").out == warm.out
    del fingerprint, code, body


def test_what_is_never_answered_warm(receipted: Workspace, tmp_path: Path) -> None:
    stored(receipted.root, "--format", "json")
    assert audit(receipted.root, "--format", "json", "--verify-all").path == "full"
    assert audit(receipted.root, "--format", "github").path == "full"
    assert audit(receipted.root, "--format", "json", env={"GATES_CACHE_DIR": "off"}).path == "full"
    # a symlinked folder in the tree: its contents are outside what the walk keys
    outside = tmp_path / "outside"
    outside.mkdir()
    (receipted.root / "linked").symlink_to(outside)
    time.sleep(RACY_WAIT_S)
    assert audit(receipted.root, "--format", "json").path == "full"
    assert audit(receipted.root, "--format", "json").path == "full"


@pytest.mark.slow  # no measurement in it: it shares the cores with the other slow tests
def test_ten_thousand_receipts_answer_warm_byte_for_byte(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO_ROOT / "bench"))
    try:
        import bench_audit  # noqa: PLC0415  (the bench's own generator)
    finally:
        sys.path.remove(str(REPO_ROOT / "bench"))
    root = tmp_path / "ws"
    bench_audit.build_repository(root, 500)
    bench_audit.build_receipts(root, 10_000)
    for output_format in ("text", "json"):
        full = audit(root, "--format", output_format, env={"GATES_CACHE_DIR": "off"})
        warm = stored(root, "--format", output_format)
        assert (warm.code, warm.out) == (full.code, full.out)
    os.utime(root / "results" / "run09" / "step09999.json")
    assert audit(root, "--format", "json").path == "full"


FREEZE_PROBE = """
import runpy, sys
sys.argv = [{script!r}, *{args!r}]
try:
    runpy.run_path({script!r}, run_name="__main__")
    code = 0
except SystemExit as done:
    code = done.code
sys.stdout.flush()
print("PATH=" + ("full" if "gates.freeze.check" in sys.modules else "warm"), file=sys.stderr)
sys.exit(code)
"""


def freeze(root: Path, *args: str, env: dict[str, str] | None = None) -> Answer:
    """`audit_source_freeze.py -C ROOT ARGS` in a real subprocess."""
    script = str(REPO_ROOT / "audit_source_freeze.py")
    code = FREEZE_PROBE.format(script=script, args=["-C", str(root), *args])
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        check=False,
        cwd=root.parent,
        env={**os.environ, **(env or {})},
    )
    err = done.stderr.decode()
    path = err.rsplit("PATH=", 1)[-1].strip()
    assert path in ("full", "warm"), err
    return Answer(done.returncode, done.stdout, path)


def test_the_freeze_script_answers_warm_until_the_tree_changes(ws: Workspace) -> None:
    for args in ((), ("--json",)):
        time.sleep(RACY_WAIT_S)
        full = freeze(ws.root, *args)
        warm = freeze(ws.root, *args)
        assert full.path == "full"
        assert warm.path == "warm"
        assert (warm.code, warm.out) == (full.code, full.out) == (0, full.out)
    _edit_source(ws)
    edited = freeze(ws.root)
    assert edited.path == "full"
    assert edited.code == 1
    assert b"verdict=blocked" in edited.out


def test_the_freeze_script_at_pre_push_is_never_answered_warm(ws: Workspace) -> None:
    time.sleep(RACY_WAIT_S)
    freeze(ws.root)
    assert freeze(ws.root).path == "warm"
    os.environ["PRE_COMMIT_TO_REF"] = "HEAD"
    try:
        assert freeze(ws.root).path == "full"
    finally:
        del os.environ["PRE_COMMIT_TO_REF"]


def test_the_freeze_answer_does_not_key_on_the_evidence_it_never_reads(ws: Workspace) -> None:
    """The freeze check reads nothing under the governance folders: a new result there keeps
    the stored answer (the same bytes as the full check), while gates.toml or a source file
    changed still runs the full check."""
    write(ws.root, "results/first.json", "{}")  # the folder itself is part of the key
    time.sleep(RACY_WAIT_S)
    first = freeze(ws.root, "--json")
    assert (first.path, first.code) == ("full", 0)
    write(ws.root, "results/run/loss.json", json.dumps({"losses": [1.0]}))
    still = freeze(ws.root, "--json")
    assert still.path == "warm"
    write(ws.root, "results/run/loss2.json", json.dumps({"losses": [2.0]}))
    full = freeze(ws.root, "--json", env={"GATES_CACHE_DIR": "off"})
    assert full.path == "full"
    assert (still.code, still.out) == (full.code, full.out)
    assert freeze(ws.root, "--json").path == "warm"
    config = ws.root / "gates.toml"
    config.write_text(config.read_text() + "\n")
    assert freeze(ws.root, "--json").path == "full"
    _edit_source(ws)
    edited = freeze(ws.root, "--json")
    assert (edited.path, edited.code) == ("full", 1)


FORGE = """
import sys
sys.path.insert(0, {source!r})
sys.argv = ["gates", *{args!r}]
from gates import fastpath
request = fastpath.parse_request(sys.argv[1:])
path = fastpath.store_path(request)
found = fastpath.read_stored(path)
assert found is not None and not found.skip
digest, _ = fastpath.fingerprint(request, ("results",))
assert fastpath.fingerprint(request)[0] == found.fingerprint  # the audit's own conditions
record = (fastpath.STORE_VERSION, b"results", digest.encode(), str(found.code).encode(), b"")
body = found.body()
with open(path, "wb") as handle:
    handle.write(b"\\n".join(record) + body)
"""


def test_a_stored_audit_report_never_leaves_a_folder_out(receipted: Workspace) -> None:
    """Only the freeze script's answer may skip folders: an audit record that names one (as
    if results/ were never read) is not an answer once a receipt's subject changes."""
    args = ["-C", str(receipted.root), "audit", "--format", "json"]
    stored(receipted.root, "--format", "json")
    code = FORGE.format(source=str(REPO_ROOT), args=args)
    forged = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        check=False,
        cwd=receipted.root.parent,
        env={**os.environ},  # what audit() passes (the process's own environment can differ)
    )
    assert forged.returncode == 0, forged.stderr.decode()
    write(receipted.root, "results/loss.json", json.dumps({"losses": [9.0, 0.5]}))
    assert audit(receipted.root, "--format", "json").path == "full"


def test_a_symlinked_file_whose_target_changed_falls_back(
    receipted: Workspace, tmp_path: Path
) -> None:
    """The walk keys a symlink and its target: an edit outside the tree still misses."""
    target = tmp_path / "outside.txt"
    target.write_text("first\n")
    (receipted.root / "notes.txt").symlink_to(target)
    stored(receipted.root, "--format", "json")
    target.write_text("second, longer\n")
    assert audit(receipted.root, "--format", "json").path == "full"


def test_the_warm_answer_into_an_appended_file_or_another_encoding_is_the_same_bytes(
    receipted: Workspace, tmp_path: Path
) -> None:
    """A pipe gets the stored bytes copied by the kernel; a file opened for appending (which
    `sendfile` refuses) and a stdout that is not UTF-8 get them written: the same bytes."""
    log = tmp_path / "audit.log"  # before the store: the current folder is on sys.path
    log.write_bytes(b"before\n")
    warm = stored(receipted.root, "--format", "json")
    code = PROBE.format(
        source=str(REPO_ROOT), days=0, args=["-C", str(receipted.root), "audit", "--format", "json"]
    )
    with log.open("ab") as appended:
        done = subprocess.run(
            [sys.executable, "-c", code],
            stdout=appended,
            stderr=subprocess.PIPE,
            check=False,
            cwd=receipted.root.parent,
            env={**os.environ},  # what audit() passes (the process's own can differ)
        )
    assert done.stderr.decode().rsplit("PATH=", 1)[-1].strip() == "warm"
    assert done.returncode == warm.code
    assert log.read_bytes() == b"before\n" + warm.out
    latin = {"PYTHONIOENCODING": "latin-1"}
    assert stored(receipted.root, "--format", "json", env=latin).out == warm.out
