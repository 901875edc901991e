"""The persistent audit index through `gates audit`: a warm audit judges nothing again, any
change of a receipt, a subject or the contracts is seen, and a corrupt index is rebuilt."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

import gates.engine.audit
import gates.receipts.judge_all
from gates.core.hashing import INDEX_KIND
from tests.helpers import Workspace, cache_file, declare_entrypoints, inputs_at, signed_run, write

SUBJECTS = ["results/torch/loss.json", "results/paddle/loss.json", "outputs/extra/loss.json"]
RECEIPTS = 4 * len(SUBJECTS)  # each run: run attestation, manifest, env and loss receipts


def age(root: Path) -> None:
    """Give every evidence file an old mtime, as files written before this audit have."""
    past = ((root / "gates.toml").stat().st_mtime_ns // 10**9 - 3600) * 10**9
    for location in ("results", "outputs"):
        for path in (root / location).rglob("*"):
            if path.is_file():
                os.utime(path, ns=(past, past))


@pytest.fixture
def evidence(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> Workspace:
    # signed runs of the declared entrypoint: run attestations, envelopes and run records,
    # everything the index must keep and give back unchanged
    declare_entrypoints(ws.root)
    for subject in SUBJECTS:
        framework = "torch" if "torch" in subject else "paddle"
        signed_run(ws.root, capsys, framework, [2.5, 2.25], out=subject.rsplit("/", 1)[0])
    age(ws.root)
    return ws


def audit(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    result = ws.gates(capsys, "audit", "--format", "json")
    assert result.code in (0, 1), result.err
    report: dict[str, object] = json.loads(result.out)
    return report


def receipts(report: dict[str, object]) -> dict[str, dict[str, object]]:
    return {r["path"]: r for r in report["receipts"]}  # type: ignore[index,union-attr]


def index_file(ws: Workspace) -> Path:
    path = cache_file(ws.root, INDEX_KIND)
    assert path is not None
    return path


@pytest.fixture
def judged(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The receipts the engine reads and judges from their files (not from the index)."""
    calls: list[str] = []
    real = gates.receipts.judge_all.judge

    def counting(context: object, relpath: str) -> object:
        calls.append(relpath)
        return real(context, relpath)  # type: ignore[arg-type]

    monkeypatch.setattr(gates.receipts.judge_all, "judge", counting)
    return calls


@pytest.mark.slow
def test_a_warm_audit_judges_nothing_again_and_agrees_with_the_cold_one(
    evidence: Workspace, capsys: pytest.CaptureFixture[str], judged: list[str]
) -> None:
    cold = audit(evidence, capsys)
    assert len(judged) == RECEIPTS
    entries = json.loads(index_file(evidence).read_text())["entries"]
    assert sorted(entries) == sorted(receipts(cold))
    judged.clear()
    warm = audit(evidence, capsys)
    assert judged == []
    assert warm == cold
    assert {r["status"] for r in receipts(warm).values()} == {"formal"}


@pytest.mark.slow
def test_an_edited_receipt_is_judged_again_and_rejected(
    evidence: Workspace, capsys: pytest.CaptureFixture[str], judged: list[str]
) -> None:
    audit(evidence, capsys)
    path = evidence.root / "results/torch/loss.receipt.json"
    document = json.loads(path.read_text())
    document["stampReasons"] = ["edited"]
    path.write_text(json.dumps(document))
    judged.clear()
    found = receipts(audit(evidence, capsys))
    assert judged == ["results/torch/loss.receipt.json"]
    assert found["results/torch/loss.receipt.json"]["status"] == "rejected"
    assert found["results/paddle/loss.receipt.json"]["status"] == "formal"


@pytest.mark.slow
def test_a_changed_subject_is_seen(
    evidence: Workspace, capsys: pytest.CaptureFixture[str], judged: list[str]
) -> None:
    audit(evidence, capsys)
    write(evidence.root, "outputs/extra/loss.json", json.dumps({"losses": [9.5, 2.25]}))
    judged.clear()
    found = receipts(audit(evidence, capsys))
    # the loss receipt and the run attestation that binds the same file
    assert judged == ["outputs/extra/loss.receipt.json", "outputs/extra/run.receipt.json"]
    assert found["outputs/extra/loss.receipt.json"]["status"] == "rejected"
    assert "changed" in str(found["outputs/extra/loss.receipt.json"]["reason"])


@pytest.mark.slow
def test_a_changed_contract_starts_a_new_index(
    evidence: Workspace, capsys: pytest.CaptureFixture[str], judged: list[str]
) -> None:
    audit(evidence, capsys)
    before = json.loads(index_file(evidence).read_text())["fingerprint"]
    contract = next((evidence.root / "contracts").glob("*.toml"))
    contract.write_text(contract.read_text() + "\n# reviewed\n")
    judged.clear()
    audit(evidence, capsys)
    assert len(judged) == RECEIPTS
    assert json.loads(index_file(evidence).read_text())["fingerprint"] != before


@pytest.mark.slow
def test_a_blocked_freeze_is_part_of_the_fingerprint(
    evidence: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    assert {r["status"] for r in receipts(audit(evidence, capsys)).values()} == {"formal"}
    write(evidence.root, "README.md", "edited\n")
    assert {r["status"] for r in receipts(audit(evidence, capsys)).values()} == {"probe"}


@pytest.mark.parametrize(
    "garbage",
    [
        "{not json",
        '{"version": 1, "fingerprint": "x", "entries": []}',
        "[]",
    ],
)
@pytest.mark.slow
def test_a_corrupt_index_is_rebuilt_not_trusted(
    evidence: Workspace, capsys: pytest.CaptureFixture[str], judged: list[str], garbage: str
) -> None:
    cold = audit(evidence, capsys)
    index_file(evidence).write_text(garbage)
    judged.clear()
    assert audit(evidence, capsys) == cold
    assert len(judged) == RECEIPTS
    assert json.loads(index_file(evidence).read_text())["version"] == 1


@pytest.mark.slow
def test_an_entry_with_the_right_fingerprint_but_wrong_keys_is_not_used(
    evidence: Workspace, capsys: pytest.CaptureFixture[str], judged: list[str]
) -> None:
    audit(evidence, capsys)
    data = json.loads(index_file(evidence).read_text())
    for _, keys in data["entries"].values():
        for key in keys.values():
            key[2] += 1  # another size
    index_file(evidence).write_text(json.dumps(data))
    judged.clear()
    audit(evidence, capsys)
    assert len(judged) == RECEIPTS


@pytest.mark.slow
def test_an_entry_whose_fields_the_model_refuses_is_judged_again(
    evidence: Workspace, capsys: pytest.CaptureFixture[str], judged: list[str]
) -> None:
    """The index's fields pass the receipt model again: an edited (or older) entry whose
    stat keys still hold is a miss, judged from its file, not a receipt built around it."""
    cold = audit(evidence, capsys)
    data = json.loads(index_file(evidence).read_text())
    edited = "results/torch/loss.receipt.json"
    data["entries"][edited][0]["receipt"]["subjects"][0]["sha256"] = "not a digest"
    index_file(evidence).write_text(json.dumps(data))
    judged.clear()
    assert audit(evidence, capsys) == cold
    assert judged == [edited]


@pytest.mark.slow
def test_no_index_when_caching_is_off(
    evidence: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    index_file(evidence).unlink(missing_ok=True)  # `gates run` judged to say what counts
    monkeypatch.setenv("GATES_CACHE_DIR", "off")
    report = audit(evidence, capsys)
    assert {r["status"] for r in receipts(report).values()} == {"formal"}
    monkeypatch.delenv("GATES_CACHE_DIR")
    assert not index_file(evidence).exists()


@pytest.mark.slow
def test_a_kept_judgement_rebuilds_the_validated_receipt(
    evidence: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    from gates.receipts.index import judgement_from_data, judgement_to_data  # noqa: PLC0415
    from gates.receipts.model import Receipt  # noqa: PLC0415

    run = gates.engine.audit.judge_workspace(inputs_at(evidence.root))
    for judgement in run.receipts:
        data = judgement_to_data(judgement)
        assert data is not None and judgement.receipt is not None
        assert judgement.receipt.attestation is not None  # verified; not kept in the index
        unsigned = judgement.receipt.model_copy(update={"attestation": None})
        rebuilt = judgement_from_data(judgement.path, json.loads(json.dumps(data)))
        assert rebuilt == dataclasses.replace(judgement, receipt=unsigned)
        assert rebuilt.receipt is not None
        assert rebuilt.receipt.model_dump() == unsigned.model_dump()
        assert Receipt.model_validate(rebuilt.receipt.model_dump()) == unsigned


@pytest.mark.slow
def test_a_change_of_the_trust_anchors_judges_everything_again(
    evidence: Workspace,
    capsys: pytest.CaptureFixture[str],
    judged: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The signer of every kept judgement is revoked: nothing may stay formal from the index."""
    audit(evidence, capsys)
    signing = Path(os.environ["GATES_TRUST"])
    revoked = tmp_path / "trust.toml"
    (tmp_path / "ci.pub").write_text((signing.parent / "ci.pub").read_text())
    revoked.write_text(
        '[[signers]]\nname = "ci"\npublic_key = "ci.pub"\nframeworks = ["*"]\nrevoked = true\n'
    )
    monkeypatch.setenv("GATES_TRUST", str(revoked))
    judged.clear()
    found = receipts(audit(evidence, capsys))
    assert len(judged) == RECEIPTS
    assert {r["status"] for r in found.values()} == {"probe"}
    assert all("revoked" in str(r["reason"]) for r in found.values())
