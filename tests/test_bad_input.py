"""Bad input and bad timing never crash the report (issue 18): each bad input through the CLI,
the rest of the report still produced, `--format json` always one document."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import Result, TrustSetup, Workspace, commit_all, run_gates, write
from tests.lossgen import write_loss_json


def audit_json(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    result = ws.gates(capsys, "audit", "--format", "json")
    assert "internal error" not in result.err, result.err
    return result.code, json.loads(result.out)


def receipt_of(ws: Workspace, capsys: pytest.CaptureFixture[str], subject: str) -> str:
    result = ws.gates(
        capsys, "receipt", "create", "--kind", "loss", "--subject", subject, "--framework", "paddle"
    )
    assert result.code == 0, result.err
    return subject.removesuffix(".json") + ".receipt.json"


def test_a_deeply_nested_receipt_is_rejected_and_the_report_produced(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write_loss_json(ws.root / "results/paddle/loss.json", [1.25, 1.5])
    good = receipt_of(ws, capsys, "results/paddle/loss.json")
    write(ws.root, "results/deep.receipt.json", "[" * 200_000 + "]" * 200_000)
    code, report = audit_json(ws, capsys)
    assert code == 1
    receipts = {r["path"]: r for r in report["receipts"]}
    assert receipts["results/deep.receipt.json"]["status"] == "rejected"
    assert "nested" in receipts["results/deep.receipt.json"]["reason"]
    assert receipts[good]["status"] != "rejected"


def test_a_300_mb_receipt_is_refused_by_size_before_it_is_read(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = ws.root / "results/huge.receipt.json"
    huge.parent.mkdir(parents=True)
    with huge.open("wb") as handle:  # sparse: 300 MB on paper, nothing on disk
        handle.write(b"{")
        handle.truncate(300 * 1024 * 1024)
    code, report = audit_json(ws, capsys)
    assert code == 1
    entry = next(r for r in report["receipts"] if r["path"] == "results/huge.receipt.json")
    assert entry["status"] == "rejected"
    assert "314572800 bytes, over the" in entry["reason"]


def test_a_rejected_receipt_that_reads_as_one_keeps_its_id_kind_and_stamp(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write_loss_json(ws.root / "results/paddle/loss.json", [1.25, 1.5])
    path = receipt_of(ws, capsys, "results/paddle/loss.json")
    write_loss_json(ws.root / "results/paddle/loss.json", [1.25, 1.75])  # the subject changed
    code, report = audit_json(ws, capsys)
    assert code == 1
    entry = next(r for r in report["receipts"] if r["path"] == path)
    assert entry["status"] == "rejected" and "changed" in entry["reason"]
    written = json.loads((ws.root / path).read_text())
    assert entry["id"] == written["id"]
    assert entry["kind"] == "loss" and entry["framework"] == "paddle"
    assert entry["stamped"] is not None
    assert entry["evidenceClass"] is None and entry["formalWeight"] == 0


def test_a_shard_header_that_is_json_but_not_an_object(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    header = b'["not", "an", "object"]'
    shard = ws.root / "results/paddle/checkpoint/model.safetensors"
    shard.parent.mkdir(parents=True)
    shard.write_bytes(len(header).to_bytes(8, "little") + header)
    code, report = audit_json(ws, capsys)
    assert code in (1, 2)
    assert report["verdict"] == "blocked"
    check = ws.gates(capsys, "check", "checkpoint", "results/paddle/checkpoint", "--format", "json")
    assert "internal error" not in check.err, check.err
    assert check.code == 1
    document = json.loads(check.out)
    assert document["valid"] is False
    assert any("object" in p for p in document["problems"]), document["problems"]


def test_the_required_steps_must_be_at_least_one(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write_loss_json(ws.root / "experiments/a/loss.json", [1.25, 1.5])
    write_loss_json(ws.root / "experiments/b/loss.json", [1.25, 1.5])
    result = ws.gates(
        capsys,
        "check",
        "loss",
        "experiments/a/loss.json",
        "experiments/b/loss.json",
        "--required-steps",
        "0",
    )
    assert result.code == 2
    assert "--required-steps" in result.err and "x>=1" in result.err
    assert ws.gates(capsys, "steps", "--limit", "-1").code == 2


def test_a_nan_loss_is_named_by_its_place(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write(ws.root, "experiments/a/loss.json", '{"losses": [1.25, 1.5, 1.75, NaN]}\n')
    write_loss_json(ws.root / "experiments/b/loss.json", [1.25, 1.5, 1.75, 2.0])
    result = ws.gates(
        capsys,
        "check",
        "loss",
        "experiments/a/loss.json",
        "experiments/b/loss.json",
        "--required-steps",
        "2",
    )
    assert result.code == 2
    assert "experiments/a/loss.json: $.losses[3]: NaN is not finite" in result.err


def test_key_new_creates_its_folder_private(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "home/.config/gates/ci.key"
    result = run_gates(capsys, "key", "new", str(key))
    assert result.code == 0, result.err
    assert key.is_file()
    for folder in (key.parent, key.parent.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def gates_without_override(ws: Workspace, *args: str) -> Result:
    """The real CLI in a subprocess that file modes bind: as root (this machine), without the
    capabilities that let root read any file; as anyone else, as is."""
    command = [sys.executable, "-m", "gates", "-C", str(ws.root), *args]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            # root reads any file whatever its mode, so the refusal under test cannot happen
            # without dropping root's file capabilities, which needs setpriv (util-linux,
            # present on this machine and in CI's image); elsewhere run the tests as non-root
            pytest.skip(
                "running as root without setpriv (util-linux): root reads files whatever their "
                "mode, so this check cannot run; install util-linux or run the tests as non-root"
            )
        drop = "-dac_override,-dac_read_search"
        command = [setpriv, "--bounding-set", drop, "--inh-caps", drop, "--", *command]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    return Result(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def receipted(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> Workspace:
    write_loss_json(ws.root / "results/paddle/loss.json", [1.25, 1.5])
    receipt_of(ws, capsys, "results/paddle/loss.json")
    write_loss_json(ws.root / "results/torch/loss.json", [1.25, 1.5])
    receipt_of(ws, capsys, "results/torch/loss.json")
    return ws


@pytest.mark.parametrize(
    ("target", "where", "reason"),
    [
        (
            "results/paddle/loss.json",
            "results/paddle/loss.receipt.json",
            "subject results/paddle/loss.json cannot be read: Permission denied",
        ),
        (
            "results/paddle/loss.receipt.json",
            "results/paddle/loss.receipt.json",
            "receipt cannot be read: Permission denied",
        ),
        ("results/paddle", "results/paddle", "folder cannot be read: Permission denied"),
    ],
)
@pytest.mark.slow
def test_an_unreadable_file_or_folder_is_rejected_by_name_and_the_report_produced(
    receipted: Workspace, target: str, where: str, reason: str
) -> None:
    path = receipted.root / target
    path.chmod(0)
    try:
        result = gates_without_override(receipted, "audit", "--format", "json")
    finally:
        path.chmod(0o755 if path.is_dir() else 0o644)
    assert "internal error" not in result.err, result.err
    assert result.code == 1
    report = json.loads(result.out)
    receipts = {r["path"]: r for r in report["receipts"]}
    assert receipts[where]["status"] == "rejected"
    assert reason in receipts[where]["reason"]
    assert receipts["results/torch/loss.receipt.json"]["status"] != "rejected"


@pytest.mark.slow
def test_an_unreadable_contract_is_an_error_contract_and_the_report_produced(
    receipted: Workspace,
) -> None:
    contract = receipted.root / "contracts/tensor-inventory.toml"
    contract.chmod(0)
    try:
        text = gates_without_override(receipted, "audit")
        result = gates_without_override(receipted, "audit", "--format", "json")
    finally:
        contract.chmod(0o644)
    assert "internal error" not in result.err + text.err, result.err + text.err
    assert result.code == 2 and text.code == 2
    report = json.loads(result.out)
    broken = next(c for c in report["contracts"] if c["id"] == "contracts/tensor-inventory.toml")
    assert broken["dischargeStatus"] == "error"
    assert "cannot be read: Permission denied" in broken["criteria"][0]["detail"]
    assert len(report["contracts"]) > 1, "the other contracts are still judged"
    assert "contracts/tensor-inventory.toml" in text.out and "verdict=blocked" in text.out


@pytest.mark.slow
def test_an_unreadable_contracts_folder_is_named(receipted: Workspace) -> None:
    folder = receipted.root / "contracts"
    folder.chmod(0)
    try:
        result = gates_without_override(receipted, "audit", "--format", "json")
    finally:
        folder.chmod(0o755)
    assert "internal error" not in result.err, result.err
    assert result.code == 2
    report = json.loads(result.out)
    assert report["verdict"] == "blocked"
    details = [c["criteria"][0]["detail"] for c in report["contracts"]]
    assert any("contracts folder cannot be read" in d for d in details), details


@pytest.mark.parametrize(
    ("file", "edit", "problem"),
    [
        (
            "contracts/results-schema-and-provenance.toml",
            ("blocking = true", "blockng = true"),
            "unknown key",
        ),
        ("contracts/mtp.waiver.toml", None, "key 'expires'"),
    ],
)
def test_a_proposed_policy_file_that_does_not_load_is_invalid_in_every_format(
    ws: Workspace,
    capsys: pytest.CaptureFixture[str],
    file: str,
    edit: tuple[str, str] | None,
    problem: str,
) -> None:
    commit_all(ws.repo, "policy on main")
    ws.repo.git.checkout("-q", "-b", "pr")
    path = ws.root / file
    if edit is None:  # a waiver without its expiry date
        write(
            ws.root,
            file,
            'contract = "contract_environment.tensor-inventory"\nowner = "me"\nreason = "x"\n',
        )
    else:
        path.write_text(path.read_text().replace(*edit, 1))
    commit_all(ws.repo, "a typo in the policy")
    expected = f"{file}: "
    outputs = {
        fmt: ws.gates(capsys, "--policy-ref", "main", "audit", "--format", fmt)
        for fmt in ("text", "json", "github", "junit")
    }
    outputs["status"] = ws.gates(capsys, "--policy-ref", "main", "status")
    for fmt, result in outputs.items():
        assert "internal error" not in result.err, (fmt, result.err)
        assert "invalid proposed policy change" in result.out, (fmt, result.out)
        assert expected in result.out and problem in result.out, (fmt, result.out)
    report = json.loads(outputs["json"].out)
    assert report["verdict"] == "blocked"
    assert any(b.startswith("invalid proposed policy change: " + file) for b in report["blockers"])


def test_audit_json_prints_its_one_document_even_when_nothing_can_be_judged(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    result = ws.gates(capsys, "--policy-ref", "no-such-branch", "audit", "--format", "json")
    assert result.code == 2
    document = json.loads(result.out)
    assert document["verdict"] == "error"
    assert "no-such-branch does not" in document["error"]
    assert document["blockers"] == [document["error"]]
    assert "no-such-branch does not" in result.err


@pytest.mark.parametrize(
    ("kind", "subject"),
    [
        ("env", "results/paddle/env.json"),
        ("manifest", "results/paddle/manifest.json"),
        ("structure_parity", "outputs/parity.json"),
        ("checkpoint_check", "outputs/checkpoint_check.json"),
        ("config_check", "outputs/config_check.json"),
    ],
)
def test_a_deeply_nested_subject_never_crashes_a_report(
    ws: Workspace, capsys: pytest.CaptureFixture[str], kind: str, subject: str
) -> None:
    """A receipted file is read by contracts, the status block and claims: nesting deeper
    than the interpreter parses is bad input there too, never a crash."""
    deep = '{"a": ' * 100_000 + "1" + "}" * 100_000
    write(ws.root, subject, deep)
    created = ws.gates(
        capsys, "receipt", "create", "--kind", kind, "--subject", subject, "--framework", "paddle"
    )
    assert "internal error" not in created.err, created.err
    _, report = audit_json(ws, capsys)
    assert report["verdict"] == "blocked"
    for args in (("audit",), ("status",), ("steps",)):
        result = ws.gates(capsys, *args)
        assert "internal error" not in result.err, (args, result.err)
        assert result.code in (1, 2), (args, result.err)
    body = ws.root.parent / "pr.md"
    body.write_text("max_diff=1.5\n")
    claims = ws.gates(capsys, "claims", "check", str(body))
    assert "internal error" not in claims.err, claims.err


@pytest.mark.slow
def test_a_proposed_trust_file_that_does_not_load_is_invalid(
    ws: Workspace,
    capsys: pytest.CaptureFixture[str],
    signing: TrustSetup,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (ws.root / "trust").mkdir()
    shutil.copy(signing.trust, ws.root / "trust/trust.toml")
    shutil.copy(signing.key.with_suffix(".pub"), ws.root / "trust/ci.pub")
    config = ws.root / "gates.toml"
    text = config.read_text().replace("exclude = []", 'exclude = ["trust"]')
    config.write_text(text + '\n[trust]\nref = "main"\npath = "trust/trust.toml"\n')
    commit_all(ws.repo, "policy and trust on main")
    ws.repo.git.checkout("-q", "-b", "pr")
    monkeypatch.delenv("GATES_TRUST")
    edited = ws.root / "trust/trust.toml"
    edited.write_text(edited.read_text().replace("ci.pub", "missing.pub"))
    for fmt in ("text", "json", "github", "junit"):
        result = ws.gates(capsys, "--policy-ref", "main", "audit", "--format", fmt)
        assert "internal error" not in result.err, result.err
        assert "invalid proposed policy change" in result.out, (fmt, result.out)
        assert "trust/trust.toml: changed in the worktree and does not load" in result.out, fmt
    report = json.loads(ws.gates(capsys, "--policy-ref", "main", "audit", "--format", "json").out)
    assert report["verdict"] == "blocked"
    assert report["policy"]["trust_anchors"]["signers"], "the trust in force still applies"
