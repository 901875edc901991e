"""Benchmark checkpoint hashing against `openssl dgst -sha256` on the same files.

  * hashing throughput of `check_checkpoint` (canonical digests) on a checkpoint of
    --size-mib MiB in 8 shards, with 1 and 2 threads, against `openssl dgst -sha256`
    over the same files (one process: the per-core limit of SHA-256 here), the three run
    once a round (targets: >= 0.9x openssl with one thread, >= 1.7x with two);
  * a warm re-check (stat cache filled) against the cold check.
Files are written first, so both sides read from the page cache. Medians of --repeats.

Usage: python bench/bench_checkpoint.py [--size-mib 2048] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from common import median_of, median_seconds, report, rounded_median_ratio
from safetensors.numpy import save_file

from gates.checkpoints.check import check_checkpoint
from gates.core.hashing import StatCache

REPO = Path(__file__).resolve().parent.parent
SHARDS = 8


def write_sharded(folder: Path, total_mib: int, shards: int, tensors_per_shard: int) -> list[Path]:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    per_tensor = total_mib * 1024 * 1024 // (shards * tensors_per_shard) // 2
    weight_map = {}
    for shard in range(shards):
        name = f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
        arrays = {
            f"layers.{shard}.t{index}": rng.integers(0, 2**16, per_tensor, dtype=np.uint16)
            for index in range(tensors_per_shard)
        }
        save_file(arrays, str(folder / name))
        weight_map.update(dict.fromkeys(arrays, name))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return sorted(folder.glob("*.safetensors"))


def openssl(files: list[Path]) -> None:
    subprocess.run(
        ["openssl", "dgst", "-sha256", *map(str, files)], check=True, capture_output=True
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "checkpoint.json")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gates-bench-ckpt-"))
    try:
        results = hashing(root, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(results, args.out)
    return 0


def hashing(root: Path, args: argparse.Namespace) -> dict[str, object]:
    """Hashing throughput against openssl (each round runs all three, so a ratio sees the
    machine as both its sides saw it), and the warm re-check against the cold one."""
    files = write_sharded(root / "big", args.size_mib, SHARDS, tensors_per_shard=16)

    def cold(threads: int) -> Callable[[], object]:
        return lambda: check_checkpoint(root, "big", cache=StatCache(None), threads=threads)

    rounds = []
    for _ in range(args.repeats):
        timed = {}
        for name, action in (
            ("openssl", lambda: openssl(files)),
            ("one", cold(1)),
            ("two", cold(2)),
        ):
            start = time.perf_counter()
            action()
            timed[name] = time.perf_counter() - start
        rounds.append(timed)
    cache = StatCache(root / "cache.json")
    check_checkpoint(root, "big", cache=cache, threads=2)
    old = time.time_ns() - 10**10  # past the racy window, as for a checkpoint written earlier
    for path in files:
        os.utime(path, ns=(old, old))
    cache = StatCache(root / "cache.json")
    cold_cached = median_seconds(lambda: check_checkpoint(root, "big", cache=cache, threads=2), 1)
    warm = median_seconds(
        lambda: check_checkpoint(root, "big", cache=cache, threads=2), args.repeats
    )
    openssl_s = median_of(rounds, "openssl")
    return {
        "checkpoint_mib": args.size_mib,
        "openssl_1_core_s": round(openssl_s, 2),
        "hash_1_thread_s": round(median_of(rounds, "one"), 2),
        "hash_2_threads_s": round(median_of(rounds, "two"), 2),
        "hash_throughput_1_thread_over_openssl": rounded_median_ratio(rounds, "openssl", "one"),
        "hash_throughput_2_threads_over_openssl": rounded_median_ratio(rounds, "openssl", "two"),
        "warm_recheck_speedup_over_cold": round(cold_cached / warm, 1),
    }


if __name__ == "__main__":
    sys.exit(main())
