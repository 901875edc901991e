"""`gates evidence`: every piece of evidence the policy in force asks for, its state and the
command that makes or refreshes it; `gates refresh`: re-run the stale checkers.

States: `missing` (no file, or no receipt binding it), `stale` (its receipt is rejected now:
a subject or an input changed since), `probe` (accepted but counts 0, with why), `formal`.
A checker's receipt records its own command line, so a stale or probe checker output is
refreshed from the recorded inputs; training runs are never re-run by `gates refresh`
(their command is listed for a person to start).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from gates.checkers.outputs import receipt_binding
from gates.contracts import results_schema_and_provenance as results_contract
from gates.contracts.model import EvaluationError
from gates.core import exitcodes
from gates.core.echo import Output
from gates.core.json_writer import indented_json
from gates.engine.audit import WorkspaceState, contract_evidence, judge_workspace, results_spec
from gates.engine.inputs import AuditInputs
from gates.policy.contract_files import ContractSpec
from gates.receipts.kinds import RUN_OUTPUT_KINDS, ArtifactKind
from gates.receipts.verify import Judgement, Status

CHECKER_KINDS = frozenset(
    {
        ArtifactKind.LOSS_CHECK,
        ArtifactKind.CHECKPOINT_CHECK,
        ArtifactKind.TENSOR_CHECK,
        ArtifactKind.CONFIG_CHECK,
        ArtifactKind.STRUCTURE_PARITY,
    }
)

#: What produces a checker kind that nothing has produced yet (placeholders in capitals).
_CHECKER_COMMANDS = {
    ArtifactKind.CHECKPOINT_CHECK: "gates check checkpoint CHECKPOINT [--against REFERENCE]",
    ArtifactKind.TENSOR_CHECK: "gates check tensors REFERENCE_RUN CANDIDATE_RUN",
    ArtifactKind.CONFIG_CHECK: "gates check config OFFICIAL_CONFIG --class MODULE:CLASS",
    ArtifactKind.STRUCTURE_PARITY: "gates inventory diff REFERENCE_CHECKPOINT CANDIDATE_CHECKPOINT",
}


@dataclass(frozen=True)
class Item:
    """One piece of evidence: what it is, where, its state now and the command for it."""

    path: str
    kind: str
    state: str  # missing, stale, probe, formal
    why: str
    command: str
    refreshable: bool  # a checker output `gates refresh` can re-run from its recorded command
    argv: tuple[str, ...] = ()  # the recorded command, as a list (refreshable ones)


@dataclass(frozen=True)
class _Sides:
    folders: dict[str, str]  # framework -> run folder
    commands: dict[str, str]  # framework -> `gates run ...`


def _sides(spec: ContractSpec | None) -> _Sides:
    if spec is None:
        return _Sides({}, {})
    try:
        params = results_contract.parse_params(spec.params)
    except EvaluationError:
        return _Sides({}, {})
    folders, commands = {}, {}
    for side, framework, folder, declared in (
        ("reference", params.reference_framework, params.reference, params.reference_entrypoint),
        ("candidate", params.candidate_framework, params.candidate, params.candidate_entrypoint),
    ):
        entry = " ".join(declared) if declared else f"<{side} entrypoint>"
        folders[framework.value] = folder
        commands[framework.value] = f"gates run --framework {framework.value} -- {entry}"
    return _Sides(folders, commands)


#: The recorded commands `gates refresh` runs: checkers that read files and run no code of
#: the audited repository. A receipt is the PR author's file: anything else (a `gates run`,
#: `check config`, which imports the candidate's code, global options) is shown, never run.
_REFRESHABLE = {
    ("check", "loss"),
    ("check", "determinism"),
    ("check", "tensors"),
    ("check", "checkpoint"),
    ("inventory", "diff"),
}


def safe_to_refresh(argv: tuple[str, ...]) -> bool:
    """``argv`` is `gates [-C FOLDER] <checker> ...` with FOLDER inside the workspace."""
    rest = argv[1:]
    if argv[:1] != ("gates",):
        return False
    if rest[:1] == ("-C",):
        folder = rest[1] if len(rest) > 1 else ""
        if not folder or folder.startswith("/") or ".." in folder.split("/"):
            return False
        rest = rest[2:]
    return tuple(rest[:2]) in _REFRESHABLE


def _run_command(sides: _Sides, judgement: Judgement) -> str:
    receipt = judgement.receipt
    framework = receipt.framework.value if receipt and receipt.framework else None
    if framework and framework in sides.commands:
        return sides.commands[framework]
    return "gates run --framework torch|paddle -- <entrypoint>"


def _command_for(sides: _Sides, judgement: Judgement) -> tuple[str, tuple[str, ...]]:
    """The command that re-makes a receipt, and its argv when `gates refresh` may run it."""
    receipt = judgement.receipt
    if receipt is None:
        return "fix or remove the file (gates receipt verify PATH says why)", ()
    if receipt.kind in CHECKER_KINDS:
        recorded = receipt.provenance.command
        if recorded and safe_to_refresh(tuple(recorded)):
            return shlex.join(recorded), tuple(recorded)
        if recorded:
            return shlex.join(recorded) + "  (not re-run by gates refresh: check it)", ()
        return _CHECKER_COMMANDS.get(receipt.kind, "re-run its checker"), ()
    if receipt.kind in RUN_OUTPUT_KINDS or receipt.kind is ArtifactKind.RUN:
        return _run_command(sides, judgement), ()
    return "gates receipt create ...", ()


def _counts(state: WorkspaceState, judgement: Judgement) -> tuple[str, str]:
    """The state of an accepted receipt: formal only when every contract that looks at its
    kind counts it."""
    if judgement.status is Status.REJECTED:
        return "stale", judgement.reason
    if judgement.status is Status.PROBE:
        return "probe", judgement.reason
    for _, spec in state.loaded:
        for item in contract_evidence(spec, (judgement,)):
            if not item.counts:
                return "probe", f"{spec.id}: {item.reason}"
    return "formal", judgement.reason


def evidence_items(inputs: AuditInputs) -> list[Item]:
    """Every receipt under the evidence locations, and every piece the contracts in force ask
    for that no receipt provides."""
    state = judge_workspace(inputs)
    results = results_spec(state.loaded)
    sides = _sides(results)
    items: list[Item] = []
    for judgement in state.receipts:
        status, why = _counts(state, judgement)
        command, argv = _command_for(sides, judgement)
        kind = judgement.receipt.kind.value if judgement.receipt else "unreadable"
        items.append(Item(judgement.path, kind, status, why, command, bool(argv), argv))
    items += _missing_results(state, results, sides)
    items += _missing_checkers(state)
    return items


def _missing_results(state: WorkspaceState, spec: ContractSpec | None, sides: _Sides) -> list[Item]:
    if spec is None:
        return []
    try:
        params = results_contract.parse_params(spec.params)
    except EvaluationError:
        return []  # the audit reports the contract as `error`, with the reason
    found = []
    for framework, folder in sides.folders.items():
        for name in params.required_files:
            relpath = f"{folder}/{name}"
            kind = name.split(".", 1)[0]
            if not (state.workspace.root / relpath).is_file():
                why = f"{spec.id} requires it"
            elif receipt_binding(relpath, state.receipts) is None:
                why = "no accepted receipt binds it"
            else:
                continue
            found.append(Item(relpath, kind, "missing", why, sides.commands[framework], False))
    return found


def _missing_checkers(state: WorkspaceState) -> list[Item]:
    present = {j.receipt.kind for j in state.receipts if j.receipt}
    found = []
    for _, spec in state.loaded:
        for kind in spec.evidence_kinds:
            if kind in CHECKER_KINDS and kind not in present and kind in _CHECKER_COMMANDS:
                why = f"{spec.id} looks at {kind.value} evidence"
                found.append(Item("-", kind.value, "missing", why, _CHECKER_COMMANDS[kind], False))
                present.add(kind)
    results = results_spec(state.loaded)
    if ArtifactKind.LOSS_CHECK not in present and results is not None:
        try:
            params = results_contract.parse_params(results.params)
        except EvaluationError:
            return found
        command = (
            f"gates check loss {params.reference}/loss.json {params.candidate}/loss.json "
            "--bit-exact"
        )
        why = f"{results.id} compares losses"
        found.append(Item("-", "loss_check", "missing", why, command, False))
    return found


def render(items: list[Item], *, as_json: bool) -> str:
    if as_json:
        return indented_json({"evidence": [asdict(item) for item in items]})
    if not items:
        return "no evidence asked for and none found"
    order = {"missing": 0, "stale": 1, "probe": 2, "formal": 3}
    lines = []
    for item in sorted(items, key=lambda i: (order[i.state], i.path)):
        lines.append(f"{item.state:<8} {item.path} ({item.kind})")
        if item.state != "formal":
            lines.append(f"         why: {item.why}")
            lines.append(f"         fix: {item.command}")
    counts = {state: sum(1 for i in items if i.state == state) for state in order}
    lines.append(", ".join(f"{n} {state}" for state, n in counts.items()))
    if any(i.refreshable and i.state in ("stale", "probe") for i in items):
        lines.append("`gates refresh` re-runs the stale checkers from their recorded inputs")
    return "\n".join(lines)


@dataclass(frozen=True)
class EvidenceList:
    """What `gates evidence` found: every piece of evidence the policy asks for."""

    items: tuple[Item, ...]

    @property
    def all_formal(self) -> bool:
        return all(item.state == "formal" for item in self.items)


#: --format -> the renderer of an EvidenceList
RENDERERS: dict[str, Callable[[EvidenceList], str]] = {
    "text": lambda found: render(list(found.items), as_json=False),
    "json": lambda found: render(list(found.items), as_json=True),
}


def evidence(inputs: AuditInputs, *, out: Output) -> int:
    """Exit 0 when every piece is formal, 1 otherwise."""
    found = EvidenceList(tuple(evidence_items(inputs)))
    out.render(RENDERERS, found)
    return exitcodes.OK if found.all_formal else exitcodes.BLOCKED


@dataclass(frozen=True)
class Refreshed:
    path: str
    command: str
    exit_status: int | None  # None: not run (--dry-run)
    output: str


@dataclass(frozen=True)
class Refresh:
    """What `gates refresh` did: each checker re-run (or that would run, with --dry-run),
    and the training runs it leaves to a person."""

    done: tuple[Refreshed, ...]
    runs: tuple[Item, ...]

    @property
    def failed(self) -> bool:
        return any(r.exit_status not in (None, 0) for r in self.done)


def refreshed(inputs: AuditInputs, *, dry_run: bool, global_options: tuple[str, ...]) -> Refresh:
    """Re-run every stale or probe checker output that records its command; training runs
    are listed, never re-run."""
    workspace = inputs.workspace
    items = evidence_items(inputs)
    chosen = [i for i in items if i.refreshable and i.state in ("stale", "probe")]
    done: list[Refreshed] = []
    for item in chosen:
        if dry_run:
            done.append(Refreshed(item.path, item.command, None, ""))
            continue
        # Isolated mode (-I): the workspace is not on sys.path, so a `gates/` package the
        # audited repository commits cannot stand in for gates (with CI's environment).
        completed = subprocess.run(  # a checker's own recorded command, vetted
            [sys.executable, "-I", "-m", "gates", *global_options, *item.argv[1:]],
            cwd=workspace.root,
            capture_output=True,
            text=True,
            check=False,
        )
        last = (completed.stderr or completed.stdout).strip().splitlines()
        done.append(
            Refreshed(item.path, item.command, completed.returncode, last[-1] if last else "")
        )
    runs = tuple(i for i in items if not i.refreshable and i.state != "formal")
    return Refresh(tuple(done), runs)


def _refresh_json(refresh: Refresh) -> str:
    document = {
        "refreshed": [asdict(r) for r in refresh.done],
        "not_refreshed": [asdict(i) for i in refresh.runs],
    }
    return indented_json(document)


#: --format -> the renderer of a Refresh
REFRESH_RENDERERS: dict[str, Callable[[Refresh], str]] = {
    "text": lambda refresh: _render_refresh(list(refresh.done), list(refresh.runs)),
    "json": _refresh_json,
}


def refresh(
    inputs: AuditInputs,
    *,
    dry_run: bool,
    global_options: tuple[str, ...],
    out: Output,
) -> int:
    """Exit 0 when every re-run succeeded, else 1."""
    done = refreshed(inputs, dry_run=dry_run, global_options=global_options)
    out.render(REFRESH_RENDERERS, done)
    return exitcodes.BLOCKED if done.failed else exitcodes.OK


def _render_refresh(done: list[Refreshed], runs: list[Item]) -> str:
    lines = []
    for item in done:
        if item.exit_status is None:
            lines.append(f"would run: {item.command}  ({item.path})")
        else:
            lines.append(f"exit {item.exit_status}: {item.command}  ({item.path})")
            if item.exit_status not in (0, 1) and item.output:
                lines.append(f"  {item.output}")
    if not done:
        lines.append("no stale checker output to refresh")
    for run in runs:
        lines.append(f"not refreshed ({run.state}, needs a person): {run.path}: {run.command}")
    return "\n".join(lines)


def root_options(directory: Path, policy_ref: str | None, trust: Path | None) -> tuple[str, ...]:
    """The global options `gates refresh` passes on to the checkers it re-runs."""
    options: tuple[str, ...] = ()
    if policy_ref:
        options += ("--policy-ref", policy_ref)
    if trust:
        options += ("--trust", str(trust.resolve()))
    return options
