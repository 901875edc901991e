"""Benchmark the loss checker on two one-million-step files, as a ratio to json.load.

Times, in this process and on the same two files (medians of --repeats):
  * the reference: `json.load` of both files, nothing else;
  * the checker's work: strict reading of both series plus the comparison
    (`read_losses` x2 + `compare_losses`), on identical series and on series
    that differ at every step (the slow path: max_diff and max_ulp per step);
  * the whole command, `gates check loss` in a subprocess on a pinned workspace
    (freeze checks, input receipt lookup, output and receipt writing included),
    against `python -c 'json.load x2'` in a subprocess (same interpreter start);
  * the command's peak resident memory (the child's own rusage) against the
    two files' size, and against the `json.load` command's.

Usage: python bench/bench_loss.py [--steps 1000000] [--repeats 5]
(the issue's figure: --steps 10000000 --repeats 3, about 190 MB a file)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import median_seconds, report

from gates.commands.init import init
from gates.losses.compare import compare_losses
from gates.losses.series import read_losses

REPO = Path(__file__).resolve().parent.parent
ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "b@gates.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "b@gates.invalid",
}


def write_losses(path: Path, steps: int, seed: int) -> None:
    """Written in slices of a million steps: the bench itself stays small."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        handle.write('{"losses": [')
        for first in range(0, steps, 1_000_000):
            losses = [
                12.0 * 0.999999**step + rng.random() * 1e-3
                for step in range(first, min(first + 1_000_000, steps))
            ]
            handle.write((", " if first else "") + json.dumps(losses)[1:-1])
        handle.write("]}")


# Run in the measured process: its own peak (VmHWM belongs to the process's memory after
# exec; ru_maxrss would carry over the bench's own peak from before the exec).
PEAK = """
import atexit, runpy, sys
OUT = sys.argv[1]
def report():
    with open("/proc/self/status") as status, open(OUT, "w") as out:
        out.write(next(l.split()[1] for l in status if l.startswith("VmHWM:")))
atexit.register(report)
if sys.argv[2] == "gates":
    sys.argv = ["gates", *sys.argv[3:]]
    runpy.run_module("gates", run_name="__main__")
else:
    import json
    for path in sys.argv[3:]:
        with open(path, "rb") as handle:
            json.load(handle)
"""


def peak_rss_mib(what: str, args: list[str], folder: Path) -> float:
    """Peak resident memory (MiB) of a fresh process running `gates ARGS` (``what`` =
    "gates") or `json.load` of the files ARGS (``what`` = "json")."""
    out = folder / "peak.txt"
    subprocess.run(
        [sys.executable, "-c", PEAK, str(out), what, *args],
        capture_output=True,
        check=False,
        cwd=REPO,
    )
    return int(out.read_text()) / 1024


def workspace(root: Path, steps: int) -> tuple[Path, Path]:
    root.mkdir(parents=True)
    env = {**os.environ, **ENV}
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True, env=env)
    (root / "model.py").write_text("x = 1\n")
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "m"], check=True, env=env)
    init(root, pin="HEAD", force=False, echo=lambda _: None)
    reference, candidate = root / "results/torch/loss.json", root / "results/paddle/loss.json"
    write_losses(reference, steps, seed=1)
    write_losses(candidate, steps, seed=1)
    return reference, candidate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "loss.json")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="gates-bench-loss-"))
    try:
        reference, candidate = workspace(folder / "ws", args.steps)

        def plain() -> None:
            for path in (reference, candidate):
                with path.open("rb") as handle:
                    json.load(handle)

        def checker() -> None:
            compare_losses(read_losses(reference), read_losses(candidate), args.steps)

        baseline = median_seconds(plain, args.repeats)
        ours = median_seconds(checker, args.repeats)
        divergent = folder / "divergent.json"
        write_losses(divergent, args.steps, seed=2)

        def checker_divergent() -> None:
            compare_losses(read_losses(reference), read_losses(divergent), args.steps)

        ours_divergent = median_seconds(checker_divergent, args.repeats)
        load_cmd = [
            sys.executable,
            "-c",
            "import json,sys\nfor p in sys.argv[1:]: json.load(open(p,'rb'))",
            str(reference),
            str(candidate),
        ]
        gates_cmd = [
            sys.executable,
            "-m",
            "gates",
            "-C",
            str(folder / "ws"),
            "check",
            "loss",
            "results/torch/loss.json",
            "results/paddle/loss.json",
            "--required-steps",
            str(args.steps),
            "--bit-exact",
        ]
        load_cli = median_seconds(lambda: subprocess.run(load_cmd, check=True), args.repeats)
        gates_cli = median_seconds(
            lambda: subprocess.run(gates_cmd, check=True, capture_output=True), args.repeats
        )
        files_mib = (reference.stat().st_size + candidate.stat().st_size) / 2**20
        gates_rss = peak_rss_mib("gates", gates_cmd[3:], folder)
        load_rss = peak_rss_mib("json", load_cmd[3:], folder)
        results = {
            "steps": args.steps,
            "files_mib": round(files_mib, 1),
            "command_peak_rss_mib": round(gates_rss, 1),
            "command_peak_rss_over_files": round(gates_rss / files_mib, 2),
            "json_load_command_peak_rss_mib": round(load_rss, 1),
            "checker_over_json_load": round(ours / baseline, 2),
            "checker_every_step_differs_over_json_load": round(ours_divergent / baseline, 2),
            "command_over_json_load_command": round(gates_cli / load_cli, 2),
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
