"""What the audit will count of receipts just written: the judgement now, not the stamp.

`gates run` and every checker print this after writing, so that a `formal/1` stamp that the
audit would count 0 (an untrusted signer, another profile than the contract's, an argv that
is not the entrypoint, an env.json the schema refuses) is said at once, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from gates.engine.audit import WorkspaceState, contract_evidence, judge_workspace
from gates.engine.inputs import AuditInputs
from gates.freeze.check import FreezeReport
from gates.receipts.artifacts import KIND_BY_FILE_NAME, artifact_problem
from gates.receipts.verify import Status


@dataclass(frozen=True)
class Counted:
    path: str
    counts: bool
    status: str  # formal, probe, rejected, or missing (not found by the audit)
    why: str

    def line(self) -> str:
        if self.counts:
            return f"{self.path}: counts (formal: {self.why})"
        return f"{self.path}: counts 0 ({self.status}: {self.why})"


def what_counts(
    inputs: AuditInputs, paths: list[str], *, freeze: FreezeReport | None = None
) -> list[Counted]:
    """Each receipt of ``paths`` as the audit judges it now, under the policy in force
    (``freeze``: the freeze the caller has just judged, else judged again here)."""
    state = judge_workspace(inputs, freeze=freeze)
    return [_counted(state, path) for path in paths]


def _counted(state: WorkspaceState, path: str) -> Counted:
    judgement = next((j for j in state.receipts if j.path == path), None)
    if judgement is None:
        return Counted(path, False, "missing", "not found under the evidence locations")
    if judgement.status is not Status.FORMAL or judgement.receipt is None:
        return Counted(path, False, judgement.status.value, judgement.reason)
    receipt = judgement.receipt
    for subject in receipt.subjects:
        kind = KIND_BY_FILE_NAME.get(subject.path.rsplit("/", 1)[-1])
        if kind is not None:
            problem = artifact_problem(kind, state.workspace.root / subject.path, subject.path)
            if problem:
                return Counted(path, False, "formal", f"the results contract refuses it: {problem}")
    counting: list[str] = []
    refusing: list[str] = []
    for _, spec in state.loaded:
        for item in contract_evidence(spec, (judgement,)):
            (counting if item.counts else refusing).append(f"{spec.id}: {item.reason}")
    if refusing and not counting:
        return Counted(path, False, "formal", f"for {refusing[0]}")
    if not counting:
        return Counted(path, True, "formal", f"{judgement.reason}; no contract in force uses it")
    names = ", ".join(entry.split(":", 1)[0] for entry in counting)
    others = f"; counts 0 for {refusing[0]}" if refusing else ""
    return Counted(path, True, "formal", f"for {names}{others}")
