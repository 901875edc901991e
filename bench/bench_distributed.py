"""Benchmark verification by the launcher's ranks, and the full-size GLM-5.2 inventory diff.

  * the hashing phase of a --size-mib checkpoint in --shards shards under
    `python -m paddle.distributed.launch --nproc_per_node 2` (each rank hashes
    its share, balanced by bytes, one thread each; rank 0 gathers through the
    TCPStore and merges), as a ratio to one process with 2 hashing threads and
    to `openssl dgst -sha256` on one core, over the same files;
  * the launcher's fixed cost: `gates check checkpoint` of a tiny checkpoint
    under the launcher, less the same command in one process; and the
    checkpoint size above which that cost is under 1% of the hashing time;
  * `gates inventory diff` of the full-size GLM-5.2 key set (header-only shards,
    bench/glm52_keyset.py; 59,870 names a side) as a user runs it, in wall and CPU
    seconds, against listing the same shards' names, dtypes and shapes with
    `safetensors.safe_open` in a process of its own, in the same rounds (target: the
    diff <= 4 s).
Files are written first, so every side reads from the page cache. Medians of --repeats.

Usage: python bench/bench_distributed.py [--size-mib 4096] [--shards 32] [--repeats 3]
                                         [--skip-hashing]
"""

from __future__ import annotations

import argparse
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

from bench_checkpoint import openssl, write_sharded
from common import median_seconds, report
from glm52_keyset import load_config, paddle_keyset, reference_keyset, write_header_only

from gates.checkpoints.digest import hash_shards
from gates.checkpoints.layout import load_checkpoint
from gates.core.hashing import StatCache

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
#: the children's environment: bytecode read as an installed gates has it
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

RANK_SCRIPT = """
import json, statistics, sys, time
from pathlib import Path
from gates.checkpoints.check import inspect_checkpoint
from gates.checkpoints.digest import hash_shards
from gates.checkpoints.ranks import (
    Exchange, RankReport, ShardState, balance, launcher_world, merge_reports, paddle_store)
from gates.core.hashing import StatCache

import os
from gates.core.invocation import read_invocation
folder, out, repeats = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
world = launcher_world(read_invocation(os.environ).launcher)
store = paddle_store()
checkpoint, _, _ = inspect_checkpoint(folder)
plan = balance({n: h.file_size for n, h in checkpoint.shards.items()}, world.size)
samples = []
for attempt in range(repeats):
    exchange = Exchange(store, world)
    store.add(f"bench/ready/{attempt}", 1)
    while store.add(f"bench/ready/{attempt}", 0) < world.size:
        time.sleep(0.005)
    start = time.perf_counter()
    share = plan[world.rank]
    contents = hash_shards(checkpoint, share, cache=StatCache(None), cache_prefix="b", threads=1)
    files = {s: ShardState(checkpoint.shards[s].file_size, 0) for s in share}
    exchange.report(RankReport(world.rank, "b", "L", share, contents, files))
    if world.rank == 0:
        merge_reports(plan, exchange.gather(600), label="b", layout_digest="L", timeout_s=600)
        samples.append(time.perf_counter() - start)
        exchange.publish_verdict(0)
    else:
        exchange.await_verdict(600)
if world.rank == 0:
    out.write_text(json.dumps({"hash_s": statistics.median(samples)}))
"""


def launcher(*args: str, cwd: Path, log_dir: Path) -> float:
    """Wall seconds of one run under the launcher with two ranks."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PADDLE_")}
    command = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2"]
    start = time.perf_counter()
    subprocess.run(
        [*command, "--log_dir", str(log_dir), *args],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def workspace(root: Path) -> Path:
    """A pinned workspace (git repository + gates init) for the CLI runs."""
    root.mkdir(parents=True)
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@gates.invalid"]
    subprocess.run([*git, "init", "-q", str(root)], check=True)
    (root / "README.md").write_text("bench\n")
    subprocess.run([*git, "-C", str(root), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(root), "commit", "-qm", "bench"], check=True)
    subprocess.run([BIN / "gates", "-C", str(root), "init", "--pin", "HEAD"], check=True)
    return root


def single(root: Path, folder: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        [BIN / "gates", "-C", str(root), "check", "checkpoint", folder],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def hashing(args: argparse.Namespace, root: Path) -> dict[str, object]:
    files = write_sharded(root / "big", args.size_mib, args.shards, tensors_per_shard=16)
    reference = median_seconds(lambda: openssl(files), args.repeats)
    checkpoint = load_checkpoint(root / "big")
    threads = median_seconds(
        lambda: hash_shards(
            checkpoint,
            sorted(checkpoint.shards),
            cache=StatCache(None),
            cache_prefix="b",
            threads=2,
        ),
        args.repeats,
    )
    script = root / "rank_bench.py"
    script.write_text(RANK_SCRIPT)
    out = root / "ranks.json"
    launcher(
        str(script),
        str(root / "big"),
        str(out),
        str(args.repeats),
        cwd=root,
        log_dir=root / "log-hash",
    )
    ranks = float(json.loads(out.read_text())["hash_s"])
    ws = workspace(root / "ws")
    write_sharded(ws / "results/tiny", 1, 2, tensors_per_shard=2)
    single(ws, "results/tiny")  # warm the imports' page cache
    alone = statistics.median(single(ws, "results/tiny") for _ in range(args.repeats))
    gates = str(BIN / "gates")
    fixed = [
        launcher(gates, "check", "checkpoint", "results/tiny", cwd=ws, log_dir=root / f"log{i}")
        for i in range(args.repeats)
    ]
    fixed_cost = statistics.median(fixed) - alone
    rate = args.size_mib * 1024 * 1024 / ranks
    return {
        "checkpoint_mib": args.size_mib,
        "shards": args.shards,
        "hash_seconds_2_ranks": round(ranks, 2),
        "hash_seconds_1_process_2_threads": round(threads, 2),
        "hash_seconds_openssl_1_core": round(reference, 2),
        "ranks_over_2_threads": round(threads / ranks, 2),
        "ranks_over_openssl_1_core": round(reference / ranks, 2),
        "launcher_fixed_cost_s": round(fixed_cost, 2),
        "launcher_cost_under_1pct_above_gib": round(fixed_cost * 100 * rate / 1024**3, 1),
    }


LISTING = """
import sys
from pathlib import Path
from safetensors import safe_open
for folder in sys.argv[1:]:
    for path in sorted(Path(folder).glob("*.safetensors")):
        with safe_open(str(path), "np") as handle:
            for name in handle.keys():
                piece = handle.get_slice(name)
                piece.get_dtype()
                piece.get_shape()
"""


def child_seconds(command: list[str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, the child's CPU seconds) of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, capture_output=True, check=False, env=CHILD_ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def inventory(args: argparse.Namespace, root: Path) -> dict[str, object]:
    """`gates inventory diff` of the full-size GLM-5.2 key set (header-only shards written by
    bench/glm52_keyset.py; the candidate lacks the MTP layer's DSA indexer, as in the seed
    PR), as a user runs it, against listing the same shards' names, dtypes and shapes with
    `safetensors.safe_open` in a process of its own (the same interpreter start)."""
    config = load_config()
    mtp = config["num_hidden_layers"]
    ws = workspace(root / "inv")
    reference = reference_keyset(config)
    write_header_only(ws / "results/torch/checkpoint", reference)
    (ws / "results/torch/checkpoint/config.json").write_text(json.dumps(config))
    candidate = paddle_keyset(reference, mtp, drop_mtp_indexer=True)
    write_header_only(ws / "results/paddle/checkpoint", candidate)
    folders = ["results/torch/checkpoint", "results/paddle/checkpoint"]
    diff = [str(BIN / "gates"), "-C", str(ws), "inventory", "diff", *folders, "--force"]
    listing = [sys.executable, "-c", LISTING, *folders]
    child_seconds(diff, ws)  # the first run writes the output; the timed ones replace it
    rounds = [(child_seconds(diff, ws), child_seconds(listing, ws)) for _ in range(args.repeats)]
    document = json.loads((ws / "outputs/surveys/structure-parity.json").read_text())
    text = subprocess.run([*diff, "--no-receipt"], capture_output=True, text=True, check=False)
    return {
        "glm52_reference_tensors": len(reference),
        "glm52_candidate_tensors": len(candidate),
        "glm52_shards_per_side": len(list((ws / folders[0]).glob("*.safetensors"))),
        "glm52_structural": document["counts"]["structural"],
        "glm52_differences": len(document["differences"]),
        "glm52_text_output_lines": len(text.stdout.splitlines()),
        "inventory_diff_s": round(statistics.median(r[0][0] for r in rounds), 2),
        "inventory_diff_cpu_s": round(statistics.median(r[0][1] for r in rounds), 2),
        "safe_open_listing_s": round(statistics.median(r[1][0] for r in rounds), 2),
        "safe_open_listing_cpu_s": round(statistics.median(r[1][1] for r in rounds), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=4096)
    parser.add_argument("--shards", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-hashing", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "distributed.json")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gates-bench-dist-"))
    try:
        results = {} if args.skip_hashing else hashing(args, root)
        results.update(inventory(args, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
