"""`gates audit` end to end: contract statuses, receipt re-judging, profiles, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gates.core.criteria import Criterion, DischargeStatus, discharge_status
from gates.engine.audit import run_audit
from gates.reporters import REPORTERS
from tests.helpers import Workspace, inputs_at, write

FREEZE_ID = "contract_environment.source-freeze-head-vs-pin"


def audit_json(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    result = ws.gates(capsys, "audit", "--format", "json")
    return result.code, json.loads(result.out)


def only_freeze_contract(ws: Workspace) -> None:
    for path in (ws.root / "contracts").glob("*.toml"):
        if "source-freeze" not in path.name:
            path.unlink()


def contract(report: dict[str, object], contract_id: str) -> dict[str, object]:
    contracts = report["contracts"]
    assert isinstance(contracts, list)
    return next(c for c in contracts if c["id"] == contract_id)


def add_receipt(
    ws: Workspace, capsys: pytest.CaptureFixture[str], subject: str, *extra: str
) -> None:
    write(ws.root, subject, json.dumps({"losses": [2.5, 2.25]}))
    # structure_parity: hand-made receipts of run outputs (loss, env, ...) are never formal
    kind = "structure_parity"
    result = ws.gates(capsys, "receipt", "create", "--kind", kind, "--subject", subject, *extra)
    assert result.code == 0, result.err


def test_fresh_workspace_is_blocked_without_evidence(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = audit_json(ws, capsys)
    assert code == 1
    assert report["verdict"] == "blocked"
    assert contract(report, FREEZE_ID)["dischargeStatus"] == "discharged"
    inventory = contract(report, "contract_environment.tensor-inventory")
    assert inventory["dischargeStatus"] == "undischarged"
    assert report["required_steps"] == 100
    assert report["formal_alignment_steps"] == 0


def test_a_contract_whose_evaluator_does_not_exist_is_error_and_blocks(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    only_freeze_contract(ws)
    write(
        ws.root,
        "contracts/newer.toml",
        "\n".join(
            [
                'id = "contract_environment.gradients"',
                'title = "From a newer gates"',
                'check = "gradient_parity"',
                'discharge = "later"',
                "",
            ]
        ),
    )
    code, report = audit_json(ws, capsys)
    assert (code, report["verdict"]) == (1, "blocked")
    newer = contract(report, "contract_environment.gradients")
    assert newer["dischargeStatus"] == "error"
    criteria = newer["criteria"]
    assert isinstance(criteria, list)
    assert criteria[0]["met"] is False
    assert "no evaluator named 'gradient_parity'" in criteria[0]["detail"]


def test_json_object_has_the_design_shape(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    add_receipt(ws, capsys, "results/paddle/loss.json", "--framework", "paddle")
    _, report = audit_json(ws, capsys)
    assert {"verdict", "formal_alignment_steps", "required_steps", "contracts", "receipts"} <= set(
        report
    )
    contracts = report["contracts"]
    assert isinstance(contracts, list)
    for entry in contracts:
        assert {
            "id",
            "title",
            "blocking",
            "dischargeStatus",
            "criteria",
            "discharge",
            "evidence",
        } <= set(entry)
    receipts = report["receipts"]
    assert isinstance(receipts, list)
    assert set(receipts[0]) == {
        "signer",
        "path",
        "id",
        "kind",
        "framework",
        "evidenceClass",
        "formalWeight",
        "stamped",
        "status",
        "reason",
    }
    assert receipts[0]["framework"] == "paddle"
    assert receipts[0]["status"] == "formal"


def test_only_a_discharged_freeze_contract_passes(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    only_freeze_contract(ws)
    code, report = audit_json(ws, capsys)
    assert (code, report["verdict"]) == (0, "pass")
    write(ws.root, "paddleformers/glm/hack.py", "x = 1\n")
    code, report = audit_json(ws, capsys)
    assert (code, report["verdict"]) == (1, "blocked")
    assert contract(report, FREEZE_ID)["dischargeStatus"] == "discharging"


def test_malformed_receipt_is_rejected_by_name_and_the_audit_completes(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    only_freeze_contract(ws)
    add_receipt(ws, capsys, "results/torch/loss.json")
    write(ws.root, "experiments/e055/checker_run.receipt.json", "{not json")
    code, report = audit_json(ws, capsys)
    assert code == 1
    assert report["verdict"] == "blocked"
    receipts = {r["path"]: r for r in report["receipts"]}  # type: ignore[union-attr]
    broken = receipts["experiments/e055/checker_run.receipt.json"]
    assert broken["status"] == "rejected"
    assert broken["reason"].startswith("malformed JSON")
    assert receipts["results/torch/loss.receipt.json"]["status"] == "formal"
    assert any("experiments/e055/checker_run.receipt.json" in b for b in report["blockers"])  # type: ignore[union-attr]


def test_symlinked_receipt_and_folder_are_rejected(
    ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    only_freeze_contract(ws)
    add_receipt(ws, capsys, "results/torch/loss.json")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (ws.root / "results/linked").symlink_to(elsewhere)
    (ws.root / "outputs").mkdir()
    (ws.root / "outputs/copy.receipt.json").symlink_to(ws.root / "results/torch/loss.receipt.json")
    code, report = audit_json(ws, capsys)
    assert code == 1
    receipts = {r["path"]: r for r in report["receipts"]}  # type: ignore[union-attr]
    assert receipts["results/linked"]["status"] == "rejected"
    assert "symlink" in receipts["outputs/copy.receipt.json"]["reason"]


def test_every_receipt_counts_zero_while_the_freeze_is_blocked(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    add_receipt(ws, capsys, "results/torch/loss.json")
    write(ws.root, "README.md", "edited while the run went on\n")
    _, report = audit_json(ws, capsys)
    receipts = report["receipts"]
    assert isinstance(receipts, list)
    assert (receipts[0]["evidenceClass"], receipts[0]["formalWeight"]) == ("probe", 0)
    assert receipts[0]["stamped"] == {"evidenceClass": "formal", "formalWeight": 1}
    assert receipts[0]["status"] == "probe"
    assert "not discharged now" in receipts[0]["reason"]


def test_contract_profile_makes_other_profiles_count_zero(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        ws.root,
        "contracts/losses-recorded.toml",
        "\n".join(
            [
                'id = "acceptance_oracle.losses-recorded"',
                'title = "Freeze plus loss evidence of the GLM profile"',
                'check = "source_freeze"',
                "blocking = false",
                'discharge = "formal loss receipts of the profile"',
                'evidence_kinds = ["structure_parity"]',
                "[profile]",
                'name = "minimum_complete"',
                "tp = 2",
                "sp = true",
                "",
            ]
        ),
    )
    add_receipt(
        ws,
        capsys,
        "results/torch/loss.json",
        "--profile",
        "name=minimum_complete",
        "--profile",
        "tp=2",
        "--profile",
        "sp=true",
    )
    add_receipt(
        ws,
        capsys,
        "results/paddle/loss.json",
        "--profile",
        "name=minimum_complete",
        "--profile",
        "tp=1",
    )
    _, report = audit_json(ws, capsys)
    evidence = {
        e["path"]: e for e in contract(report, "acceptance_oracle.losses-recorded")["evidence"]
    }  # type: ignore[union-attr]
    counted = evidence["results/torch/loss.receipt.json"]
    assert counted["counts"] is True
    assert (counted["evidenceClass"], counted["formalWeight"]) == ("formal", 1)
    other = evidence["results/paddle/loss.receipt.json"]
    assert other["counts"] is False
    assert (other["evidenceClass"], other["formalWeight"]) == ("probe", 0)
    assert other["stamped"] == {"evidenceClass": "formal", "formalWeight": 1}
    assert other["reason"] == (
        "counts 0: other profile: sp missing (contract requires sp=true); "
        "tp=1 (contract requires tp=2)"
    )


def test_malformed_contract_file_blocks_and_exits_2(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        ws.root,
        "contracts/typo.toml",
        'id = "x.y"\ntitle = "t"\ncheck = "source_freeze"\nblockng = true\ndischarge = "d"\n',
    )
    code, report = audit_json(ws, capsys)
    assert code == 2
    assert report["verdict"] == "blocked"
    broken = contract(report, "contracts/typo.toml")
    assert broken["dischargeStatus"] == "error"
    assert "key 'blockng': unknown key" in broken["criteria"][0]["detail"]  # type: ignore[index]


def test_duplicate_contract_ids_are_an_error(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    source = (ws.root / "contracts/source-freeze-head-vs-pin.toml").read_text()
    write(ws.root, "contracts/zz-copy.toml", source)
    code, report = audit_json(ws, capsys)
    assert code == 2
    assert "also in" in contract(report, "contracts/zz-copy.toml")["criteria"][0]["detail"]  # type: ignore[index]


def test_empty_contract_set_never_passes(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    for path in (ws.root / "contracts").glob("*.toml"):
        path.unlink()
    code, report = audit_json(ws, capsys)
    assert (code, report["verdict"]) == (1, "blocked")


def test_non_blocking_contract_in_error_does_not_block(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    only_freeze_contract(ws)
    write(
        ws.root,
        "contracts/advisory.toml",
        "\n".join(
            [
                'id = "advisory.future-check"',
                'title = "Not yet built"',
                'check = "future_check"',
                "blocking = false",
                'discharge = "later"',
                "",
            ]
        ),
    )
    code, report = audit_json(ws, capsys)
    assert (code, report["verdict"]) == (0, "pass")
    assert contract(report, "advisory.future-check")["dischargeStatus"] == "error"


def test_params_the_evaluator_does_not_take_are_an_error(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    path = ws.root / "contracts/source-freeze-head-vs-pin.toml"
    path.write_text(path.read_text() + "\n[params]\nstrictness = 3\n")
    code, report = audit_json(ws, capsys)
    assert code == 1
    freeze = contract(report, FREEZE_ID)
    assert freeze["dischargeStatus"] == "error"
    assert "strictness" in freeze["criteria"][0]["detail"]  # type: ignore[index]


def test_text_report_lists_contracts_and_the_verdict(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write(ws.root, "README.md", "dirty\n")
    result = ws.gates(capsys, "audit")
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines[0].startswith("blocked: ")
    assert " of " in lines[0] and "blocking contract(s) not discharged" in lines[0]
    assert "0 / 100 formal steps" in lines[0]
    assert lines[0].endswith("`"), "it ends with the command to type next"
    assert lines[0].split("next: `")[1].removesuffix("`").startswith("gates explain ")
    assert lines[1] == ""
    assert lines[2].split() == ["CONTRACT", "BLOCKING", "STATUS", "MET", "FIRST", "UNMET"]
    freeze_row = next(line for line in lines if line.startswith(FREEZE_ID))
    assert freeze_row.split()[1:4] == ["yes", "discharging", "3/4"]
    assert "worktree_clean: unstaged changes inside the source tree: README.md" in freeze_row
    assert "formal_alignment_steps = 0 / 100" in lines
    assert lines[-1] == "verdict=blocked"


def test_concurrent_writer_during_audit_blocks(ws: Workspace) -> None:
    only_freeze_contract(ws)
    result = run_audit(
        inputs_at(ws.root), between_reads=lambda: write(ws.root, "paddleformers/tmp.py", "x\n")
    )
    assert result.verdict == "blocked"
    assert any(r.code == "concurrent_writer" for r in result.freeze.reasons)


def test_every_format_choice_has_a_reporter(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in REPORTERS:
        assert ws.gates(capsys, "audit", "--format", name).code == 1
    assert ws.gates(capsys, "audit", "--format", "yaml").code == 2


@pytest.mark.parametrize(
    ("met", "status"),
    [
        ((True, True), DischargeStatus.DISCHARGED),
        ((True, False), DischargeStatus.DISCHARGING),
        ((False, False), DischargeStatus.UNDISCHARGED),
        ((), DischargeStatus.ERROR),
    ],
)
def test_discharge_status_follows_the_criteria(
    met: tuple[bool, ...], status: DischargeStatus
) -> None:
    criteria = tuple(Criterion(f"c{i}", value, "") for i, value in enumerate(met))
    assert discharge_status(criteria) is status
