"""What judging each side's code costs: the per-side code check (gates/policy/sides.py) of every
receipt against the warm judging of the same workspace it is part of.

Builds a repository of --files source files and --receipts receipts (one small subject
each, all made at one commit, as a run's outputs are), warms the audit index, then times
in this process: the whole warm judging (`judge_workspace`, which includes the code check)
and the code check alone (a fresh CodeJudge over every receipt: one `git ls-tree` per
distinct commit, one answer per commit and side). Medians of --repeats runs; only the
ratio means anything (the machines are shared).

Usage: python bench/bench_sides.py [--files 5000] [--receipts 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from bench_audit import build_receipts, build_repository
from common import OUT, median_seconds, report

from gates.core.invocation import read_invocation
from gates.engine.audit import code_judge, judge_workspace
from gates.engine.inputs import AuditInputs, load_inputs
from gates.workspace.repository import open_workspace


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--receipts", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "repo"
        os.environ["GATES_CACHE_DIR"] = str(Path(folder) / "cache")
        build_repository(root, args.files)
        build_receipts(root, args.receipts)
        invocation = read_invocation(os.environ)

        def inputs() -> AuditInputs:
            return load_inputs(open_workspace(root, invocation.environment), invocation)

        state = judge_workspace(inputs())  # warms the index and the stat cache
        formal = sum(1 for j in state.receipts if j.status.value == "formal")

        def code_check() -> None:
            judge = code_judge(inputs(), state.freeze)
            for judgement in state.receipts:
                if judgement.receipt is not None:
                    judge.problem(judgement.receipt)

        warm = median_seconds(lambda: judge_workspace(inputs()), args.repeats)
        alone = median_seconds(code_check, args.repeats)
    report(
        {
            "files": args.files,
            "receipts": args.receipts,
            "formal_receipts": formal,
            "warm_judging_s": round(warm, 4),
            "code_check_s": round(alone, 4),
            "code_check_share_of_warm_judging": round(alone / warm, 3),
        },
        OUT / "sides.json",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
