"""What signing costs: warm `gates audit` over signed receipts against the same audit over
unsigned ones, and `gates run` of the glm52-minimal example's Paddle entrypoint with a signing key
against the same run without one.

Two workspaces of --receipts receipts each (one small subject each; same files, same
stamp), one signed with an ed25519 key and one not; both audited with the same trust
file, first cold (every envelope verified) then warm (the stat cache remembers verified
envelopes per trust-anchor digest). Medians of --repeats runs; only ratios mean anything.

Usage: python bench/bench_trust.py [--files 2000] [--receipts 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_audit import build_receipts, build_repository, git
from common import OUT, median_seconds, report

from gates.commands.demo import lay_out
from gates.core.hashing import cache_path
from gates.core.invocation import read_invocation
from gates.receipts.model import ArtifactKind
from gates.trust.keys import load_key, new_key, public_pem


def gates(root: Path, *args: str, env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-m", "gates", "-C", str(root), *args],
        capture_output=True,
        check=False,
        env=env,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--receipts", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        keys = base / "keys"
        keys.mkdir()
        new_key(keys / "ci.key")
        (keys / "ci.pub").write_text(public_pem(load_key(keys / "ci.key")))
        trust = keys / "trust.toml"
        trust.write_text('[[signers]]\nname = "ci"\npublic_key = "ci.pub"\nframeworks = ["*"]\n')
        env = {**os.environ, "GATES_TRUST": str(trust), "GATES_CACHE_DIR": str(base / "cache")}
        env.pop("GATES_SIGNING_KEY", None)
        figures: dict[str, object] = {"receipts": args.receipts}
        timings = {}
        for name, key in (("unsigned", None), ("signed", keys / "ci.key")):
            root = base / name
            build_repository(root, args.files)
            signer = load_key(key) if key else None
            build_receipts(root, args.receipts, kind=ArtifactKind.STRUCTURE_PARITY, key=signer)
            git(root, "add", "-A")
            git(root, "commit", "-q", "-m", "receipts")
            start = time.perf_counter()
            gates(root, "audit", env=env)
            timings[f"{name}_cold"] = time.perf_counter() - start
            assert cache_path(read_invocation(env).caching, root) is not None
            timings[f"{name}_warm"] = median_seconds(
                lambda root=root: gates(root, "audit", env=env), args.repeats
            )
        figures["warm_signed_over_unsigned"] = round(
            timings["signed_warm"] / timings["unsigned_warm"], 3
        )
        figures["cold_signed_over_unsigned"] = round(
            timings["signed_cold"] / timings["unsigned_cold"], 3
        )
        run_root = base / "example"
        lay_out(run_root)  # the glm52-minimal example, as `gates demo` lays it out
        gates(run_root, "freeze", "pin", "HEAD", env=env)
        command = (
            "run", "--framework", "paddle", "--out", "results/bench",
            "--", sys.executable, "model/train_paddle.py",
        )  # fmt: skip
        plain = median_seconds(lambda: gates(run_root, *command, env=env), args.repeats)
        signing_env = {**env, "GATES_SIGNING_KEY": str(keys / "ci.key")}
        signed = median_seconds(lambda: gates(run_root, *command, env=signing_env), args.repeats)
        figures["gates_run_signed_over_unsigned"] = round(signed / plain, 3)
    report(figures, OUT / "trust.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
