"""What the sandbox costs: `gates run` of the glm52-minimal example's Paddle entrypoint in
the sandbox against the same run with --no-sandbox, and materializing a commit of
--files files (git archive of its tree, the evidence locations left out, the file list
checked) against a bare `git archive HEAD | tar -x` of it.

Medians of --repeats runs, the two sides alternating; only ratios mean anything on a
shared machine. Targets (issue 16): run <= 1.05, or <= 0.5 s fixed cost; materialize
<= 1.2.

Usage: python bench/bench_sandbox.py [--files 5000] [--repeats 5] [--run-repeats 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import OUT, median_seconds, report

from gates.commands.demo import lay_out
from gates.commands.freeze import pin
from gates.core.hashing import StatCache
from gates.core.invocation import read_invocation
from gates.sandbox import Request, SandboxHost, prepared
from gates.sandbox.materialize import materialize
from gates.workspace.repository import open_workspace

PYTHON = os.path.normpath(sys.executable)  # no "bench/.." in it: the sandbox has no bench/


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def repository(root: Path, files: int) -> None:
    """``files`` small source files in 50 folders, committed once, plus a results folder."""
    for index in range(files):
        path = root / f"pkg{index % 50}" / f"module_{index}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"VALUE = {index}\n" * 20)
    (root / "results").mkdir()
    (root / "results/loss.json").write_text("{}\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "files")


def archive_tar(root: Path, into: Path) -> None:
    into.mkdir()
    archive = subprocess.Popen(["git", "-C", str(root), "archive", "HEAD"], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, check=True)
    archive.wait()


def bench_materialize(scratch: Path, files: int, repeats: int) -> dict[str, object]:
    root = scratch / "repo"
    root.mkdir()
    repository(root, files)
    counter = iter(range(10**6))

    def fresh() -> Path:
        return scratch / f"out-{next(counter)}"

    base_samples, our_samples = [], []
    for _ in range(repeats):  # alternating, so that a burst of load hits both sides
        base_samples.append(median_seconds(lambda: archive_tar(root, fresh()), 1))
        our_samples.append(
            median_seconds(lambda: materialize(root, "HEAD", ("results",), fresh()), 1)
        )
    base, ours = statistics.median(base_samples), statistics.median(our_samples)
    return {
        "materialize_files": files,
        "archive_tar_s": round(base, 4),
        "materialize_s": round(ours, 4),
        "materialize_ratio": round(ours / base, 3),
    }


def gates_run(root: Path, *extra: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "gates", "-C", str(root), "run", "--framework", "paddle",
         "--clean", *extra, "--", PYTHON, "model/train_paddle.py"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"gates run failed: {done.stderr.strip()[-400:]}")
    return elapsed


def sandboxed_pass(root: Path) -> None:
    """`python -c pass` in the sandbox on the example: materialize, start, end, clean up."""
    host = SandboxHost.of(read_invocation(os.environ), StatCache(None))
    request = Request(
        root=root,
        commit="HEAD",
        excluded=open_workspace(root).config.evidence.locations,
        command=[PYTHON, "-c", "pass"],
        cwd=root,
        output_at=root / "results/paddle",
        protocol={},
        host=host,
    )
    with prepared(host.support(), request) as ready:
        subprocess.run(ready.argv, env=ready.env, check=True)


def bench_fixed(root: Path, repeats: int) -> dict[str, object]:
    plain = median_seconds(lambda: subprocess.run([PYTHON, "-c", "pass"], check=True), repeats)
    boxed = median_seconds(lambda: sandboxed_pass(root), repeats)
    return {
        "python_pass_s": round(plain, 4),
        "python_pass_sandboxed_s": round(boxed, 4),
        "sandbox_fixed_cost_s": round(boxed - plain, 4),
    }


def bench_run(root: Path, repeats: int) -> dict[str, object]:
    sandboxed, plain = [], []
    for _ in range(repeats):
        plain.append(gates_run(root, "--no-sandbox"))
        sandboxed.append(gates_run(root))
    with_sandbox, without = sorted(sandboxed)[repeats // 2], sorted(plain)[repeats // 2]
    return {
        "run_no_sandbox_s": round(without, 3),
        "run_sandbox_s": round(with_sandbox, 3),
        "run_ratio": round(with_sandbox / without, 3),
        "run_fixed_cost_s": round(with_sandbox - without, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--run-repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT / "sandbox.json")
    parser.add_argument("--skip-run", action="store_true", help="leave out the gates run figures")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="gates-bench-sandbox-"))
    try:
        results = bench_materialize(scratch, args.files, args.repeats)
        example = scratch / "glm52-port"
        lay_out(example)
        pin(open_workspace(example), "HEAD", echo=lambda _: None)
        results |= bench_fixed(example, args.repeats)
        if not args.skip_run:
            results |= bench_run(example, args.run_repeats)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report(results, args.out)


if __name__ == "__main__":
    main()
