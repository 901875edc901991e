"""Benchmark checkpoint hashing and inventory, as ratios to reference tools on the same files.

  * hashing throughput of `check_checkpoint` (canonical digests) on a checkpoint of
    --size-mib MiB in 8 shards, with 1 and 2 threads, against `openssl dgst -sha256`
    over the same files (one process: the per-core limit of SHA-256 here);
  * a warm re-check (stat cache filled) against the cold check;
  * the inventory (headers only, with index cross-checks) of --shards small shards
    against listing the same shards with `safetensors.safe_open`.
Files are written first, so both sides read from the page cache. Medians of --repeats.

Usage: python bench/bench_checkpoint.py [--size-mib 2048] [--shards 1000] [--repeats 3]
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
from common import median_seconds, report
from safetensors import safe_open
from safetensors.numpy import save_file

from gates.checkpoints.check import check_checkpoint
from gates.checkpoints.layout import load_checkpoint
from gates.hashing import StatCache

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
    parser.add_argument("--shards", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "checkpoint.json")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gates-bench-ckpt-"))
    try:
        files = write_sharded(root / "big", args.size_mib, SHARDS, tensors_per_shard=16)
        reference = median_seconds(lambda: openssl(files), args.repeats)

        def cold(threads: int) -> Callable[[], object]:
            return lambda: check_checkpoint(root, "big", cache=StatCache(None), threads=threads)

        one = median_seconds(cold(1), args.repeats)
        two = median_seconds(cold(2), args.repeats)
        cache = StatCache(root / "cache.json")
        check_checkpoint(root, "big", cache=cache, threads=2)
        old = time.time_ns() - 10**10  # past the racy window, as for a checkpoint written earlier
        for path in files:
            os.utime(path, ns=(old, old))
        cache = StatCache(root / "cache.json")
        cold_cached = median_seconds(
            lambda: check_checkpoint(root, "big", cache=cache, threads=2), 1
        )
        warm = median_seconds(
            lambda: check_checkpoint(root, "big", cache=cache, threads=2), args.repeats
        )

        small = write_sharded(
            root / "many", max(1, args.shards // 64), args.shards, tensors_per_shard=2
        )

        def listing() -> None:
            for path in small:
                with safe_open(str(path), "np") as handle:
                    list(handle.keys())

        listed = median_seconds(listing, args.repeats)
        inventoried = median_seconds(lambda: load_checkpoint(root / "many"), args.repeats)
        results = {
            "checkpoint_mib": args.size_mib,
            "hash_throughput_1_thread_over_openssl": round(reference / one, 2),
            "hash_throughput_2_threads_over_openssl": round(reference / two, 2),
            "warm_recheck_speedup_over_cold": round(cold_cached / warm, 1),
            "inventory_shards": args.shards,
            "inventory_speed_over_safe_open_listing": round(listed / inventoried, 2),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
