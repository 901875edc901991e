"""Benchmark `gates audit` in the seconds a user waits, with `git status` as the reference.

Times, in wall seconds (medians of --repeats, each a fresh `gates` process as the hook
runs it):
  * the bundled example (examples/glm52-minimal laid out as `gates demo` lays it out, its
    demo key trusted, the policy on `main`): cold (an empty cache folder: no stat cache,
    no audit index) and warm (the caches of the run before);
  * a workspace of --receipts signed receipts of one small subject each over --files
    source files: warm;
and `git status --porcelain` on each workspace, run in the same rounds (the reference a
noisy machine moves alike).

Targets (issue 34): example cold <= 3 s, warm <= 1 s; 10,000 receipts warm <= 2 s.

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

from common import report

from gates.commands.demo import POLICY_REF, lay_out
from gates.commands.init import init
from gates.core.hashing import sha256_file
from gates.core.json_writer import pretty_json
from gates.freeze.check import evaluate_freeze
from gates.receipts.create import ReceiptRequest, build_document
from gates.receipts.model import ArtifactKind, Framework
from gates.trust.envelope import ATTESTATION_FIELD, sign_document
from gates.trust.keys import SigningKey, load_key
from gates.workspace.repository import open_workspace

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_KEYS = REPO / "examples" / "glm52-minimal" / "demo-keys"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@gates.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@gates.invalid",
}
PAST = time.time_ns() - 3600 * 10**9


def git(root: Path, *args: str) -> bytes:
    done = subprocess.run(
        ["git", "-C", str(root), *args],
        capture_output=True,
        env={**os.environ, **GIT_ENV},
        check=True,
    )
    return done.stdout


def trust_file(folder: Path) -> dict[str, str]:
    """The example's demo key copied outside the workspace and trusted for every side: the
    environment a formal audit of the example runs in."""
    folder.mkdir(parents=True)
    for name in ("demo.key", "demo.pub"):
        shutil.copy(EXAMPLE_KEYS / name, folder / name)
    (folder / "demo.key").chmod(0o600)
    trust = folder / "trust.toml"
    trust.write_text(
        '[[signers]]\nname = "demo"\npublic_key = "demo.pub"\n'
        'frameworks = ["torch", "paddle", "replay"]\n'
    )
    return {"GATES_SIGNING_KEY": str(folder / "demo.key"), "GATES_TRUST": str(trust)}


def build_repository(root: Path, files: int) -> None:
    """A pinned repository of ``files`` source files."""
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
    with ``key`` when one is given; every file aged past the racy window of the stat cache."""
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


def seconds(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child: user + system) of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu


def medians(samples: list[tuple[float, float]], name: str) -> dict[str, float]:
    """``name``_s (wall) and ``name``_cpu_s, the medians of ``samples``, to two places."""
    return {
        f"{name}_s": round(statistics.median(s[0] for s in samples), 2),
        f"{name}_cpu_s": round(statistics.median(s[1] for s in samples), 2),
    }


def audit_command(root: Path) -> list[str]:
    return [sys.executable, "-m", "gates", "-C", str(root), "audit", "--format", "json"]


def verdict(root: Path, env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(audit_command(root), capture_output=True, env=env, check=False)
    document = json.loads(done.stdout)
    receipts = document["receipts"]
    return {
        "verdict": document["verdict"],
        "receipts": len(receipts),
        "formal": sum(r["status"] == "formal" for r in receipts),
    }


def example(folder: Path, base_env: dict[str, str], repeats: int) -> dict[str, object]:
    root = folder / "example"
    lay_out(root)
    cache = folder / "example-cache"
    env = {**base_env, "GATES_POLICY_REF": POLICY_REF, "GATES_CACHE_DIR": str(cache)}
    command, status = audit_command(root), ["git", "status", "--porcelain"]
    colds, warms, statuses = [], [], []
    for _ in range(repeats):
        shutil.rmtree(cache, ignore_errors=True)
        colds.append(seconds(command, root, env))
        warms.append(seconds(command, root, env))
        statuses.append(seconds(status, root, env))
    found = verdict(root, env)
    return {
        "example_receipts": found["receipts"],
        "example_formal": found["formal"],
        "example_verdict": found["verdict"],
        **medians(colds, "example_audit_cold"),
        **medians(warms, "example_audit_warm"),
        **medians(statuses, "example_git_status"),
    }


def many(folder: Path, base_env: dict[str, str], args: argparse.Namespace) -> dict[str, object]:
    root = folder / "many"
    key = load_key(Path(base_env["GATES_SIGNING_KEY"]))
    build_repository(root, args.files)
    build_receipts(root, args.receipts, key=key)
    env = {**base_env, "GATES_CACHE_DIR": str(folder / "many-cache")}
    command, status = audit_command(root), ["git", "status", "--porcelain"]
    cold = seconds(command, root, env)
    seconds(command, root, env)
    warms, statuses = [], []
    for _ in range(args.repeats):
        warms.append(seconds(command, root, env))
        statuses.append(seconds(status, root, env))
    found = verdict(root, env)
    return {
        "many_files": args.files,
        "many_receipts": found["receipts"],
        "many_formal": found["formal"],
        **medians([cold], "many_audit_cold"),
        **medians(warms, "many_audit_warm"),
        **medians(statuses, "many_git_status"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--receipts", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "audit.json")
    args = parser.parse_args()
    # the bytecode an installed gates has (pip compiles it on install); without it every run
    # compiles gates again (a second of CPU), which no user waits for
    compileall.compile_dir(REPO / "gates", quiet=1)
    folder = Path(tempfile.mkdtemp(prefix="gates-bench-audit-"))
    try:
        passed = {"GATES_SIGNING_KEY", "GATES_TRUST", "GATES_POLICY_REF", "GATES_CACHE_DIR"}
        passed.add("PYTHONDONTWRITEBYTECODE")
        base_env = {k: v for k, v in os.environ.items() if k not in passed}
        base_env.update(GIT_ENV)
        base_env.update(trust_file(folder / "keys"))
        results = example(folder, base_env, args.repeats)
        results.update(many(folder, base_env, args))
        results["load_average_at_end"] = [round(load, 1) for load in os.getloadavg()]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
