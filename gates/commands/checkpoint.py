"""`gates check checkpoint`: validity, hygiene, tensor count and canonical digest of one
checkpoint; against a reference through the naming rules; by slices and merged."""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gates.checkers.checkpoint_output import (
    RENDERERS,
    CheckpointChecked,
    bound_files,
    checked,
    output_document,
    written,
)
from gates.checkers.outputs import write_checker_output
from gates.checkpoints.check import ShardRange, check_checkpoint, compare_pair
from gates.checkpoints.digest import checkpoint_digest, default_threads
from gates.checkpoints.ranks import DEFAULT_TIMEOUT_S, launcher_world
from gates.contracts.model import EvaluationError
from gates.contracts.tensor_inventory import Absence, judge_absent, parse_params, probe_evidence
from gates.core import exitcodes
from gates.core.content_ids import strict_loads
from gates.core.echo import Echo, Output
from gates.core.errors import ConfigError, GatesError, UnsafePathError
from gates.core.hashing import StatCache
from gates.core.invocation import read_invocation
from gates.core.paths import to_workspace_relpath
from gates.core.resources import validator
from gates.engine.audit import judge_workspace
from gates.engine.inputs import AuditInputs, load_inputs
from gates.naming.rulefile import INVENTORY_CHECK, ContractRules
from gates.policy.rulesets import rules_for
from gates.receipts.judge_all import Wanted
from gates.receipts.model import ArtifactKind
from gates.receipts.verify import Judgement, Status
from gates.workspace.external import Location, locate
from gates.workspace.repository import Workspace, open_workspace, roots_of


def inventory_rules(audit: AuditInputs, rules: str | None, cwd: Path) -> ContractRules:
    """The tensor-inventory contract's rules, or the contract file given with --rules, found
    as every command finds it."""
    return rules_for(audit.policy, INVENTORY_CHECK, rules, cwd, audit.workspace.root)


@dataclass(frozen=True)
class Declared:
    """What an inventory contract declares beside its rules, judged as the audit judges it:
    the reference tensors its evidence explains as absent, and whether the candidate saves
    in the reference's layout."""

    absence: Absence
    saved_layout: bool = False


def inventory_declarations(audit: AuditInputs, found: ContractRules) -> Declared:
    """The `expected_absent` (explained by a formal consumption probe, as the contract
    judges it) and `saved_layout` of the inventory contract the rules come from; nothing
    from a contract of another check."""
    if found.check != INVENTORY_CHECK:
        return Declared(Absence())
    try:
        params = parse_params(found.params)
    except EvaluationError as exc:
        raise ConfigError(str(exc), file=found.source) from None
    absence = Absence()
    if params.expected_absent:
        probe = params.consumption_probe
        judged = judge_workspace(audit, wanted=Wanted(files=(probe,)))
        evidence = probe_evidence(judged.receipts, audit.workspace.root, probe)
        absence = judge_absent(params, evidence)
    return Declared(absence, params.saved_layout == "reference")


def check(
    audit: AuditInputs,
    folder: str,
    *,
    against: str | None,
    rules: str | None,
    shard_range: ShardRange | None,
    threads: int | None,
    output: str,
    cwd: Path,
    out: Output,
    rank_timeout: float = DEFAULT_TIMEOUT_S,
) -> int:
    """Exit 1 when the checkpoint is invalid or unclean, or differs from ``against``.

    Under `paddle.distributed.launch` (world size > 1) the launcher's ranks share the work.
    """
    world = launcher_world(audit.invocation.launcher)
    if world.size > 1:
        if shard_range or against:
            raise GatesError(
                "under paddle.distributed.launch the ranks split the shards themselves: "
                "no --shard-range or --against"
            )
        from gates.training import checkpoint_ranks  # noqa: PLC0415  (loads Paddle)

        return checkpoint_ranks.check_by_ranks(
            audit,
            folder,
            world,
            cwd=cwd,
            threads=threads,
            output=output,
            timeout_s=rank_timeout,
            as_json=out.as_json,
            echo=out.echo,
        )
    result = checkpoint_check(
        audit,
        folder,
        against=against,
        rules=rules,
        shard_range=shard_range,
        threads=threads,
        output=output,
        cwd=cwd,
    )
    out.render(RENDERERS, result)
    return exitcodes.BLOCKED if result.failed else exitcodes.OK


def checkpoint_check(
    audit: AuditInputs,
    folder: str,
    *,
    against: str | None,
    rules: str | None,
    shard_range: ShardRange | None,
    threads: int | None,
    output: str,
    cwd: Path,
) -> CheckpointChecked:
    """One process checks the checkpoint (a slice of it, or against a reference) and writes
    the output and its receipt."""
    roots = roots_of(audit.workspace)
    location = locate(roots, folder, cwd)
    for given, found in (
        (folder, location),
        *(((against, locate(roots, against, cwd)),) if against else ()),
    ):
        if not found.path.is_dir():
            raise GatesError(
                f"no checkpoint folder {given}: nothing checked, nothing written",
                hint="check the path (a typo must not replace a committed output)",
            )
    cache = audit.cache
    report = check_checkpoint(
        location.base,
        location.relpath,
        cache=cache,
        threads=threads,
        shard_range=shard_range,
        label=location.label,
        progress=audit.invocation.progress,
    )
    document = output_document(report, "partial" if shard_range else "full")
    if shard_range:
        document["shard_range"] = {
            "index": shard_range.index,
            "count": shard_range.count,
            "shards": list(report.shards_hashed),
        }
        document["tensor_contents"] = report.contents
    failed = not report.valid or bool(report.hygiene)
    if against and not shard_range:
        found = inventory_rules(audit, rules, cwd)
        declared = inventory_declarations(audit, found)
        other = locate(roots, against, cwd)
        reference = check_checkpoint(
            other.base,
            other.relpath,
            cache=cache,
            threads=threads,
            label=other.label,
            progress=audit.invocation.progress,
        )
        pair = compare_pair(
            reference,
            report,
            found.ruleset,
            absent=declared.absence.explained,
            saved_layout=declared.saved_layout,
        )
        document["against"] = {
            "reference": reference.path,
            "reference_digest": reference.digest,
            **pair.figures(),
        }
        failed = failed or not pair.figures()["hash_match"]
    subjects = bound_files(location, report) if not shard_range else ()
    remember_file_digests(location, subjects, cache, threads)
    cache.save()
    return written(audit, document, output, subjects, failed=failed)


def remember_file_digests(
    location: Location, subjects: tuple[str, ...], cache: StatCache, threads: int | None
) -> None:
    """sha256 the bound external files in parallel now, so the receipt finds them in the cache."""
    if not subjects:
        return
    with ThreadPoolExecutor(max_workers=threads or default_threads()) as pool:
        futures = []
        for subject in subjects:
            path = location.path / subject.removeprefix(location.label + "/")
            futures.append(pool.submit(cache.digest, subject, path, path.stat()))
        for future in futures:
            future.result()


def _partial(
    workspace: Workspace, relpath: str, judgements: tuple[Judgement, ...]
) -> tuple[Judgement, dict[str, Any]]:
    judgement = next((j for j in judgements if j.path == relpath), None)
    if judgement is None or judgement.receipt is None or judgement.status is Status.REJECTED:
        reason = judgement.reason if judgement else "not found under the evidence locations"
        raise GatesError(f"not an accepted receipt: {reason}", file=relpath)
    subject = judgement.receipt.subjects[0].path
    document = strict_loads((workspace.root / subject).read_bytes())
    errors = list(validator("checkpoint_check").iter_errors(document))
    if errors or document.get("mode") != "partial":
        raise GatesError("not a partial checkpoint_check output (--shard-range)", file=subject)
    return judgement, document


def merge(
    audit: AuditInputs,
    receipts: tuple[str, ...],
    *,
    output: str,
    cwd: Path,
    out: Output,
) -> int:
    """Combine the partial outputs of every slice 0..n-1 of one checkpoint into one digest."""
    workspace = audit.workspace
    relpaths = []
    for given in receipts:  # one outside the workspace is refused below, in its turn
        with contextlib.suppress(UnsafePathError):
            relpaths.append(to_workspace_relpath(workspace.root, given, cwd))
    judged = judge_workspace(audit, wanted=Wanted(receipts=tuple(relpaths)))
    judgements = judged.receipts
    parts = [
        _partial(workspace, to_workspace_relpath(workspace.root, r, cwd), judgements)
        for r in receipts
    ]
    documents = [document for _, document in parts]
    first = documents[0]
    same = ("path", "layout_digest", "valid", "hygiene_clean", "tensor_count", "shard_count")
    for document in documents[1:]:
        different = [key for key in same if document[key] != first[key]]
        if different:
            raise GatesError(
                f"the slices describe different checkpoints ({', '.join(different)} differ)"
            )
    count = first["shard_range"]["count"]
    indexes = sorted(d["shard_range"]["index"] for d in documents)
    if indexes != list(range(count)):
        raise GatesError(f"need each slice 0..{count - 1} exactly once, got {indexes}")
    contents: dict[str, str] = {}
    for document in documents:
        contents.update(document["tensor_contents"])
    if len(contents) != first["tensor_count"]:
        raise GatesError(
            f"the slices hash {len(contents)} tensors, the checkpoint has {first['tensor_count']}"
        )
    merged: dict[str, object] = {
        k: v for k, v in first.items() if k not in ("shard_range", "tensor_contents")
    }
    merged.update(mode="merged", digest=checkpoint_digest(contents) if first["valid"] else None)
    inputs: list[tuple[str, Judgement | None]] = [(j.path, j) for j, _ in parts]
    receipt, artifact = write_checker_output(
        audit, output, ArtifactKind.CHECKPOINT_CHECK, merged, inputs, judged_under=judged.freeze
    )
    failed = not (first["valid"] and first["hygiene_clean"])
    throwaway = audit.invocation.checker.no_receipt
    out.render(RENDERERS, checked(receipt, artifact, merged, failed=failed, throwaway=throwaway))
    return exitcodes.BLOCKED if failed else exitcodes.OK


def verify_saved_checkpoint(
    folder: str | Path,
    *,
    workspace: str | Path = ".",
    output: str = "outputs/checkpoint_check.receipt.json",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    threads: int | None = None,
    echo: Echo | None = None,
) -> int:
    """Check a checkpoint the job has just saved, by the job's own ranks; call on every rank.

    Call it after the save on every rank of the job (after ``init_parallel_env``;
    it calls that itself when needed), so the ranks that wrote the shards hash
    them while they are still in the page cache. Rank 0 writes the output and
    its receipt; every rank returns rank 0's exit code (0 valid and clean, 1
    not, 2 error). In a single process it is `gates check checkpoint FOLDER`.
    """
    invocation = read_invocation(os.environ)
    return check(
        load_inputs(open_workspace(Path(workspace), invocation.environment), invocation),
        str(folder),
        against=None,
        rules=None,
        shard_range=None,
        threads=threads,
        output=output,
        cwd=Path.cwd(),
        out=Output("text", echo or print),
        rank_timeout=timeout_s,
    )
