"""A checker judges only the receipts that decide its inputs (not every receipt of the
workspace), and each of them exactly as `gates audit` judges it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gates.checkers.outputs import receipt_binding
from gates.commands.tensors import dump_binding
from gates.engine.audit import judge_workspace
from gates.receipts.create import ReceiptRequest, create_receipt
from gates.receipts.index import AuditIndex
from gates.receipts.judge_all import Wanted
from gates.receipts.model import ArtifactKind
from gates.receipts.verify import Judgement
from gates.reporters.json_report import receipt_entry
from gates.workspace.repository import open_workspace
from tests import helpers
from tests.helpers import Workspace, declare_entrypoints, inputs_at, signed_run, write
from tests.test_loss_check import CAND, REF, train_losses

CHECK_OUTPUT = "experiments/e1/check.receipt.json"


def _audited(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    result = ws.gates(capsys, "audit", "--format", "json")
    assert result.code in (0, 1), result.err
    return {entry["path"]: entry for entry in json.loads(result.out)["receipts"]}


def _path(judgement: Judgement | None) -> str | None:
    return judgement.path if judgement else None


def _assert_judged_as_audited(ws: Workspace, audited: dict[str, dict[str, Any]]) -> None:
    """For every file a receipt binds, every folder of one and every receipt: what a
    checker judges equals the audit's entries, and it picks the audit's binding."""
    inputs = inputs_at(ws.root)
    whole = judge_workspace(inputs).receipts
    files = sorted({s.path for j in whole if j.receipt for s in j.receipt.subjects})
    folders = sorted({file.rsplit("/", 1)[0] for file in files})
    wants = [
        *(Wanted(files=(file,)) for file in files),
        *(Wanted(folders=(folder,)) for folder in folders),
        *(Wanted(receipts=(path,)) for path in audited),
    ]
    assert len(wants) > 10
    for wanted in wants:
        judged = judge_workspace(inputs, wanted=wanted).receipts
        for judgement in judged:
            assert receipt_entry(judgement) == audited[judgement.path], (wanted, judgement.path)
        for file in wanted.files:
            assert _path(receipt_binding(file, judged)) == _path(receipt_binding(file, whole))
        for folder in wanted.folders:
            assert _path(dump_binding(folder, judged)) == _path(dump_binding(folder, whole))
        for path in wanted.receipts:
            assert path in {j.path for j in judged}


@pytest.mark.slow
def test_a_checkers_inputs_are_judged_as_the_audit_judges_them(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    declare_entrypoints(ws.root)
    signed_run(ws.root, capsys, "torch", train_losses(10))
    signed_run(ws.root, capsys, "paddle", train_losses(10))
    checked = ws.gates(capsys, "check", "loss", REF, CAND, "-o", CHECK_OUTPUT)
    assert checked.code == 0, checked.err
    audited = _audited(ws, capsys)
    # what the checker said the audit would count of its output is what the audit counts
    assert f"audit: {CHECK_OUTPUT}: counts (formal:" in checked.err
    assert audited[CHECK_OUTPUT]["status"] == "formal"
    _assert_judged_as_audited(ws, audited)

    # a changed capture rejects its receipt, which rejects what derives from it
    env = ws.root / "results/torch/env.json"
    env.write_text(env.read_text().replace("{", '{"changed": 1, ', 1))
    audited = _audited(ws, capsys)
    torch = [path for path in audited if path.startswith("results/torch/")]
    assert {audited[path]["status"] for path in torch} == {"rejected"}
    assert audited[CHECK_OUTPUT]["status"] == "rejected"
    assert "results/torch/loss.receipt.json" in audited[CHECK_OUTPUT]["reason"]
    _assert_judged_as_audited(ws, audited)

    # the runs made again: the check's input receipts are gone, and its reason names a
    # receipt that binds a file of the check's command now
    signed_run(ws.root, capsys, "torch", train_losses(10))
    signed_run(ws.root, capsys, "paddle", train_losses(10))
    audited = _audited(ws, capsys)
    assert audited[CHECK_OUTPUT]["status"] == "rejected"
    assert ".receipt.json) is not an accepted receipt" in audited[CHECK_OUTPUT]["reason"]
    _assert_judged_as_audited(ws, audited)


@pytest.mark.slow
def test_a_run_doubted_by_its_capture_is_doubted_for_a_checker_too(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    declare_entrypoints(ws.root)
    signed_run(ws.root, capsys, "torch", train_losses(10))
    monkeypatch.setitem(helpers.RUN_ENV, "run_id", "paddle-20250101T000000Z-7")
    signed_run(ws.root, capsys, "paddle", train_losses(10))
    audited = _audited(ws, capsys)
    assert audited["results/paddle/env.receipt.json"]["status"] == "rejected"
    assert audited["results/paddle/run.receipt.json"]["status"] == "probe"
    assert audited["results/paddle/loss.receipt.json"]["status"] == "probe"
    _assert_judged_as_audited(ws, audited)


@pytest.mark.slow
def test_a_checker_does_not_judge_unrelated_receipts(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    declare_entrypoints(ws.root)
    signed_run(ws.root, capsys, "torch", train_losses(10))
    signed_run(ws.root, capsys, "paddle", train_losses(10))
    workspace = open_workspace(ws.root)
    unrelated = [f"results/other/n{i}.receipt.json" for i in range(20)]
    for i, path in enumerate(unrelated):
        subject = write(ws.root, f"results/other/n{i}.jsonl", f'{{"step": 1, "loss": {i}}}\n')
        request = ReceiptRequest(
            kind=ArtifactKind.RAW_LOSS,
            subjects=(subject.relative_to(ws.root).as_posix(),),
            output=path,
        )
        create_receipt(workspace, request)
    judged: list[str] = []
    real = AuditIndex.judge

    def judge(index: AuditIndex, relpath: str, *args: Any) -> Judgement:
        judged.append(relpath)
        return real(index, relpath, *args)

    monkeypatch.setattr(AuditIndex, "judge", judge)

    ws.gates(capsys, "audit", "--format", "json")
    assert set(unrelated) <= set(judged)  # the audit judges every receipt
    judged.clear()
    checked = ws.gates(capsys, "check", "loss", REF, CAND, "-o", CHECK_OUTPUT)

    assert checked.code == 0, checked.err
    assert judged, "the checker judged nothing"
    assert not set(unrelated) & set(judged)
    assert {Path(path).parent.as_posix() for path in judged} <= {
        "results/torch",
        "results/paddle",
        "experiments/e1",
    }
