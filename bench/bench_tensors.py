"""Benchmark `gates check tensors` as ratios on the same files.

  * plain: two dump folders of --size-mib MiB each, identical content, same layout
    (F32 gradients, --tensor-mib MiB tensors, one grad.safetensors per step), compared
    through no rules, against `cmp` over the same file pairs (target: >= 1x);
  * rules: the same bytes with the reference in torch layout ([out, in], gate and up
    apart) and the candidate in Paddle layout (transposed, gate/up fused along axis 1),
    compared through transpose and fuse rules, against the plain case (target: >= 0.5x);
  * the floor of the rules case: reading the reference tensors once and transposing
    them with numpy (no comparison), whole and tile by tile (cache-blocked), against the
    plain case;
  * cast: the reference's tensors in BF16, the candidate's the same values in F32 (as a
    BF16 -> F32 cast gives them), compared through a cast rule, against the plain case;
  * memory: the peak RSS of a process doing each comparison, against one tensor's size
    and the dump's size (bounded by a few tensors, never a whole dump).
Files are written first, so both sides read from the page cache. Medians of --repeats.

Usage: python bench/bench_tensors.py [--size-mib 1024] [--tensor-mib 16] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from common import OUT, median_seconds, report

from gates.naming.rules import RuleSet
from gates.safetensors.header import read_header
from gates.tensors.compare import Selection, compare_dumps
from gates.tensors.layout import open_dump
from gates.tensors.writer import RawTensor, write_step

PROJECTIONS = "{prefix}.{proj:gate_proj|up_proj|down_proj}.weight"
RULES: dict[str, dict[str, object]] = {
    "plain": {},
    "layouts": {
        "rules": [
            {"kind": "transpose", "match": PROJECTIONS},
            {
                "kind": "fuse",
                "sources": ["{prefix}.gate_proj.weight", "{prefix}.up_proj.weight"],
                "target": "{prefix}.up_gate_proj.weight",
                "axis": 1,
            },
        ]
    },
    "cast": {"rules": [{"kind": "cast", "match": PROJECTIONS, "dtype": "F32"}]},
}


def _f32(name: str, array: np.ndarray) -> RawTensor:
    return RawTensor(name, "F32", tuple(array.shape), np.ascontiguousarray(array).tobytes())


def _bf16(name: str, array: np.ndarray) -> RawTensor:
    truncated = (array.view(np.uint32) >> 16).astype(np.uint16)
    return RawTensor(name, "BF16", tuple(array.shape), truncated.tobytes())


def _widened(name: str, array: np.ndarray) -> RawTensor:
    """The F32 tensor a BF16 -> F32 cast makes of `_bf16`'s."""
    return _f32(name, (array.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32))


def write_pair(root: Path, size_mib: int, tensor_mib: int, *, kind: str) -> tuple[Path, Path]:
    """Two dumps of equal content: the same (plain), torch against Paddle layout
    (layouts), BF16 against the F32 of the same values (cast)."""
    rng = np.random.default_rng(0)
    side = int((tensor_mib * 1024 * 1024 // 4) ** 0.5)  # square F32 tensors
    per_step = 12  # four layers of gate, up, down
    steps = max(1, size_mib // (tensor_mib * per_step))
    ref, cand = root / "ref", root / "cand"
    for step in range(1, steps + 1):
        ref_tensors, cand_tensors = [], []
        for layer in range(per_step // 3):
            prefix = f"model.layers.{layer}.mlp"
            gate, up, down = (rng.standard_normal((side, side), dtype=np.float32) for _ in range(3))
            named = [
                (f"{prefix}.{proj}_proj.weight", t)
                for proj, t in zip(PARTS, (gate, up, down), strict=True)
            ]
            ref_tensors += [(_bf16 if kind == "cast" else _f32)(n, t) for n, t in named]
            if kind == "cast":
                cand_tensors += [_widened(n, t) for n, t in named]
            elif kind == "layouts":
                fused = np.concatenate([gate.T, up.T], axis=1)
                cand_tensors += [
                    _f32(f"{prefix}.up_gate_proj.weight", fused),
                    _f32(f"{prefix}.down_proj.weight", down.T),
                ]
            else:
                cand_tensors = ref_tensors
        for folder, tensors in ((ref, ref_tensors), (cand, cand_tensors)):
            order = [("grad", t.name) for t in tensors]
            write_step(folder / "tensors", step, {"grad": tensors}, order, framework="bench")
    return ref, cand


PARTS = ("gate", "up", "down")


def compare(ref: Path, cand: Path, rules: str) -> None:
    ruleset = RuleSet.model_validate(RULES[rules])
    found = compare_dumps(
        open_dump(ref, "ref"), open_dump(cand, "cand"), ruleset, Selection(phases=("grad",))
    )
    if not found.aligned:
        raise SystemExit(f"not aligned: {found.totals()} {found.problems[:3]}")


def transpose_floor(ref: Path) -> None:
    """Read every reference tensor once and transpose-copy it with numpy: what moving the
    same bytes into the other layout costs here, without comparing anything."""
    for path in sorted((ref / "tensors").rglob("grad.safetensors")):
        header = read_header(path)
        with path.open("rb") as handle:
            for entry in header.tensors.values():
                handle.seek(header.data_start + entry.start)
                data = np.frombuffer(handle.read(entry.nbytes), "<u4").reshape(entry.shape)
                np.ascontiguousarray(data.T)


def blocked_transpose_floor(ref: Path) -> None:
    """The same, transposed tile by tile (256 x 256 elements) into one reused array: the
    cache-blocked copy, faster than numpy's transpose of a whole array; the floor of any
    comparison that must bring one layout into the other, in numpy."""
    out = np.empty(0, "<u4")
    for path in sorted((ref / "tensors").rglob("grad.safetensors")):
        header = read_header(path)
        with path.open("rb") as handle:
            for entry in header.tensors.values():
                handle.seek(header.data_start + entry.start)
                data = np.frombuffer(handle.read(entry.nbytes), "<u4").reshape(entry.shape)
                if out.size < data.size:
                    out = np.empty(data.size, "<u4")
                target = out[: data.size].reshape(data.shape[::-1])
                source = data.T
                for i in range(0, target.shape[0], 256):
                    for j in range(0, target.shape[1], 256):
                        target[i : i + 256, j : j + 256] = source[i : i + 256, j : j + 256]


def cmp_all(ref: Path, cand: Path) -> None:
    for left in sorted((ref / "tensors").rglob("grad.safetensors")):
        right = cand / left.relative_to(ref)
        subprocess.run(["cmp", "-s", str(left), str(right)], check=True)


def peak_rss_mib(ref: Path, cand: Path, rules: str) -> float:
    """Peak RSS of a fresh process that does one comparison (and its imports)."""
    code = (
        "import sys; sys.path.insert(0, 'bench'); import bench_tensors as b; "
        f"b.compare(__import__('pathlib').Path({str(ref)!r}), "
        f"__import__('pathlib').Path({str(cand)!r}), {rules!r}); "
        # VmHWM: this process's own peak (ru_maxrss would inherit the parent's at fork)
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    return int(done.stdout.split()[-1]) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--tensor-mib", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-tensors-"))
    try:
        plain_ref, plain_cand = write_pair(
            work / "plain", args.size_mib, args.tensor_mib, kind="plain"
        )
        rules_ref, rules_cand = write_pair(
            work / "rules", args.size_mib, args.tensor_mib, kind="layouts"
        )
        cast_ref, cast_cand = write_pair(work / "cast", args.size_mib, args.tensor_mib, kind="cast")
        size = sum(p.stat().st_size for p in (plain_ref / "tensors").rglob("*.safetensors"))
        cmp_all(plain_ref, plain_cand)  # warm the page cache for both
        compare(rules_ref, rules_cand, "layouts")  # and check the rules cases are aligned
        compare(cast_ref, cast_cand, "cast")
        t_cmp = median_seconds(lambda: cmp_all(plain_ref, plain_cand), args.repeats)
        t_plain = median_seconds(lambda: compare(plain_ref, plain_cand, "plain"), args.repeats)
        t_rules = median_seconds(lambda: compare(rules_ref, rules_cand, "layouts"), args.repeats)
        t_cast = median_seconds(lambda: compare(cast_ref, cast_cand, "cast"), args.repeats)
        t_floor = median_seconds(lambda: transpose_floor(rules_ref), args.repeats)
        t_blocked = median_seconds(lambda: blocked_transpose_floor(rules_ref), args.repeats)
        results: dict[str, object] = {
            "dump_mib": round(size / 2**20),
            "tensor_mib": args.tensor_mib,
            "cmp_s": round(t_cmp, 3),
            "plain_s": round(t_plain, 3),
            "rules_s": round(t_rules, 3),
            "plain_vs_cmp": round(t_cmp / t_plain, 2),
            "rules_vs_plain": round(t_plain / t_rules, 2),
            "transpose_copy_s": round(t_floor, 3),
            "transpose_copy_vs_plain": round(t_plain / t_floor, 2),
            "blocked_transpose_copy_s": round(t_blocked, 3),
            "blocked_transpose_copy_vs_plain": round(t_plain / t_blocked, 2),
            "rules_vs_blocked_transpose_copy": round(t_blocked / t_rules, 2),
            "cast_s": round(t_cast, 3),
            "cast_vs_plain": round(t_plain / t_cast, 2),
            "plain_peak_rss_mib": round(peak_rss_mib(plain_ref, plain_cand, "plain")),
            "rules_peak_rss_mib": round(peak_rss_mib(rules_ref, rules_cand, "layouts")),
            "cast_peak_rss_mib": round(peak_rss_mib(cast_ref, cast_cand, "cast")),
        }
        report(results, OUT / "bench_tensors.json")
        print(json.dumps({"throughput_plain_mib_s": round(size / 2**20 / t_plain)}))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
