"""Benchmark the spine: `gates audit` and `audit_source_freeze.py` as ratios to plain git.

Builds a repository of --files source files and a workspace with --receipts
receipts (one small subject each), then times, in the same process and on the
same repository:
  * `git status --porcelain` against `gates audit` (cold stat cache, then warm: the stored
    report of gates/fastpath.py; and warm from the audit index alone, the report deleted);
  * the raw git commands the freeze check needs against `audit_source_freeze.py`;
  * both warm answers through the console scripts the hooks run (`gates`,
    `audit-source-freeze`), which start without runpy;
and the same ratios in CPU seconds of the child processes (user + system), which a
shared machine's load moves far less than wall time. Medians of --repeats runs. Only
ratios are meaningful: the machines are shared.

Usage: python bench/bench_audit.py [--files 5000] [--receipts 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import (
    lowest_ratio,
    median_cpu_seconds,
    median_of,
    median_seconds,
    report,
    rounded_median_ratio,
    rounded_ratios,
)

from gates import fastpath
from gates.commands.init import init
from gates.core.canonical import pretty_json
from gates.core.hashing import cache_path, sha256_file
from gates.core.invocation import read_invocation
from gates.freeze.check import evaluate_freeze
from gates.receipts.create import ReceiptRequest, build_document
from gates.receipts.model import ArtifactKind, Framework
from gates.trust.envelope import ATTESTATION_FIELD, sign_document
from gates.trust.keys import SigningKey
from gates.workspace.repository import open_workspace

REPO = Path(__file__).resolve().parent.parent
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@gates.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@gates.invalid",
}
BENCH_ENV = {**GIT_ENV, "GIT_OPTIONAL_LOCKS": "0", "GIT_NO_REPLACE_OBJECTS": "1"}
PAST = time.time_ns() - 3600 * 10**9


def git(root: Path, *args: str, stdin: bytes | None = None) -> bytes:
    done = subprocess.run(
        ["git", "-C", str(root), *args], input=stdin, capture_output=True, env=GIT_ENV, check=True
    )
    return done.stdout


def build_repository(root: Path, files: int) -> None:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for index in range(files):
        path = root / "paddleformers" / f"pkg{index // 100:03d}" / f"mod{index % 100:03d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"VALUE_{index} = {index}\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "source")
    init(root, pin="HEAD", force=False, echo=lambda _: None)


def build_receipts(
    root: Path,
    count: int,
    *,
    kind: ArtifactKind = ArtifactKind.LOSS,
    key: SigningKey | None = None,
) -> None:
    """``count`` receipts of one small subject each, stamped under the passing freeze, signed
    with ``key`` when one is given; every file aged past the racy window."""
    workspace = open_workspace(root)
    freeze = evaluate_freeze(root, workspace.config)
    assert freeze.verdict == "pass", freeze.messages()
    for index in range(count):
        relpath = f"results/run{index // 1000:02d}/step{index:05d}.json"
        subject = root / relpath
        subject.parent.mkdir(parents=True, exist_ok=True)
        subject.write_text(json.dumps({"losses": [index * 0.5]}))
        os.utime(subject, ns=(PAST, PAST))
        digest = sha256_file(subject)
        request = ReceiptRequest(kind=kind, subjects=(relpath,), framework=Framework.PADDLE)
        subjects: list[dict[str, object]] = [
            {"path": relpath, "sha256": digest.sha256, "size": digest.size}
        ]
        document = build_document(request, subjects, freeze, freeze)
        if key is not None:
            document[ATTESTATION_FIELD] = sign_document(document, key)
        receipt = subject.with_name(subject.stem + ".receipt.json")
        receipt.write_text(pretty_json(document))
        os.utime(receipt, ns=(PAST, PAST))


Step = tuple[list[str], bytes | None]

#: Deletes the warm path's stored reports of one workspace (gates/fastpath.py).
DROP_STORED = """
import sys
from pathlib import Path
from gates import fastpath
folder = fastpath.cache_folder()
request = fastpath.parse_request(["-C", sys.argv[1], "audit"])
name = Path(fastpath.store_path(request)).name.split(".report.")[0]
for path in Path(folder).glob(name + ".report.*"):
    path.unlink()
"""


def import_totals(command: list[str], cwd: Path) -> tuple[int, float]:
    """(modules imported, summed self import time in ms) of ``command`` under -X importtime."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *command],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env=BENCH_ENV,  # the timed runs' environment: the warm path keys on it
    )
    selfs = [
        int(line.split(":", 1)[1].split("|")[0])
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.split("|")[0].split(":")[1].strip().isdigit()
    ]
    return len(selfs), round(sum(selfs) / 1000, 1)


def fingerprint_seconds(root: Path, repeats: int) -> tuple[float, float]:
    """The warm path's own work, in this process: (median wall, median CPU seconds of) the
    fingerprint of one audit request (the walk of the worktree, git's files, gates' files)
    as the warm answer takes it, without Python's start or the report's output."""
    request = fastpath.parse_request(["-C", str(root), "audit"])
    assert request is not None

    def take() -> object:
        return fastpath.fingerprint(request, track_newest=False)

    return median_seconds(take, repeats), median_cpu_seconds(take, repeats)


def bare_walk(root: Path) -> int:
    """The floor of the fingerprint's walk: every entry of the worktree listed and each file
    `lstat`ed once (on the listed folder), nothing formatted or hashed; the file count."""
    count = 0
    pending = [str(root)]
    while pending:
        folder = pending.pop()
        handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with os.scandir(handle) as listing:
                for entry in listing:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name != ".git":
                            pending.append(f"{folder}/{entry.name}")
                        continue
                    entry.stat(follow_symlinks=False)
                    count += 1
        finally:
            os.close(handle)
    return count


def median_seconds_of(steps: list[Step], repeats: int, cwd: Path) -> float:
    """Median wall time of running ``steps`` (command, stdin) one after the other."""
    return timed(steps, repeats, cwd)[0]


def timed(steps: list[Step], repeats: int, cwd: Path) -> tuple[float, float]:
    """(median wall seconds, median CPU seconds of the children) of running ``steps``."""
    walls, cpus = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        run_steps(steps, cwd)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def run_steps(steps: list[Step], cwd: Path) -> None:
    """Each (command, stdin) in ``cwd``, its output read, in the timed runs' environment
    (gates' own git settings: no optional locks, no replace refs)."""
    for command, stdin in steps:
        subprocess.run(
            command, input=stdin, cwd=cwd, capture_output=True, check=False, env=BENCH_ENV
        )


def interleaved_children(
    commands: dict[str, list[Step]], repeats: int, cwd: Path
) -> list[dict[str, float]]:
    """Each command's wall seconds (``name``) and its children's CPU seconds (``name_cpu``)
    in each of ``repeats`` rounds, every command once a round (common.interleaved_cpu_seconds
    for child processes)."""
    rounds = []
    for _ in range(repeats):
        timed_round: dict[str, float] = {}
        for name, steps in commands.items():
            timed_round[name], timed_round[f"{name}_cpu"] = timed(steps, 1, cwd)
        rounds.append(timed_round)
    return rounds


def raw_freeze_git_steps(pin: str) -> list[Step]:
    """The git commands `audit_source_freeze.py` runs on a pinned clean tree, as plain calls."""
    governance = [
        f":(exclude,literal){path}"
        for path in ("gates.toml", "contracts", "results", "experiments", "outputs", ".gates")
    ]
    git = ["git", "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false"]
    status = [
        *git,
        "status",
        "--porcelain=v2",
        "-z",
        "--untracked-files=all",
        "--ignore-submodules=none",
        "--",
        ".",
        *governance,
    ]
    ls_files = [*git, "ls-files", "-z", "--exclude-per-directory=.gitignore"]
    batch = [*git, "cat-file", "--batch-check"]
    return [
        (status, None),
        (batch, f"HEAD\n{pin}^{{commit}}\n{pin}\n".encode()),
        ([*git, "for-each-ref", "refs/replace/"], None),
        ([*git, "ls-tree", "-r", "-z", "--full-tree", "HEAD"], None),
        ([*ls_files, "-v", "--cached", "--others", "--", ".", *governance], None),
        ([*ls_files, "--others", "--ignored", "--directory", "--", ".", *governance], None),
        (status, None),
        (batch, b"HEAD\n"),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--receipts", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "audit.json")
    args = parser.parse_args()
    # the bytecode an installed gates has (under PYTHONDONTWRITEBYTECODE an edited module
    # would otherwise be compiled again by every run: 15 ms for gates.fastpath here)
    compileall.compile_dir(REPO / "gates", quiet=1)
    folder = Path(tempfile.mkdtemp(prefix="gates-bench-"))
    root = folder / "ws"
    try:
        build_repository(root, args.files)
        build_receipts(root, args.receipts)
        pin = git(root, "rev-parse", "HEAD").decode().strip()
        gates = [sys.executable, "-m", "gates", "-C", str(root), "audit", "--format", "json"]
        scripts = Path(sys.executable).parent
        gates_script = [str(scripts / "gates"), *gates[3:]]
        status: list[Step] = [(["git", "status", "--porcelain"], None)]
        script = [sys.executable, str(REPO / "audit_source_freeze.py"), "-C", str(root)]
        freeze_console = [str(scripts / "audit-source-freeze"), "-C", str(root)]
        cache = cache_path(read_invocation(os.environ).caching, root)
        if cache is not None:
            cache.unlink(missing_ok=True)
        cold = median_seconds_of([(gates, None)], 1, root)
        # each warm answer's own stored report first (each has its own sys.path and argv)
        for warming in (gates, gates_script, script, freeze_console):
            timed([(warming, None)], 2, root)
        # every command once a round, interleaved: a ratio taken within a round sees the
        # machine as both its sides saw it
        rounds = interleaved_children(
            {
                "status": status,
                "warm": [(gates, None)],
                "script": [(gates_script, None)],
                "freeze": [(script, None)],
                "freeze_console": [(freeze_console, None)],
                "raw": raw_freeze_git_steps(pin),
                "python": [([sys.executable, "-c", "pass"], None)],
            },
            args.repeats,
            root,
        )
        audit = json.loads(subprocess.run(gates, capture_output=True, check=False).stdout)
        formal = sum(r["status"] == "formal" for r in audit["receipts"])
        git_status, git_status_cpu = median_of(rounds, "status"), median_of(rounds, "status_cpu")
        raw = median_of(rounds, "raw")
        fingerprint_s, fingerprint_cpu = fingerprint_seconds(root, args.repeats)
        walk_cpu = median_cpu_seconds(lambda: bare_walk(root), args.repeats)
        # the worktree's rows alone, as the warm path takes them (in C where gates._walk was
        # built) and by the Python walk the C one is tested against
        c_rows, python_rows = (
            median_cpu_seconds(
                lambda walk=walk: walk(str(root), ".git", "", (), track_newest=False),
                args.repeats,
            )
            for walk in (fastpath.tree_rows, fastpath.python_tree_rows)
        )
        script_modules, script_ms = import_totals(script[1:], root)
        audit_modules, audit_ms = import_totals(gates[1:], root)
        # the warm audit as the index alone answers it (the stored report is deleted first),
        # and what deleting costs on its own
        stored = [sys.executable, "-c", DROP_STORED, str(root)]
        index_warm, index_warm_cpu = timed([(stored, None), (gates, None)], args.repeats, root)
        drop_only, drop_only_cpu = timed([(stored, None)], args.repeats, root)
        results = {
            "files": args.files,
            "receipts": args.receipts,
            "receipts_judged_formal": formal,
            "audit_cold_over_git_status": round(cold / git_status, 2),
            "audit_warm_over_git_status": rounded_median_ratio(rounds, "warm", "status"),
            "audit_warm_cpu_over_git_status_cpu": rounded_median_ratio(
                rounds, "warm_cpu", "status_cpu"
            ),
            "audit_warm_gates_script_over_git_status": rounded_median_ratio(
                rounds, "script", "status"
            ),
            "audit_warm_gates_script_cpu_over_git_status_cpu": rounded_median_ratio(
                rounds, "script_cpu", "status_cpu"
            ),
            "audit_warm_cpu_over_git_status_cpu_lowest": lowest_ratio(
                rounds, "warm_cpu", "status_cpu"
            ),
            "audit_warm_gates_script_cpu_over_git_status_cpu_lowest": lowest_ratio(
                rounds, "script_cpu", "status_cpu"
            ),
            "audit_warm_gates_script_cpu_over_git_status_cpu_each_round": rounded_ratios(
                rounds, "script_cpu", "status_cpu"
            ),
            "audit_cold_over_warm": round(cold / median_of(rounds, "warm"), 2),
            "audit_index_warm_over_git_status": round((index_warm - drop_only) / git_status, 2),
            "audit_index_warm_cpu_over_git_status_cpu": round(
                (index_warm_cpu - drop_only_cpu) / git_status_cpu, 2
            ),
            "audit_stored_over_index_warm": round(
                median_of(rounds, "warm") / (index_warm - drop_only), 3
            ),
            "freeze_script_over_raw_git": rounded_median_ratio(rounds, "freeze", "raw"),
            "freeze_script_cpu_over_raw_git_cpu": rounded_median_ratio(
                rounds, "freeze_cpu", "raw_cpu"
            ),
            "freeze_console_script_over_raw_git": rounded_median_ratio(
                rounds, "freeze_console", "raw"
            ),
            "freeze_console_script_cpu_over_raw_git_cpu": rounded_median_ratio(
                rounds, "freeze_console_cpu", "raw_cpu"
            ),
            "fingerprint_over_git_status": round(fingerprint_s / git_status, 2),
            "fingerprint_cpu_over_git_status_cpu": round(fingerprint_cpu / git_status_cpu, 2),
            "fingerprint_over_raw_git": round(fingerprint_s / raw, 2),
            "bare_walk_cpu_over_git_status_cpu": round(walk_cpu / git_status_cpu, 2),
            "worktree_rows_cpu_over_git_status_cpu": round(c_rows / git_status_cpu, 2),
            "worktree_rows_in_python_cpu_over_git_status_cpu": round(
                python_rows / git_status_cpu, 2
            ),
            "worktree_rows_walked_in_c": fastpath._native_tree_rows is not None,
            "python_pass_cpu_over_git_status_cpu": rounded_median_ratio(
                rounds, "python_cpu", "status_cpu"
            ),
            "freeze_script_import_modules": script_modules,
            "freeze_script_import_ms": script_ms,
            "warm_audit_import_modules": audit_modules,
            "warm_audit_import_ms": audit_ms,
            "load_average_at_end": [round(load, 1) for load in os.getloadavg()],
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
