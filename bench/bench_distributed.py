"""Benchmark verification by the launcher's ranks, and the full-size GLM-5.2 inventory diff.

  * the hashing phase of a --size-mib checkpoint in --shards shards under
    `python -m paddle.distributed.launch --nproc_per_node 2` (each rank hashes
    its share, balanced by bytes, one thread each; rank 0 gathers through the
    TCPStore and merges), as a ratio to one process with 2 hashing threads and
    to `openssl dgst -sha256` on one core, over the same files;
  * the launcher's fixed cost: `gates check checkpoint` of a tiny checkpoint
    under the launcher, less the same command in one process; and the
    checkpoint size above which that cost is under 1% of the hashing time;
  * `gates inventory diff` of the full-size GLM-5.2 key set (header-only
    shards, bench/glm52_keyset.py) against listing the same shards' names,
    dtypes and shapes with `safetensors.safe_open` (both in this process, in CPU seconds,
    which a machine shared with other work disturbs less than wall time).
Files are written first, so every side reads from the page cache. Medians of --repeats;
the diff, the listing and the stripped diff run once a round, interleaved, and their
ratios are the medians of the ratios taken within each round, and (`_lowest`) the
ratios of each one's least time.

Usage: python bench/bench_distributed.py [--size-mib 4096] [--shards 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from itertools import repeat
from operator import add
from pathlib import Path

import orjson
from bench_audit import Step, raw_freeze_git_steps, run_steps
from bench_checkpoint import openssl, write_sharded
from common import (
    interleaved_cpu_seconds,
    lowest_ratio,
    median_cpu_seconds,
    median_of,
    median_seconds,
    report,
    rounded_median_ratio,
    rounded_ratios,
)
from glm52_keyset import load_config, paddle_keyset, reference_keyset, write_header_only
from safetensors import safe_open

from gates.checkpoints.check import check_checkpoint
from gates.checkpoints.digest import hash_shards
from gates.checkpoints.layout import kinds as listed_tensors
from gates.checkpoints.layout import load_checkpoint
from gates.checkpoints.survey import _made, as_json, classify, classify_grouped, extras, survey
from gates.commands.checkpoint import resolve_rules
from gates.commands.inventory import collector_paused, diff, render_text, survey_document
from gates.core.atomic import write_bytes_atomic
from gates.core.canonical import pretty_json_bytes
from gates.core.echo import Output
from gates.core.hashing import StatCache
from gates.core.invocation import read_invocation
from gates.engine.inputs import load_inputs
from gates.naming.by_family import expect_by_family
from gates.naming.config_placeholders import resolve
from gates.naming.grouped import expect_grouped
from gates.naming.rules import RuleSet, expect
from gates.outputs.models import check_output
from gates.outputs.structure_parity import differences_fit
from gates.receipts.model import ArtifactKind
from gates.safetensors.header import _CANONICAL_KIND_ENTRY, _kind
from gates.workspace.repository import open_workspace

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

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


def listing(folders: list[Path]) -> None:
    """Names, dtypes and shapes of every tensor, through safetensors' own reader."""
    for folder in folders:
        for path in sorted(folder.glob("*.safetensors")):
            with safe_open(str(path), "np") as handle:
                for name in handle.keys():  # noqa: SIM118  (safe_open handles are not mappings)
                    piece = handle.get_slice(name)
                    piece.get_dtype()
                    piece.get_shape()


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


def inventory(args: argparse.Namespace, root: Path) -> dict[str, object]:
    config = load_config()
    mtp = config["num_hidden_layers"]
    ws = workspace(root / "inv")
    reference = reference_keyset(config)
    write_header_only(ws / "results/torch/checkpoint", reference)
    (ws / "results/torch/checkpoint/config.json").write_text(json.dumps(config))
    candidate = paddle_keyset(reference, mtp, drop_mtp_indexer=True)
    write_header_only(ws / "results/paddle/checkpoint", candidate)
    folders = [ws / "results/torch/checkpoint", ws / "results/paddle/checkpoint"]
    invocation = read_invocation(os.environ)
    opened = load_inputs(open_workspace(ws, invocation.environment), invocation)
    lines: list[str] = []

    def command() -> None:
        lines.clear()
        diff(
            opened,
            "results/torch/checkpoint",
            "results/paddle/checkpoint",
            rules=None,
            output="outputs/surveys/structure-parity.receipt.json",
            cwd=ws,
            out=Output("text", lines.append),
        )

    ruleset = resolve_rules(opened, None, ws)[0]
    freeze = freeze_steps(ws)
    resolved = resolve(ruleset, [(folders[0], "reference"), (folders[1], "candidate")]).ruleset
    # the three figures the target is written in, interleaved round by round
    rounds = interleaved_cpu_seconds(
        {
            "diff": command,
            "listing": lambda: listing(folders),
            "stripped": paused(lambda: stripped_diff(folders, resolved, ws / "stripped.json")),
            "floor": paused(
                lambda: strict_floor_diff(folders, resolved, ws / "outputs/floor/diff.json", freeze)
            ),
        },
        args.repeats,
    )
    ours, listed, stripped = (median_of(rounds, name) for name in ("diff", "listing", "stripped"))
    reading = median_cpu_seconds(
        lambda: [
            check_checkpoint(f, "", cache=StatCache(None), hash_contents=False) for f in folders
        ],
        args.repeats,
    )
    sides = [check_checkpoint(f, "", cache=StatCache(None), hash_contents=False) for f in folders]
    found = survey(sides[0].checkpoint, sides[1].checkpoint, ruleset)
    with collector_paused():  # as the command runs it
        surveyed = median_cpu_seconds(
            lambda: survey(sides[0].checkpoint, sides[1].checkpoint, ruleset), args.repeats
        )
        # the rules alone, a family at a time (as the survey applies them) and name by name
        placed = listed_tensors(sides[0].checkpoint)
        by_family = median_cpu_seconds(lambda: expect_by_family(placed, resolved), args.repeats)
        by_name = median_cpu_seconds(lambda: expect(placed, resolved), args.repeats)
        grouped = median_cpu_seconds(lambda: expect_grouped(placed, resolved), args.repeats)
        groups = expect_grouped(placed, resolved)
        assert groups is not None, "the shipped rules take the grouped path"
        # the classification alone: the expected tensors against the candidate's
        expected, candidates = (
            expect_by_family(placed, resolved).nodes,
            listed_tensors(sides[1].checkpoint),
        )
        classified = median_cpu_seconds(lambda: classify(expected, candidates), args.repeats)
        classified_grouped = median_cpu_seconds(
            lambda: classify_grouped(groups.groups, candidates), args.repeats
        )
        # the least a survey hands over (no rule applied, no object per tensor but the
        # differences)
        names = list(sides[0].checkpoint.tensors)
        sources = [d.reference[0] for d in found.differences if d.reference]
        objects = median_cpu_seconds(lambda: survey_objects(names, sources), args.repeats)
    parity = survey_document("reference", "candidate", found, ([], []), None)
    where = "outputs/surveys/structure-parity.json"
    vouched = check_output(ArtifactKind.STRUCTURE_PARITY, parity, where)
    written = median_cpu_seconds(lambda: pretty_json_bytes(parity, checked=vouched), args.repeats)
    with collector_paused():  # as the command renders it, from a survey not yet asked
        reported = median_cpu_seconds(lambda: render_text(parity, replace(found)), args.repeats)
    # what the standard library's C encoder takes without indentation (before orjson, the
    # least a JSON writer did; not gates' format)
    compact = median_cpu_seconds(lambda: json.dumps(parity, sort_keys=True), args.repeats)
    on_disk = json.loads((ws / "outputs/surveys/structure-parity.json").read_text())
    stripped_differences = json.loads(stripped_diff(folders, resolved, ws / "stripped.json"))
    same = stripped_differences["differences"] == on_disk["differences"]
    assert same, "the stripped diff hands over the command's differences, in its order"
    floor = strict_floor_diff(folders, resolved, ws / "outputs/floor/diff.json", freeze)
    assert json.loads(floor) == stripped_differences, "the strict floor hands over the same"
    return {
        "glm52_reference_tensors": len(reference),
        "glm52_candidate_tensors": len(candidate),
        "glm52_shards_per_side": len(list(folders[0].glob("*.safetensors"))),
        "glm52_structural": on_disk["counts"]["structural"],
        "glm52_text_output_lines": sum(len(chunk.splitlines()) for chunk in lines),
        "inventory_diff_cpu_seconds": round(ours, 2),
        "inventory_read_both_sides_cpu_seconds": round(reading, 2),
        "safe_open_listing_cpu_seconds": round(listed, 2),
        "inventory_survey_cpu_seconds": round(surveyed, 2),
        "inventory_rules_by_family_cpu_seconds": round(by_family, 2),
        "inventory_rules_by_name_cpu_seconds": round(by_name, 2),
        "inventory_classify_cpu_seconds": round(classified, 2),
        "inventory_rules_grouped_cpu_seconds": round(grouped, 2),
        "inventory_classify_grouped_cpu_seconds": round(classified_grouped, 2),
        "survey_objects_floor_cpu_seconds": round(objects, 2),
        "survey_objects_floor_over_safe_open_listing": round(objects / listed, 2),
        **output_check(parity, where, listed, args.repeats),
        "inventory_write_json_cpu_seconds": round(written, 3),
        "inventory_text_report_cpu_seconds": round(reported, 3),
        "json_dumps_compact_cpu_seconds": round(compact, 2),
        "inventory_read_both_sides_over_safe_open_listing": round(reading / listed, 2),
        "inventory_survey_over_safe_open_listing": round(surveyed / listed, 2),
        "inventory_write_json_over_safe_open_listing": round(written / listed, 2),
        "json_dumps_compact_over_safe_open_listing": round(compact / listed, 2),
        "inventory_diff_over_safe_open_listing": rounded_median_ratio(rounds, "diff", "listing"),
        "stripped_diff_cpu_seconds": round(stripped, 2),
        "stripped_diff_over_safe_open_listing": rounded_median_ratio(rounds, "stripped", "listing"),
        "inventory_diff_over_stripped_diff": rounded_median_ratio(rounds, "diff", "stripped"),
        "inventory_diff_over_safe_open_listing_lowest": lowest_ratio(rounds, "diff", "listing"),
        "stripped_diff_over_safe_open_listing_lowest": lowest_ratio(rounds, "stripped", "listing"),
        "inventory_diff_over_stripped_diff_each_round": rounded_ratios(rounds, "diff", "stripped"),
        "strict_floor_cpu_seconds": round(median_of(rounds, "floor"), 2),
        "strict_floor_over_safe_open_listing": rounded_median_ratio(rounds, "floor", "listing"),
        "strict_floor_over_safe_open_listing_lowest": lowest_ratio(rounds, "floor", "listing"),
        "inventory_diff_over_strict_floor": rounded_median_ratio(rounds, "diff", "floor"),
        "inventory_diff_over_strict_floor_lowest": lowest_ratio(rounds, "diff", "floor"),
        "inventory_diff_over_strict_floor_each_round": rounded_ratios(rounds, "diff", "floor"),
    }


def output_check(
    parity: dict[str, object], where: str, listed: float, repeats: int
) -> dict[str, object]:
    """The output's check against its model, and its check of the differences alone."""
    checked = median_cpu_seconds(
        lambda: check_output(ArtifactKind.STRUCTURE_PARITY, parity, where), repeats
    )
    rows = parity["differences"]
    fit = median_cpu_seconds(lambda: differences_fit(rows), repeats)
    return {
        "inventory_check_output_cpu_seconds": round(checked, 3),
        "inventory_check_output_over_safe_open_listing": round(checked / listed, 2),
        "inventory_check_differences_cpu_seconds": round(fit, 3),
    }


def paused(job: Callable[[], object]) -> Callable[[], None]:
    """``job`` run with the collector paused, as the command runs."""

    def run() -> None:
        with collector_paused():
            job()

    return run


def stripped_diff(folders: list[Path], ruleset: RuleSet, out: Path) -> bytes:
    """The diff with every check taken out, each step by the fastest means measured: each
    shard's header read by one `pread` and split by the canonical scan (no layout, index,
    hygiene or completeness check), each side a name -> (dtype, shape) dict, the grouped
    rules (their placeholders resolved beforehand) and classification, the extras, the
    document written by orjson and hashed (no check against its model, no text report, no
    receipt, no freeze judgement). What is left is what the command hands over, done as
    cheaply as gates knows how (docs/performance.md)."""
    sides = [_stripped_side(folder)[0] for folder in folders]
    written = _stripped_document(sides, ruleset)
    hashlib.sha256(written).hexdigest()
    out.write_bytes(written)
    return written


def strict_floor_diff(
    folders: list[Path], ruleset: RuleSet, out: Path, freeze: tuple[list[Step], Path]
) -> bytes:
    """The stripped diff and what no implementation of the command that keeps its promises
    can leave out, each part by the one library call that does it: each side's index read
    by orjson and its weight_map compared, as one dict, with the name -> shard placing of
    the headers (made by `dict.update` in C); the output written as gates writes every
    output (a temporary file, fsync, rename: `write_bytes_atomic`) and hashed back from the
    disk by hashlib, as its receipt binds the file and not the bytes in memory, between the
    git commands of two freeze judgements of the workspace (``freeze``: the commands and
    the workspace, run raw; the receipt is formal only under a passing freeze before and
    after the hashing). Their children's CPU counts on neither side of the bench's ratios
    (CPU seconds of this process). The floor the target is measured against
    (docs/performance.md, "The floor of a strict diff")."""
    sides = []
    for folder in folders:
        found, placed = _stripped_side(folder)
        index = orjson.loads((folder / "model.safetensors.index.json").read_bytes())
        assert index["weight_map"] == placed, "the bench's index agrees with its headers"
        sides.append(found)
    written = _stripped_document(sides, ruleset)
    write_bytes_atomic(out, written)
    run_steps(*freeze)
    with out.open("rb", buffering=0) as handle:
        hashlib.file_digest(handle, "sha256").hexdigest()
    run_steps(*freeze)
    return written


def freeze_steps(ws: Path) -> tuple[list[Step], Path]:
    """The git commands of one freeze judgement of ``ws`` (bench_audit.py's, as run raw) and
    the folder they run in."""
    pin = subprocess.run(["git", "-C", ws, "rev-parse", "HEAD"], capture_output=True, check=True)
    return raw_freeze_git_steps(pin.stdout.decode().strip()), ws


def _stripped_side(
    folder: Path,
) -> tuple[dict[str, tuple[str, tuple[int, ...]]], dict[str, str]]:
    """One side's name -> (dtype, shape) and name -> shard, every header read by one `pread`
    and split by the canonical scan, nothing checked."""
    found: dict[str, tuple[str, tuple[int, ...]]] = {}
    placed: dict[str, str] = {}
    for path in sorted(folder.glob("*.safetensors")):
        handle = os.open(path, os.O_RDONLY)
        head = os.pread(handle, 1 << 16, 0)
        length = int.from_bytes(head[:8], "little")
        if length + 8 > len(head):
            head = os.pread(handle, length + 8, 0)
        os.close(handle)
        parts = _CANONICAL_KIND_ENTRY.split(head[8 : 8 + length].decode())
        kinds = [_kind(text) for text in parts[2::6]]
        names = parts[1::6]
        found.update(zip(names, [(k[0], k[1]) for k in kinds if k], strict=True))
        placed.update(zip(names, repeat(path.name)))
    return found, placed


def _stripped_document(
    sides: list[dict[str, tuple[str, tuple[int, ...]]]], ruleset: RuleSet
) -> bytes:
    """The grouped rules, their classification and the extras, written by orjson."""
    grouped = expect_grouped(sides[0], ruleset)
    assert grouped is not None, "the shipped rules take the grouped path"
    _, _, differences, names, _ = classify_grouped(grouped.groups, sides[1])
    differences += extras(sides[1], names)
    document = {"differences": as_json(differences), "matched": len(sides[0])}
    return pretty_json_bytes(document, checked=frozenset({"differences"}))


def survey_objects(names: list[str], sources: list[str]) -> None:
    """What any survey hands over, no rule applied: the reference names in order, and a
    difference per tensor the rules change (its detail text joined, the tuple made in C)."""
    ordered = sorted(names)
    tags = ("rule",)
    details = map(add, map(add, sources, repeat(" -> ")), sources)
    made = list(
        map(_made, zip(repeat("naming"), zip(sources), zip(sources), repeat(tags), details))
    )
    del ordered, made


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
