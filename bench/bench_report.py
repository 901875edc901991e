"""What the HTML report and the history cost.

`gates report --html` on a workspace whose tensor dumps hold the full GLM-5.2 key set
(59,870 tensors, one element each, one step; the last tensor differs) and whose loss
files hold 100 steps (diverging at step 58), against `gates audit` of the same workspace
(the reference run: the report is the audit plus the comparison again plus the charts).
Targets: under 5 s, the page under 5 MB.

`gates history` over 100 commits that each carry a signed note, against `git log` of the
same range (one process that lists the commits) and `gates --version` (the floor of any
gates command: Python and the command line starting). Target: under 1 s.

Medians of --repeats runs; the machine is shared: the ratios are what travels.

Usage: python bench/bench_report.py [--repeats 3] [--commits 100]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from common import OUT, median_seconds, report
from glm52_keyset import load_config, reference_keyset

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gates.engine.summary import AuditSummary, PolicyRef  # noqa: E402
from gates.reporters.history import record  # noqa: E402
from gates.trust.keys import load_key, new_key, public_pem  # noqa: E402
from tests.tensorgen import write_dump  # noqa: E402


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, check=True, text=True
    ).stdout


def gates(root: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gates", "-C", str(root), *args],
        capture_output=True,
        check=False,
        text=True,
        env=env,
    )


def repository(root: Path, env: dict[str, str]) -> None:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "model.py").write_text("X = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "model")
    gates(root, "init", "--pin", "HEAD", env=env)
    contract = root / "contracts/tensor-alignment.toml"
    contract.write_text(contract.read_text().replace('steps = "1:100"', 'steps = "1:1"'))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "gates")


def report_workspace(root: Path, env: dict[str, str]) -> int:
    repository(root, env)
    names = list(reference_keyset(load_config()))
    value = np.ones(1, dtype=np.float32)
    phases = {"param": dict.fromkeys(names, value)}
    write_dump(root / "results/torch", {1: phases}, framework="torch")
    nudged = {"param": {**phases["param"], names[-1]: np.full(1, 2, dtype=np.float32)}}
    write_dump(root / "results/paddle", {1: nudged})
    losses = [float(2.5 - i * 0.01) for i in range(100)]
    for framework, values in (
        ("torch", losses),
        ("paddle", [*losses[:57], *(v * 1.01 for v in losses[57:])]),
    ):
        path = root / f"results/{framework}/loss.json"
        path.write_text(json.dumps({"losses": values}))
        gates(
            root,
            "receipt",
            "create",
            "--kind",
            "loss",
            "--framework",
            framework,
            "--subject",
            f"results/{framework}/loss.json",
            env=env,
        )
    return len(names)


def history_workspace(root: Path, commits: int, key_path: Path) -> None:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    key = load_key(key_path)
    (root / "gates.toml").write_text("[freeze]\n")
    for index in range(commits):
        (root / "model.py").write_text(f"X = {index}\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", f"change {index}")
        head = git(root, "rev-parse", "HEAD").strip()
        summary = AuditSummary(
            commit=head,
            verdict="blocked",
            formal_alignment_steps=min(index, 100),
            required_steps=100,
            tensor_aligned_steps=None,
            contracts=(),
            policy=PolicyRef(protected=False, ref=None, commit=None),
        )
        record(root, summary, key)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--history-only", action="store_true")
    args = parser.parse_args()
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        key = base / "keys/ci.key"
        key.parent.mkdir()
        new_key(key)
        (base / "keys/ci.pub").write_text(public_pem(load_key(key)))
        trust = base / "keys/trust.toml"
        trust.write_text('[[signers]]\nname = "ci"\npublic_key = "ci.pub"\nframeworks = ["*"]\n')
        env = {**os.environ, "GATES_TRUST": str(trust), "GATES_SIGNING_KEY": str(key)}
        env.pop("GATES_POLICY_REF", None)

        if not args.history_only:
            figures.update(bench_html(base / "ws", base / "html", env, args.repeats))

        hist = base / "hist"
        history_workspace(hist, args.commits, key)
        listing = median_seconds(
            lambda: git(hist, "log", "--format=%H %s", f"--max-count={args.commits}"),
            args.repeats,
        )
        shown = gates(hist, "history", "--max-count", str(args.commits), env=env)
        if shown.returncode != 0 or shown.stdout.count("trusted (signed by ci)") != args.commits:
            print(shown.stdout[-2000:], shown.stderr, file=sys.stderr)
            return 1
        history = median_seconds(
            lambda: gates(hist, "history", "--max-count", str(args.commits), env=env),
            args.repeats,
        )
        start = median_seconds(lambda: gates(hist, "--version", env=env), args.repeats)
    figures.update(
        {
            "history_commits": args.commits,
            "git_log_s": round(listing, 4),
            "gates_version_s": round(start, 3),
            "history_s": round(history, 3),
            "history_over_git_log": round(history / listing, 1),
            "history_over_gates_version": round(history / start, 2),
        }
    )
    report(figures, OUT / "bench_report.json")
    return 0


def bench_html(ws: Path, out: Path, env: dict[str, str], repeats: int) -> dict[str, object]:
    tensors = report_workspace(ws, env)
    gates(ws, "audit", env=env)  # warm the stat cache and the audit index for both
    audit = median_seconds(lambda: gates(ws, "audit", env=env), repeats)
    done = gates(ws, "report", "--html", str(out), "--format", "json", env=env)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    html = median_seconds(lambda: gates(ws, "report", "--html", str(out), env=env), repeats)
    return {
        "tensors": tensors,
        "loss_steps": 100,
        "audit_s": round(audit, 3),
        "report_html_s": round(html, 3),
        "report_over_audit": round(html / audit, 2),
        "report_minus_audit_s": round(html - audit, 3),
        "page_bytes": (out / "report.html").stat().st_size,
    }


if __name__ == "__main__":
    sys.exit(main())
