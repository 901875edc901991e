"""Benchmark checkpoint hashing and inventory, as ratios to reference tools on the same files.

  * hashing throughput of `check_checkpoint` (canonical digests) on a checkpoint of
    --size-mib MiB in 8 shards, with 1 and 2 threads, against `openssl dgst -sha256`
    over the same files (one process: the per-core limit of SHA-256 here);
  * a warm re-check (stat cache filled) against the cold check;
  * the inventory (headers only, with index cross-checks) of --shards small shards of 2 and
    of 64 tensors, and of a header-only copy of the GLM-5.2 key set (78 layers, 256 routed
    experts: about 60,000 names in 64 shards), against listing the same shards with
    `safetensors.safe_open`; and two floors against the same listing: reading each header
    and `json.loads` alone (a reader built on Python's JSON decoder), and the least a
    reader that hands over one object per tensor does (each header's fields in one C
    pass of the canonical regular expression, the entries and placed tensors built, the
    index parsed; no check at all), and the system calls alone (each file opened, its first
    64 KiB read, closed: what any reader of the files pays).
Files are written first, so both sides read from the page cache. Medians of --repeats.

Usage: python bench/bench_checkpoint.py [--size-mib 2048] [--shards 1000] [--repeats 3]
                                        [--inventory-only]
The inventory figures are CPU seconds of this process (both sides run in it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from itertools import repeat
from pathlib import Path

import numpy as np
from common import median_cpu_seconds, median_seconds, report
from safetensors import safe_open
from safetensors.numpy import save_file

from gates.checkpoints.check import check_checkpoint
from gates.checkpoints.layout import INDEX_NAME, Located, json_loads_exactly, load_checkpoint
from gates.core.hashing import StatCache
from gates.core.rows import as_rows
from gates.safetensors.header import _CANONICAL_ENTRY, FIRST_READ, OPEN_FLAGS, new_entries

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


def write_glm_key_set(folder: Path, shards: int = 64) -> list[Path]:
    """Header-only copy of the GLM-5.2 names: every tensor one byte, so only headers count."""
    names = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]
    attention = [
        "input_layernorm.weight",
        "post_attention_layernorm.weight",
        "self_attn.q_a_proj.weight",
        "self_attn.q_a_layernorm.weight",
        "self_attn.q_b_proj.weight",
        "self_attn.kv_a_proj_with_mqa.weight",
        "self_attn.kv_a_layernorm.weight",
        "self_attn.kv_b_proj.weight",
        "self_attn.o_proj.weight",
        "self_attn.indexer.wq_b.weight",
        "self_attn.indexer.wk.weight",
        "self_attn.indexer.k_norm.weight",
        "self_attn.indexer.weights_proj.weight",
    ]
    for layer in range(79):  # 78 decoder layers and the MTP layer
        prefix = f"model.layers.{layer}"
        names += [f"{prefix}.{name}" for name in attention]
        names += [f"{prefix}.mlp.gate.weight", f"{prefix}.mlp.gate.e_score_correction_bias"]
        names += [
            f"{prefix}.mlp.{part}.{proj}.weight"
            for part in ("shared_experts", *(f"experts.{e}" for e in range(256)))
            for proj in ("gate_proj", "up_proj", "down_proj")
        ]
    folder.mkdir(parents=True)
    weight_map = {}
    for shard in range(shards):
        name = f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
        chosen = names[shard::shards]
        save_file({n: np.zeros(1, np.uint8) for n in chosen}, str(folder / name))
        weight_map.update(dict.fromkeys(chosen, name))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return sorted(folder.glob("*.safetensors"))


def listing(shards: list[Path]) -> None:
    for path in shards:
        with safe_open(str(path), "np") as handle:
            list(handle.keys())


def json_only(shards: list[Path]) -> None:
    """The floor of a Python reader: read each header and parse it, nothing else."""
    for path in shards:
        with path.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            json.loads(handle.read(length))


def objects_floor(shards: list[Path]) -> None:
    """The floor of a reader that keeps one object per tensor: no check, no JSON decoder."""
    placed: dict[str, Located] = {}
    for path in shards:
        with path.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            rows = _CANONICAL_ENTRY.findall(handle.read(length).decode(), 1)
        names, dtypes, shapes, starts, ends, _ = zip(*rows, strict=True)
        dims = {s: tuple(map(int, s.split(","))) for s in set(shapes)}
        shaped = map(dims.__getitem__, shapes)
        fields = zip(names, dtypes, shaped, map(int, starts), map(int, ends), strict=True)
        entries = new_entries(fields)  # tuple.__new__, as the reader builds them
        located = as_rows(Located, zip(repeat(path.name), entries))
        placed.update(zip(names, located, strict=True))
    json_loads_exactly((shards[0].parent / INDEX_NAME).read_bytes())  # as the reader does


def syscalls_floor(shards: list[Path]) -> None:
    """What reading the files costs before any header is looked at: open, pread, close."""
    for path in map(str, shards):
        fd = os.open(path, OPEN_FLAGS)
        os.pread(fd, FIRST_READ, 0)
        os.close(fd)


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
    parser.add_argument("--inventory-only", action="store_true", help="skip the hashing part")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gates-bench-ckpt-"))
    results: dict[str, object] = {"inventory_shards": args.shards}
    try:
        if not args.inventory_only:
            results.update(hashing(root, args))
        folders = {
            "2_tensors": write_sharded(root / "two", 1, args.shards, tensors_per_shard=2),
            "64_tensors": write_sharded(root / "sixty-four", 8, args.shards, tensors_per_shard=64),
            "glm52_keys": write_glm_key_set(root / "glm52"),
        }
        # CPU seconds: both sides run in this process (safe_open's Rust reader included)
        for label, shards in folders.items():
            listed = median_cpu_seconds(lambda s=shards: listing(s), args.repeats)  # type: ignore[misc]
            folder = shards[0].parent
            inventoried = median_cpu_seconds(lambda f=folder: load_checkpoint(f), args.repeats)  # type: ignore[misc]
            floor = median_cpu_seconds(lambda s=shards: json_only(s), args.repeats)  # type: ignore[misc]
            objects = median_cpu_seconds(lambda s=shards: objects_floor(s), args.repeats)  # type: ignore[misc]
            calls = median_cpu_seconds(lambda s=shards: syscalls_floor(s), args.repeats)  # type: ignore[misc]
            results[f"inventory_{label}_over_safe_open_listing"] = round(listed / inventoried, 2)
            results[f"json_loads_floor_{label}_over_safe_open_listing"] = round(listed / floor, 2)
            results[f"objects_floor_{label}_over_safe_open_listing"] = round(listed / objects, 2)
            results[f"inventory_{label}_over_objects_floor"] = round(objects / inventoried, 2)
            results[f"syscalls_floor_{label}_over_safe_open_listing"] = round(listed / calls, 2)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(results, args.out)
    return 0


def hashing(root: Path, args: argparse.Namespace) -> dict[str, object]:
    """Hashing throughput against openssl, and the warm re-check against the cold one."""
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
    cold_cached = median_seconds(lambda: check_checkpoint(root, "big", cache=cache, threads=2), 1)
    warm = median_seconds(
        lambda: check_checkpoint(root, "big", cache=cache, threads=2), args.repeats
    )

    return {
        "checkpoint_mib": args.size_mib,
        "hash_throughput_1_thread_over_openssl": round(reference / one, 2),
        "hash_throughput_2_threads_over_openssl": round(reference / two, 2),
        "warm_recheck_speedup_over_cold": round(cold_cached / warm, 1),
    }


if __name__ == "__main__":
    sys.exit(main())
