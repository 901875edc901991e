"""Which parser for safetensors headers: the standard library's C JSON decoder, orjson,
or the safetensors library's own listing, on the same header bytes.

Times, in CPU seconds of this process (medians of --repeats, the parsers interleaved),
on the header-only GLM-5.2 key set (about 62,000 names in 64 shards) and on 1,000
shards of 2 and of 64 tensors (bench_checkpoint.py's folders):
  * `json.loads` of every header's bytes (the decoder gates uses);
  * `orjson.loads` of the same bytes, when orjson is installed (it is not a dependency:
    `pip install orjson` to run this part);
  * `safe_open` listing the keys of every shard (its Rust reader, file opening included);
  * gates' canonical scan (one regular expression over the library's compact text, in C:
    the fields of every tensor as strings, no check), the first pass of `parse_header`;
  * `parse_header` itself (every check, the entries built), header by header;
  * `parse_headers`, the same of all headers at once (small ones checked a batch at a
    time), as the inventory calls it.

Usage: python bench/bench_header_parsers.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_checkpoint import listing, write_glm_key_set, write_sharded
from common import report

from gates.safetensors.header import _CANONICAL_ENTRY, parse_header, parse_headers

REPO = Path(__file__).resolve().parent.parent


def headers(shards: list[Path]) -> list[bytes]:
    texts = []
    for path in shards:
        data = path.read_bytes()
        (length,) = struct.unpack_from("<Q", data)
        texts.append(data[8 : 8 + length])
    return texts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "header_parsers.json")
    args = parser.parse_args()
    try:
        import orjson  # noqa: PLC0415
    except ImportError:
        orjson = None  # type: ignore[assignment]
    root = Path(tempfile.mkdtemp(prefix="gates-bench-parsers-"))
    results: dict[str, object] = {"orjson_installed": orjson is not None}
    try:
        sets = {
            "glm52_keys": write_glm_key_set(root / "glm52"),
            "2_tensors": write_sharded(root / "two", 1, 1000, tensors_per_shard=2),
            "64_tensors": write_sharded(root / "sixty-four", 8, 1000, tensors_per_shard=64),
        }
        for label, shards in sets.items():
            texts = headers(shards)
            decoded = [x.decode() for x in texts]
            sizes = [s.stat().st_size for s in shards]
            contenders: dict[str, Callable[[], object]] = {
                "json": lambda t=texts: [json.loads(x) for x in t],  # type: ignore[misc]
                "safe_open": lambda s=shards: listing(s),  # type: ignore[misc]
                "canonical_scan": lambda d=decoded: [_CANONICAL_ENTRY.findall(x, 1) for x in d],  # type: ignore[misc]
                "parse_header": lambda t=texts, z=sizes: [  # type: ignore[misc]
                    parse_header(x, n) for x, n in zip(t, z, strict=True)
                ],
                "parse_headers": lambda t=texts, z=sizes: parse_headers(t, z),  # type: ignore[misc]
            }
            if orjson is not None:
                contenders["orjson"] = lambda t=texts: [orjson.loads(x) for x in t]  # type: ignore[misc]
            samples: dict[str, list[float]] = {name: [] for name in contenders}
            for _ in range(args.repeats):
                for name, action in contenders.items():
                    start = time.process_time()
                    action()
                    samples[name].append(time.process_time() - start)
            median = {name: statistics.median(times) for name, times in samples.items()}
            results[f"{label}_json_s"] = round(median["json"], 3)
            results[f"{label}_safe_open_listing_s"] = round(median["safe_open"], 3)
            results[f"{label}_safe_open_over_json"] = round(median["safe_open"] / median["json"], 2)
            for name in ("canonical_scan", "parse_header", "parse_headers"):
                results[f"{label}_{name}_s"] = round(median[name], 3)
                results[f"{label}_{name}_over_json"] = round(median[name] / median["json"], 2)
            if orjson is not None:
                results[f"{label}_orjson_s"] = round(median["orjson"], 3)
                results[f"{label}_orjson_over_json"] = round(median["orjson"] / median["json"], 2)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
