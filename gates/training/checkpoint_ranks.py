"""`gates check checkpoint` under `paddle.distributed.launch`, and the same from a trainer.

Every rank hashes its share of the shards (balanced by bytes) and reports
through the job's TCPStore; rank 0 merges, writes the one output and receipt
(digest equal to a single process's, plus the ``ranks`` split) and publishes
the exit code, which every rank returns. Other ranks write nothing: no
output, no receipt, no stat cache.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gates.checkers.checkpoint_output import bound_files, finish, layout_digest, output_document
from gates.checkpoints.check import CheckpointReport, inspect_checkpoint
from gates.checkpoints.digest import default_threads, hash_shards
from gates.checkpoints.incomplete import changed_while_checked, stat_keys
from gates.checkpoints.ranks import (
    Exchange,
    Merged,
    RankReport,
    RanksError,
    ShardState,
    World,
    balance,
    merge_reports,
    paddle_store,
)
from gates.core import exitcodes
from gates.core.echo import Echo
from gates.core.errors import GatesError
from gates.core.hashing import StatCache
from gates.core.progress import Progress
from gates.engine.inputs import AuditInputs
from gates.workspace.external import Location, locate
from gates.workspace.repository import roots_of

LIST_LIMIT = 5


def _file_digests(
    folder: Path, share: list[str], label: str, cache: StatCache, threads: int
) -> dict[str, str]:
    """sha256 of each shard file (bound below an external root), in parallel, cache first."""
    with ThreadPoolExecutor(max_workers=threads) as pool:
        futures = {
            shard: pool.submit(
                cache.digest, f"{label}/{shard}", folder / shard, (folder / shard).stat()
            )
            for shard in share
        }
        return {shard: future.result().sha256 for shard, future in futures.items()}


def _hash_share(
    location: Location,
    report: CheckpointReport,
    world: World,
    plan: list[list[str]],
    *,
    cache: StatCache,
    threads: int | None,
    bind_files: bool,
    progress: Progress,
) -> RankReport:
    """This rank's share: tensor contents, and each shard's stat (and sha256 when bound).

    ``cache`` is read (unchanged shards are not read again) but only rank 0 saves it.
    """
    share = plan[world.rank]
    digest = layout_digest(report)
    if not report.valid:
        return RankReport(world.rank, report.path, digest, share)
    folder = location.path
    workers = threads or max(1, default_threads() // world.local_size)
    before = stat_keys(folder, share)
    contents = hash_shards(
        report.checkpoint,
        share,
        cache=cache,
        cache_prefix=report.path,
        threads=workers,
        progress=progress,
    )
    sha256 = _file_digests(folder, share, report.path, cache, workers) if bind_files else {}
    files = {
        shard: ShardState(size, mtime, sha256.get(shard)) for shard, (size, mtime) in before.items()
    }
    changed = changed_while_checked(before, stat_keys(folder, share))
    if changed:
        return RankReport(world.rank, report.path, digest, share, error="; ".join(changed))
    return RankReport(world.rank, report.path, digest, share, contents, files)


def _remember(
    location: Location, report: CheckpointReport, merged: Merged, cache: StatCache
) -> list[str]:
    """Keep the ranks' answers (each shard's tensor digests, and its file sha256 when bound)
    in rank 0's cache; a shard rank 0 now sees differently is named."""
    changed = []
    for shard, state in sorted(merged.files.items()):
        path = location.path / shard
        try:
            info = path.stat()
        except OSError:
            changed.append(f"shard {shard} disappeared after it was hashed")
            continue
        if (info.st_size, info.st_mtime_ns) != (state.size, state.mtime_ns):
            changed.append(f"shard {shard} changed after it was hashed: still being written?")
            continue
        key = f"{location.label}/{shard}"
        names = report.checkpoint.shards[shard].tensors
        digests = {name: merged.contents[name] for name in names}
        cache.remember("shards", key, path, info, json.dumps(digests, sort_keys=True))
        if location.external and state.sha256:
            cache.remember("files", key, path, info, state.sha256)
    return changed


def _merged_report(report: CheckpointReport, merged: Merged, late: list[str]) -> CheckpointReport:
    if late:
        report.checkpoint.problems.extend(f"incomplete: {finding}" for finding in late)
    return CheckpointReport(
        report.path,
        report.checkpoint,
        report.hygiene,
        merged.contents,
        tuple(sorted(merged.files)),
        report.incomplete + tuple(late),
    )


def check_by_ranks(
    audit: AuditInputs,
    folder: str,
    world: World,
    *,
    cwd: Path,
    threads: int | None,
    output: str,
    timeout_s: float,
    as_json: bool,
    echo: Echo,
) -> int:
    """This rank's part of a distributed check; every rank returns rank 0's exit code.

    A rank that cannot even find the checkpoint (e.g. its root's variable is unset on
    that node) still reports, so rank 0 names it instead of waiting for the timeout.
    """
    workspace = audit.workspace
    exchange = Exchange(paddle_store(), world)
    try:
        location = locate(roots_of(workspace), folder, cwd)
    except GatesError as exc:
        exchange.report(RankReport(world.rank, folder, "", [], error=exc.one_line()))
        if world.rank == 0:
            exchange.publish_verdict(exitcodes.ERROR)
        else:
            exchange.leave_without_verdict()
        raise
    checkpoint, findings, incomplete = inspect_checkpoint(location.path)
    report = CheckpointReport(location.label, checkpoint, findings, {}, (), incomplete)
    sizes = {name: header.file_size for name, header in checkpoint.shards.items()}
    plan = balance(sizes, world.size)
    bind = location.external
    try:
        mine = _hash_share(
            location,
            report,
            world,
            plan,
            cache=audit.cache,
            threads=threads,
            bind_files=bind,
            progress=audit.invocation.progress,
        )
    except Exception as exc:  # noqa: BLE001  (any failure must reach rank 0, which names this rank)
        mine = RankReport(
            world.rank,
            location.label,
            layout_digest(report),
            plan[world.rank],
            error=f"{type(exc).__name__}: {exc}",
        )
    exchange.report(mine)
    if world.rank != 0:
        code = exchange.await_verdict(timeout_s)
        return exitcodes.ERROR if code is None else code
    code = exitcodes.ERROR
    try:
        code = _conclude(
            audit,
            location,
            report,
            plan,
            exchange,
            output=output,
            timeout_s=timeout_s,
            as_json=as_json,
            echo=echo,
        )
    finally:  # the other ranks wait for this, whatever happened here
        exchange.publish_verdict(code)
    return code


def _conclude(
    audit: AuditInputs,
    location: Location,
    report: CheckpointReport,
    plan: list[list[str]],
    exchange: Exchange,
    *,
    output: str,
    timeout_s: float,
    as_json: bool,
    echo: Echo,
) -> int:
    reports = exchange.gather(timeout_s)
    merged = merge_reports(
        plan,
        reports,
        label=location.label,
        layout_digest=layout_digest(report),
        timeout_s=timeout_s,
    )
    cache = audit.cache
    late = _remember(location, report, merged, cache) if report.valid else []
    cache.save()
    final = _merged_report(report, merged, late)
    if report.valid and len(final.contents) != len(report.checkpoint.shard_of):
        raise RanksError(
            f"the ranks hashed {len(final.contents)} tensors, the checkpoint has "
            f"{len(report.checkpoint.shard_of)}"
        )
    document = output_document(final, "full")
    document["ranks"] = merged.ranks
    failed = not final.valid or bool(final.hygiene)
    subjects = bound_files(location, final)
    return finish(audit, document, output, subjects, failed=failed, as_json=as_json, echo=echo)
