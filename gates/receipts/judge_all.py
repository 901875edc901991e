"""Every receipt of the workspace, found and judged in one place.

Discovery (every `*.receipt.json` under the evidence locations, symlinked folders
refused), judging each one (through the audit index: an unchanged receipt is not read
again), and the rules that look across receipts: recomputed loss checks, captures
checked against the run that bound them, the code in force, and settlement (a derived
receipt is no better than its inputs; run outputs count only through a run attestation
of their side's declared entrypoint).

A checker judges only what it needs (`Wanted`): the receipts that bind its input files,
closed under every rule that looks across receipts, so that each of them is judged exactly
as the whole audit judges it.
"""

from __future__ import annotations

import functools
import json
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gates import __version__
from gates.core.hashing import stat_key
from gates.core.progress import QUIET, Progress
from gates.receipts.binding import (
    Entrypoints,
    IsolationPolicy,
    is_run,
    needs_run,
    run_covers,
    run_problems,
)
from gates.receipts.crosscheck import CHECKED_KINDS, capture_problem
from gates.receipts.derive import loss_check_problem
from gates.receipts.index import AuditIndex
from gates.receipts.kinds import ArtifactKind
from gates.receipts.model import RECEIPT_SUFFIX, Receipt
from gates.receipts.verify import Judgement, JudgingContext, Status, judge


class CodeCheck(Protocol):
    """Why a formal receipt's side's code is not the code in force (None when it is)."""

    def problem(self, receipt: Receipt) -> str | None: ...


def discover_receipts(root: Path, locations: tuple[str, ...]) -> tuple[list[str], list[Judgement]]:
    """Workspace paths of every `*.receipt.json` under the evidence locations, sorted.

    Symlinked folders are not followed: each is returned as a rejected entry.
    Symlinked receipt files are listed, so that judging rejects them by name.
    """
    found: list[str] = []
    refused: list[Judgement] = []
    for location in locations:
        base = root / location
        if base.is_symlink():
            refused.append(_refused(location, "evidence location is a symlink: not followed"))
            continue
        unreadable: list[OSError] = []
        for folder, dirnames, filenames in os.walk(base, onerror=unreadable.append):
            rel_folder = Path(folder).relative_to(root).as_posix()
            for name in dirnames:
                if (Path(folder) / name).is_symlink():
                    refused.append(
                        _refused(f"{rel_folder}/{name}", "symlinked folder: not followed")
                    )
            found += [
                f"{rel_folder}/{name}"
                for name in (*filenames, *dirnames)
                if name.endswith(RECEIPT_SUFFIX)
            ]
        for error in unreadable:
            if isinstance(error, FileNotFoundError | NotADirectoryError):
                continue  # no such evidence location: nothing hidden
            # a folder that cannot be listed may hide receipts, or rejected ones: never skip it
            where = Path(error.filename or base).relative_to(root).as_posix()
            refused.append(
                _refused(where, f"folder cannot be read: {error.strerror} (make it readable)")
            )
    return sorted(found), refused


def _refused(path: str, reason: str) -> Judgement:
    return Judgement(path, None, Status.REJECTED, reason)


@dataclass(frozen=True)
class Wanted:
    """What a checker needs judged instead of every receipt: the receipts that bind one of
    ``files`` (or a file below one of ``folders``) and the receipt files at ``receipts``."""

    files: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    receipts: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Names:
    """What a receipt file names (its id, kind, inputs, subjects, command), read without
    judging it; a file that is no receipt names nothing."""

    id: str | None = None
    kind: str | None = None
    inputs: tuple[str, ...] = ()
    subjects: tuple[str, ...] = ()
    command: tuple[str, ...] = ()


def _strings(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _names(root: Path, relpath: str, index: AuditIndex) -> _Names:
    """The names of one receipt file: from the audit index while the file is unchanged,
    else from the file itself. Reading more than judging accepts is harmless (a receipt
    too many is judged); judging never accepts a file that does not read here."""
    try:
        entry = index.entries.get(relpath)
        if entry is not None and entry[1].get(relpath) == stat_key(os.lstat(root / relpath)):
            document: Any = entry[0]["receipt"]
        else:
            document = json.loads((root / relpath).read_bytes())
        provenance = document.get("provenance")
        provenance = provenance if isinstance(provenance, dict) else {}
        subjects = document.get("subjects")
        return _Names(
            document.get("id") if isinstance(document.get("id"), str) else None,
            document.get("kind") if isinstance(document.get("kind"), str) else None,
            _strings(provenance.get("inputs")),
            tuple(
                s["path"]
                for s in (subjects if isinstance(subjects, list) else ())
                if isinstance(s, dict) and isinstance(s.get("path"), str)
            ),
            _strings(provenance.get("command")),
        )
    except (OSError, ValueError, AttributeError, TypeError, KeyError, IndexError):
        return _Names()


def needed(root: Path, paths: list[str], index: AuditIndex, wanted: Wanted) -> list[str]:
    """The receipts (of ``paths``, in their order) whose judgements decide those that
    ``wanted`` names, exactly as the whole audit decides them.

    Closed under every rule that looks across receipts: the receipts with an id that one
    of them names as input (every receipt of that id: the last accepted one wins, as in
    the audit), for a run attestation every capture or manifest that names it as input
    (a disagreeing capture makes the run probe), and for a receipt with a command the
    receipts that bind a file of that command (the reason a missing input is given names
    them). Every receipt that binds a wanted file is taken, not only the first, so that
    "two receipts bind one file" picks the same one as the audit.
    """
    names = {path: _names(root, path, index) for path in paths}
    by_id: dict[str, list[str]] = defaultdict(list)
    by_subject: dict[str, list[str]] = defaultdict(list)
    captures: dict[str, list[str]] = defaultdict(list)
    checked = {kind.value for kind in CHECKED_KINDS}
    for path, named in names.items():
        if named.id is not None:
            by_id[named.id].append(path)
        for subject in named.subjects:
            by_subject[subject].append(path)
        if named.kind in checked:
            for input_id in named.inputs:
                captures[input_id].append(path)
    folders = tuple(folder.rstrip("/") + "/" for folder in wanted.folders)
    below = [
        path for path, named in names.items() if any(s.startswith(folders) for s in named.subjects)
    ]
    # a dump is bound through the receipt of its first subject (gates/commands/tensors.py)
    files = {*wanted.files, *(names[path].subjects[0] for path in below)}
    chosen: set[str] = set()
    queue = [
        *(path for path in wanted.receipts if path in names),
        *below,
        *(path for file in files for path in by_subject.get(file, ())),
    ]
    while queue:
        path = queue.pop()
        if path in chosen:
            continue
        chosen.add(path)
        named = names[path]
        queue += [p for input_id in named.inputs for p in by_id.get(input_id, ())]
        if named.kind == ArtifactKind.RUN.value and named.id is not None:
            queue += captures.get(named.id, ())
        queue += [p for arg in named.command for p in by_subject.get(arg, ())]
    return [path for path in paths if path in chosen]


def judge_receipts(
    context: JudgingContext,
    locations: tuple[str, ...],
    fingerprint: str,
    *,
    index_file: Path | None = None,
    progress: Progress = QUIET,
    entrypoints: Entrypoints | None = None,
    code: CodeCheck | None = None,
    isolation: IsolationPolicy | None = None,
    wanted: Wanted | None = None,
) -> tuple[Judgement, ...]:
    """Every receipt under the evidence locations, re-judged now, sorted by path (with
    ``wanted``, only the receipts `needed` for it).

    A receipt whose file and subjects are unchanged since an audit under the same
    fingerprint is not read again: the audit index (the command's, at ``index_file``;
    None: no index) holds its judgement. The rules
    that look across receipts (inputs, entrypoint binding, recomputed checks) run
    on every audit.
    """
    root = context.root
    paths, judgements = discover_receipts(root, locations)
    index = AuditIndex(root, index_file, fingerprint)
    if wanted is not None:
        paths = needed(root, paths, index, wanted)
    judgements += [
        index.judge(path, functools.partial(judge, context, path), context.checked_dirs)
        for path in progress.counted(paths, len(paths), "judging receipts", "receipt")
    ]
    index.save(keep_unvisited=wanted is not None)
    context.cache.save()
    judgements = _recompute_checks(judgements, root)
    judgements = _cross_check(judgements, root)
    if code is not None:
        judgements = [code_in_force(judgement, code) for judgement in judgements]
    settled = settle(judgements, entrypoints or {}, isolation=isolation)
    return tuple(sorted(settled, key=lambda j: j.path))


def _cross_check(judgements: list[Judgement], root: Path) -> list[Judgement]:
    """Reject every env capture or manifest that disagrees with the run that bound it, and
    count that run (so every output it bound) as probe."""
    runs = {
        j.receipt.id: j.receipt
        for j in judgements
        if j.receipt and is_run(j.receipt) and j.status is not Status.REJECTED
    }
    problems: dict[str, str] = {}
    doubted: dict[str, str] = {}
    for judgement in judgements:
        receipt = judgement.receipt
        if receipt is None or judgement.status is Status.REJECTED:
            continue
        bound_by = [runs[i] for i in receipt.provenance.inputs if i in runs]
        problem = capture_problem(root, receipt, bound_by[0]) if bound_by else None
        if problem:
            problems[judgement.path] = problem
            doubted.setdefault(bound_by[0].id, problem)
    checked = []
    for judgement in judgements:
        receipt = judgement.receipt
        if receipt and judgement.path in problems:
            status, reason = Status.REJECTED, problems[judgement.path]
        elif receipt and receipt.id in doubted and judgement.status is Status.FORMAL:
            status, reason = Status.PROBE, f"run attestation: its capture {doubted[receipt.id]}"
        else:
            checked.append(judgement)
            continue
        checked.append(Judgement(judgement.path, receipt, status, reason, judgement.signer))
    return checked


def code_in_force(judgement: Judgement, code: CodeCheck) -> Judgement:
    """A formal receipt whose side's code is not the code in force counts as probe."""
    if judgement.status is not Status.FORMAL or judgement.receipt is None:
        return judgement
    problem = code.problem(judgement.receipt)
    if problem is None:
        return judgement
    return Judgement(judgement.path, judgement.receipt, Status.PROBE, problem, judgement.signer)


def index_fingerprint(policy_digest: str, context: JudgingContext) -> str:
    """Everything a kept judgement depends on besides the files it read: the gates
    version, the policy in force (its digest), the trust anchors, the pin's tree, the
    freeze."""
    return "|".join(
        [
            __version__,
            policy_digest,
            context.anchors.digest,
            context.pin_source_tree or "-",
            "discharged" if context.freeze_discharged else "not-discharged",
        ]
    )


def _recompute_checks(judgements: list[Judgement], root: Path) -> list[Judgement]:
    """Reject every loss checker output that disagrees with its recomputation."""
    by_id = {
        j.receipt.id: j.receipt for j in judgements if j.receipt and j.status is not Status.REJECTED
    }
    settled = []
    for judgement in judgements:
        receipt = judgement.receipt
        if receipt and judgement.status is not Status.REJECTED:
            if not all(i in by_id for i in receipt.provenance.inputs):
                settled.append(judgement)  # settle() rejects it, naming the missing input
                continue
            inputs = [by_id[i] for i in receipt.provenance.inputs]
            problem = loss_check_problem(root, receipt, inputs)
            if problem:
                settled.append(Judgement(judgement.path, receipt, Status.REJECTED, problem))
                continue
        settled.append(judgement)
    return settled


def settle(
    judgements: list[Judgement],
    entrypoints: Entrypoints,
    *,
    isolation: IsolationPolicy | None = None,
) -> list[Judgement]:
    """Apply the rules that look across receipts until nothing changes.

    A receipt derived from others (provenance.inputs) is no better than its
    inputs: an input that is not accepted here rejects it, a probe input makes
    it probe. Run outputs count only through a run attestation of their side's
    declared entrypoint.
    """
    changed = True
    while changed:
        changed = False
        accepted = {
            j.receipt.id: j for j in judgements if j.receipt and j.status is not Status.REJECTED
        }
        for index, judgement in enumerate(judgements):
            downgraded = _downgrade(judgement, accepted, entrypoints, judgements, isolation)
            if downgraded is not None:
                judgements[index] = downgraded
                changed = True
    return judgements


def _downgrade(
    judgement: Judgement,
    accepted: dict[str, Judgement],
    entrypoints: Entrypoints,
    everything: list[Judgement],
    isolation: IsolationPolicy | None = None,
) -> Judgement | None:
    receipt = judgement.receipt
    if receipt is None or judgement.status is Status.REJECTED:
        return None
    missing = [i for i in receipt.provenance.inputs if i not in accepted]
    if missing:
        reason = missing_input_reason(receipt, missing[0], everything)
        return Judgement(judgement.path, receipt, Status.REJECTED, reason, judgement.signer)
    if judgement.status is not Status.FORMAL:
        return None
    sources = [accepted[i] for i in receipt.provenance.inputs]
    why = _probe_reason(receipt, sources, entrypoints, isolation)
    if why is None:
        return None
    return Judgement(judgement.path, receipt, Status.PROBE, why, judgement.signer)


def missing_input_reason(receipt: Receipt, missing: str, everything: list[Judgement]) -> str:
    """Why a derived receipt is rejected for an input that is gone, naming the file that input
    bound (or that now binds the same files) and the command that re-makes the receipt."""
    where = next((j.path for j in everything if j.receipt and j.receipt.id == missing), None)
    command = receipt.provenance.command
    if where is None and command:
        named = set(command)
        where = next(
            (
                j.path
                for j in everything
                if j.receipt
                and j.receipt.id not in receipt.provenance.inputs  # the inputs still in place
                and any(s.path in named for s in j.receipt.subjects)
            ),
            None,
        )
    located = f" ({where})" if where else ""
    fix = (
        f"re-run `{' '.join(command)}` (or `gates refresh`)"
        if command
        else "re-run the checker that wrote it (`gates evidence` lists the command)"
    )
    return (
        f"input receipt {missing[:19]}...{located} is not an accepted receipt in this "
        f"workspace (tampered, changed or re-made since): {fix}"
    )


def _probe_reason(
    receipt: Receipt,
    sources: list[Judgement],
    entrypoints: Entrypoints,
    isolation: IsolationPolicy | None = None,
) -> str | None:
    """Why a formal receipt counts only as probe once its inputs and binding are known."""
    probe_input = next((s for s in sources if s.status is Status.PROBE), None)
    if probe_input is not None:
        return f"input receipt {probe_input.path} counts as probe"
    if is_run(receipt):
        problems = run_problems(receipt, entrypoints, isolation=isolation)
        return "run attestation: " + "; ".join(problems) if problems else None
    if needs_run(receipt) and not any(
        s.receipt and is_run(s.receipt) and run_covers(s.receipt, receipt) for s in sources
    ):
        return (
            "not from a signed run of the declared entrypoint (no run attestation among its "
            "inputs that ran its framework and bound its files; write it with "
            "`gates run --framework ... -- <entrypoint>`)"
        )
    return None
