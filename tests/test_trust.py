"""Attested evidence through the CLI: signed runs of the declared entrypoints, trust anchors
the PR cannot edit, the protected policy, and every forgery the issue lists."""

from __future__ import annotations

import base64
import copy
import json
import shutil
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

from gates.receipts.create import ReceiptRequest, create_receipt
from gates.receipts.model import ArtifactKind, Framework
from gates.trust.keys import configured_key
from gates.workspace.repository import open_workspace
from tests.helpers import (
    CPU_PROFILE,
    TrustSetup,
    Workspace,
    commit_all,
    declare_entrypoints,
    invocation_now,
    make_trust,
    run_script,
    signed_run,
    write,
)
from tests.lossgen import train_losses

RESULTS_ID = "acceptance_oracle.results-schema-and-provenance"
LOSS_RECEIPT = "results/paddle/loss.receipt.json"


def audit(ws: Workspace, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    result = ws.gates(capsys, *args, "audit", "--format", "json")
    assert result.code in (0, 1), result.err
    loaded: dict[str, object] = json.loads(result.out)
    return loaded


def receipts(report: dict[str, object]) -> dict[str, dict[str, object]]:
    return {r["path"]: r for r in report["receipts"]}  # type: ignore[union-attr,index]


@pytest.fixture
def trusted(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> Workspace:
    """Both sides run for real under `gates run`, signed by the trusted CI key."""
    declare_entrypoints(ws.root)
    commit_all(ws.repo, "declare the entrypoints")  # the policy in force on main
    losses = train_losses(100)
    signed_run(ws.root, capsys, "torch", losses)
    signed_run(ws.root, capsys, "paddle", losses)
    return ws


def test_a_signed_run_of_the_entrypoint_is_formal(
    trusted: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    report = audit(trusted, capsys)
    found = receipts(report)
    assert found["results/paddle/run.receipt.json"]["status"] == "formal"
    assert found[LOSS_RECEIPT]["status"] == "formal"
    assert found[LOSS_RECEIPT]["signer"] == "ci"
    assert report["formal_alignment_steps"] == 100


def test_unsigned_evidence_is_probe_with_the_reason_unsigned(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    declare_entrypoints(ws.root)
    monkeypatch.delenv("GATES_SIGNING_KEY")
    signed_run(ws.root, capsys, "paddle", train_losses(5), force=True)  # past the pre-flight
    entry = receipts(audit(ws, capsys))[LOSS_RECEIPT]
    assert (entry["status"], entry["reason"]) == ("probe", "unsigned")


def test_without_trust_anchors_nothing_is_formal(
    trusted: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GATES_TRUST")
    report = audit(trusted, capsys)
    assert report["formal_alignment_steps"] == 0
    assert "nothing can be formal" in report["policy"]["trust_anchors"]["source"]  # type: ignore[index]
    assert all(r["status"] != "formal" for r in receipts(report).values())


@pytest.mark.slow
def test_the_forgery_copy_and_receipt_by_hand_gives_nothing_formal(
    trusted: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    root = trusted.root
    write(root, "results/paddle/loss.json", json.dumps({"losses": train_losses(100, seed=9)}))
    result = trusted.gates(
        capsys, "receipt", "create", "--kind", "loss", "--framework", "paddle",
        "--subject", "results/paddle/loss.json", "--force",
    )  # fmt: skip
    assert result.code == 0
    report = audit(trusted, capsys)
    entry = receipts(report)[LOSS_RECEIPT]
    assert entry["status"] == "probe"
    assert "not from a signed run of the declared entrypoint" in str(entry["reason"])
    assert report["formal_alignment_steps"] == 0


def test_a_signed_run_of_cp_is_honest_and_not_formal(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    declare_entrypoints(ws.root)
    signed_run(ws.root, capsys, "torch", train_losses(5))
    (ws.root / "results/paddle").mkdir(parents=True, exist_ok=True)
    program = ("cp", str(ws.root / "results/torch/loss.json"), str(ws.root / "results/paddle"))
    # in the sandbox the torch results are not there to copy: cp fails, and says so
    result = signed_run(ws.root, capsys, "paddle", [], program=program, expect=1, force=True)
    assert "results/torch/loss.json': No such file or directory" in result.err
    found = receipts(audit(ws, capsys))
    run = found["results/paddle/run.receipt.json"]
    assert run["status"] == "probe"
    assert "the run failed (exit status 1)" in str(run["reason"])
    assert LOSS_RECEIPT not in found


def test_a_profile_that_contradicts_the_capture_is_not_formal(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    declare_entrypoints(ws.root)
    signed_run(
        ws.root,
        capsys,
        "paddle",
        train_losses(5),
        profile={**CPU_PROFILE, "device": "cuda"},
        force=True,
    )
    run = receipts(audit(ws, capsys))["results/paddle/run.receipt.json"]
    assert run["status"] == "probe"
    assert "profile claims device=cuda but the run captured cpu" in str(run["reason"])


def _edit(path: Path, change: object) -> None:
    document = json.loads(path.read_text())
    change(document)  # type: ignore[operator]
    path.write_text(json.dumps(document))


def _flip_payload(document: dict[str, object]) -> None:
    envelope = document["attestation"]
    payload = bytearray(base64.b64decode(envelope["payload"]))  # type: ignore[index]
    payload[-3] ^= 1
    envelope["payload"] = base64.b64encode(bytes(payload)).decode()  # type: ignore[index]


def _flip_signature(document: dict[str, object]) -> None:
    signature = document["attestation"]["signatures"][0]  # type: ignore[index]
    raw = bytearray(base64.b64decode(signature["sig"]))
    raw[0] ^= 1
    signature["sig"] = base64.b64encode(bytes(raw)).decode()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (_flip_payload, "does not match the receipt"),
        (_flip_signature, "signature by ci does not verify"),
    ],
)
def test_a_byte_changed_in_the_envelope_is_rejected(
    trusted: Workspace, capsys: pytest.CaptureFixture[str], change: object, reason: str
) -> None:
    _edit(trusted.root / LOSS_RECEIPT, change)
    report = audit(trusted, capsys)
    entry = receipts(report)[LOSS_RECEIPT]
    assert entry["status"] == "rejected"
    assert reason in str(entry["reason"])
    assert report["verdict"] == "blocked"
    assert report["formal_alignment_steps"] == 0


def test_a_byte_changed_in_a_subject_is_rejected(
    trusted: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    path = trusted.root / "results/paddle/loss.json"
    path.write_text(path.read_text().replace("1", "2", 1))
    report = audit(trusted, capsys)
    assert receipts(report)[LOSS_RECEIPT]["status"] == "rejected"
    assert report["formal_alignment_steps"] == 0


@pytest.mark.parametrize(
    ("frameworks", "revoked", "reason"),
    [
        ('["*"]', False, "which is not a trust anchor"),
        ('["torch"]', False, "trusted only for torch, not for paddle"),
        ('["*"]', True, "whose key is revoked"),
    ],
)
@pytest.mark.slow
def test_signers_that_may_not_attest_give_probe(
    trusted: Workspace,
    *,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    signing: TrustSetup,
    frameworks: str,
    revoked: bool,
    reason: str,
) -> None:
    if reason.startswith("which"):
        other = make_trust(tmp_path / "other", name="stranger")
        monkeypatch.setenv("GATES_TRUST", str(other.trust))
    else:
        trust = tmp_path / "trust.toml"
        shutil.copy(signing.key.with_suffix(".pub"), tmp_path / "ci.pub")
        trust.write_text(
            f'[[signers]]\nname = "ci"\npublic_key = "ci.pub"\nframeworks = {frameworks}\n'
            f"revoked = {str(revoked).lower()}\n"
        )
        monkeypatch.setenv("GATES_TRUST", str(trust))
    report = audit(trusted, capsys)
    entry = receipts(report)["results/paddle/run.receipt.json"]
    assert entry["status"] == "probe"
    assert reason in str(entry["reason"])
    assert report["formal_alignment_steps"] == 0


def test_a_receipt_moved_to_the_other_side_counts_for_neither(
    trusted: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    root = trusted.root
    shutil.copy(root / "results/torch/loss.receipt.json", root / LOSS_RECEIPT)
    shutil.copy(root / "results/torch/loss.json", root / "results/paddle/loss.json")
    report = audit(trusted, capsys)
    assert report["formal_alignment_steps"] == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[signers]\nname=", "trust file is not valid TOML"),
        ('[[signers]]\nname = "ci"\npublic_key = "gone.pub"\nframeworks = ["*"]\n', "not found"),
    ],
)
def test_a_bad_trust_file_is_one_error_line(
    ws: Workspace,
    *,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    text: str,
    message: str,
) -> None:
    trust = tmp_path / "bad-trust.toml"
    trust.write_text(text)
    monkeypatch.setenv("GATES_TRUST", str(trust))
    result = ws.gates(capsys, "audit")
    assert result.code == 2
    assert message in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert "Traceback" not in result.err


def test_a_trust_file_inside_the_workspace_is_refused(
    ws: Workspace, capsys: pytest.CaptureFixture[str], signing: TrustSetup
) -> None:
    shutil.copy(signing.trust, ws.root / "trust.toml")
    result = ws.gates(capsys, "--trust", str(ws.root / "trust.toml"), "audit")
    assert result.code == 2
    assert "inside the workspace" in result.err


@pytest.mark.parametrize("problem", ["missing", "malformed", "world-readable"])
def test_a_bad_signing_key_writes_nothing(
    ws: Workspace,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    problem: str,
) -> None:
    key = tmp_path / "k.key"
    if problem == "malformed":
        key.write_text("not a key\n")
        key.chmod(0o600)
    elif problem == "world-readable":
        assert ws.gates(capsys, "key", "new", str(key)).code == 0
        key.chmod(0o644)
    monkeypatch.setenv("GATES_SIGNING_KEY", str(key))
    write(ws.root, "results/paddle/loss.json", json.dumps({"losses": [1.5]}))
    result = ws.gates(
        capsys, "receipt", "create", "--kind", "loss", "--subject", "results/paddle/loss.json"
    )
    assert result.code == 2
    assert "GATES_SIGNING_KEY" in result.err
    assert not (ws.root / LOSS_RECEIPT).exists()
    declare_entrypoints(ws.root)
    run = signed_run(ws.root, capsys, "paddle", [1.5], out="results/p2", expect=2)
    assert not (ws.root / "results/p2/manifest.json").exists(), run.err


def test_key_new_and_pub(ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    key = tmp_path / "ci.key"
    made = ws.gates(capsys, "key", "new", str(key))
    assert made.code == 0
    assert (key.stat().st_mode & 0o777) == 0o600
    pub = ws.gates(capsys, "key", "pub", str(key))
    assert pub.out.startswith("-----BEGIN PUBLIC KEY-----")
    again = ws.gates(capsys, "key", "new", str(key))
    assert (again.code, "refusing to overwrite" in again.err) == (2, True)
    inside = ws.gates(capsys, "key", "new", str(ws.root / "results/ci.key"))
    assert inside.code == 2
    assert "inside" in inside.err


@pytest.mark.slow
def test_two_receipts_binding_one_file_to_different_digests_are_rejected(
    trusted: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    root = trusted.root
    original = (root / "results/paddle/loss.json").read_bytes()
    write(root, "results/paddle/loss.json", json.dumps({"losses": [1.25]}))
    trusted.gates(
        capsys, "receipt", "create", "--kind", "loss", "--subject", "results/paddle/loss.json",
        "-o", "results/paddle/second.receipt.json",
    )  # fmt: skip
    (root / "results/paddle/loss.json").write_bytes(original)
    report = audit(trusted, capsys)
    found = receipts(report)
    assert found["results/paddle/second.receipt.json"]["status"] == "rejected"
    assert "changed" in str(found["results/paddle/second.receipt.json"]["reason"])
    assert report["verdict"] == "blocked"


# -- the policy in force comes from a protected ref -------------------------------------


def _protected(trusted: Workspace) -> None:
    """main holds the policy; the PR is a branch off it."""
    commit_all(trusted.repo, "policy on main")
    trusted.repo.git.checkout("-q", "-b", "pr")


@pytest.mark.slow
def test_a_relaxed_contract_and_a_waiver_in_the_pr_are_shown_not_applied(
    trusted: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    _protected(trusted)
    root = trusted.root
    contract = root / "contracts/results-schema-and-provenance.toml"
    contract.write_text(contract.read_text().replace("required_steps = 100", "required_steps = 2"))
    write(
        root,
        "contracts/mtp.waiver.toml",
        'contract = "contract_environment.tensor-inventory"\nowner = "me"\nreason = "x"\n'
        "expires = 2099-12-31\n",
    )
    (root / "contracts/manifest-format-key.toml").unlink()
    commit_all(trusted.repo, "relax the policy")
    report = audit(trusted, capsys, "--policy-ref", "main")
    policy = report["policy"]
    assert policy["protected"] is True  # type: ignore[index]
    changes = "\n".join(policy["proposed_changes"])  # type: ignore[index]
    assert "contracts/results-schema-and-provenance.toml: changed" in changes
    assert "contracts/mtp.waiver.toml: added" in changes
    assert "contracts/manifest-format-key.toml: deleted" in changes
    assert report["required_steps"] == 100
    assert report["waivers"] == []
    assert report["verdict"] == "blocked"
    ids = [c["id"] for c in report["contracts"]]  # type: ignore[union-attr,index]
    assert "contract_environment.manifest-format-key" in ids


@pytest.mark.slow
def test_the_freeze_is_judged_by_the_protected_settings(
    trusted: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    _protected(trusted)
    root = trusted.root
    config = root / "gates.toml"
    config.write_text(config.read_text().replace("exclude = []", 'exclude = ["paddleformers"]'))
    write(root, "paddleformers/glm/modeling.py", "def forward(x):\n    return 2 * x\n")
    script = [sys.executable, str(Path(__file__).parent.parent / "audit_source_freeze.py")]
    unprotected = run_script(*script[1:], "-C", str(root))
    assert unprotected.code == 0  # the worktree's own settings hide the change...
    protected = run_script(*script[1:], "-C", str(root), "--policy-ref", "main")
    assert protected.code == 1, protected.out  # ...the protected ones do not
    assert "paddleformers/glm/modeling.py" in protected.out
    report = audit(trusted, capsys, "--policy-ref", "main")
    assert any("[freeze] exclude" in c for c in report["policy"]["proposed_changes"])  # type: ignore[index]


def test_a_policy_ref_that_does_not_resolve_is_an_error(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    result = ws.gates(capsys, "--policy-ref", "no-such-branch", "audit")
    assert result.code == 2
    assert "does not name a commit" in result.err


def test_unprotected_policy_is_said_in_every_format(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    for fmt in ("text", "json", "github", "junit", "markdown"):
        result = (
            ws.gates(capsys, "audit", "--format", fmt)
            if fmt != "markdown"
            else (ws.gates(capsys, "status"))
        )
        assert "nprotected" in result.out or "NPROTECTED" in result.out, fmt


@pytest.mark.slow
def test_trust_from_a_protected_ref_ignores_worktree_edits(
    trusted: Workspace,
    capsys: pytest.CaptureFixture[str],
    signing: TrustSetup,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = trusted.root
    (root / "trust").mkdir()
    shutil.copy(signing.trust, root / "trust/trust.toml")
    shutil.copy(signing.key.with_suffix(".pub"), root / "trust/ci.pub")
    config = root / "gates.toml"
    text = config.read_text().replace("exclude = []", 'exclude = ["trust"]')
    config.write_text(text + '\n[trust]\nref = "main"\npath = "trust/trust.toml"\n')
    _protected(trusted)
    monkeypatch.delenv("GATES_TRUST")
    report = audit(trusted, capsys, "--policy-ref", "main")
    assert receipts(report)[LOSS_RECEIPT]["status"] == "formal"
    assert "main:trust/trust.toml" in report["policy"]["trust_anchors"]["source"]  # type: ignore[index]
    edited = root / "trust/trust.toml"
    edited.write_text(edited.read_text().replace('"*"', '"torch"'))
    report = audit(trusted, capsys, "--policy-ref", "main")
    assert receipts(report)[LOSS_RECEIPT]["status"] == "formal"
    assert any("trust.toml: changed" in c for c in report["policy"]["proposed_changes"])  # type: ignore[index]
    unprotected = audit(trusted, capsys)  # without a policy ref, [trust] ref is not honoured
    assert receipts(unprotected)[LOSS_RECEIPT]["status"] == "probe"


@pytest.mark.slow
def test_a_checker_output_that_disagrees_with_the_recomputation_is_rejected(
    trusted: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    root = trusted.root
    check = trusted.gates(
        capsys, "check", "loss", "results/torch/loss.json", "results/paddle/loss.json"
    )
    assert check.code == 0
    output = root / "outputs/loss_check.json"
    document = json.loads(output.read_text())
    document["consistent_steps"] = 100 if document["consistent_steps"] != 100 else 7
    output.write_text(json.dumps(document))
    receipt = json.loads((root / "outputs/loss_check.receipt.json").read_text())
    inputs = receipt["provenance"]["inputs"]
    (root / "outputs/loss_check.receipt.json").unlink()
    (root / "outputs/forged.json").write_text(json.dumps(document))
    made = trusted.gates(
        capsys, "receipt", "create", "--kind", "loss_check", "--subject", "outputs/forged.json",
    )  # fmt: skip
    assert made.code == 0
    forged = root / "outputs/forged.receipt.json"
    assert inputs  # the signer could name inputs; the recomputation still catches the lie
    entry = receipts(audit(trusted, capsys))["outputs/forged.receipt.json"]
    assert entry["status"] == "rejected"
    assert "recomput" in str(entry["reason"])
    assert forged.exists()


def test_export_writes_envelopes_that_securesystemslib_verifies(
    trusted: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path, signing: TrustSetup
) -> None:
    out = tmp_path / "export"
    result = trusted.gates(
        capsys,
        "attest",
        "export",
        "--out",
        str(out),
        "--format",
        "json",
        "--resource-uri",
        "https://github.com/glm-port/glm52-paddle.git",
    )
    assert result.code == 1  # blocked: the tensor inventory has no checkpoints here
    summary = json.loads(result.out)
    assert summary["vsa_signed"] is True
    pub = (signing.key.with_suffix(".pub")).read_text()
    key = SSlibKey.from_crypto(load_pem_public_key(pub.encode()))
    for name in [*summary["envelopes"], summary["vsa"]]:
        document = json.loads((out / name).read_text())
        envelope = Envelope.from_dict(copy.deepcopy(document))
        assert key.keyid in envelope.verify([key], 1)
    vsa = Envelope.from_dict(json.loads((out / "vsa.dsse.json").read_text()))
    statement = json.loads(vsa.payload)
    assert statement["predicateType"] == "https://slsa.dev/verification_summary/v1"
    assert statement["predicate"]["verificationResult"] == "FAILED"
    assert len(statement["predicate"]["inputAttestations"]) == len(summary["envelopes"])


def test_a_run_cannot_vouch_for_a_file_it_did_not_write(
    trusted: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """A signer using the API to name an honest run as the input of another file: probe."""
    root = trusted.root
    run = json.loads((root / "results/paddle/run.receipt.json").read_text())
    write(root, "results/paddle/extra/loss.json", json.dumps({"losses": train_losses(100)}))
    workspace = open_workspace(root)
    request = ReceiptRequest(
        kind=ArtifactKind.LOSS,
        subjects=("results/paddle/extra/loss.json",),
        framework=Framework.PADDLE,
        profile=CPU_PROFILE,
        inputs=(run["id"],),
        output="results/paddle/extra/loss.receipt.json",
    )
    create_receipt(workspace, request, signing_key=configured_key(invocation_now().signing_key))
    entry = receipts(audit(trusted, capsys))["results/paddle/extra/loss.receipt.json"]
    assert entry["status"] == "probe"
    assert "bound its files" in str(entry["reason"])


def test_a_trust_file_naming_a_key_that_is_not_ed25519_is_an_error(
    ws: Workspace,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    not_ed25519 = base64.b64encode(b"\x30" * 44).decode()
    (tmp_path / "rsa.pub").write_text(
        f"-----BEGIN PUBLIC KEY-----\n{not_ed25519}\n-----END PUBLIC KEY-----\n"
    )
    trust = tmp_path / "trust.toml"
    trust.write_text('[[signers]]\nname = "x"\npublic_key = "rsa.pub"\nframeworks = ["*"]\n')
    monkeypatch.setenv("GATES_TRUST", str(trust))
    result = ws.gates(capsys, "audit")
    assert result.code == 2
    assert "not a PEM ed25519 public key" in result.err


def test_key_pub_of_a_missing_key_is_one_error_line(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    result = ws.gates(capsys, "key", "pub", str(tmp_path / "nope.key"))
    assert result.code == 2
    assert "signing key file not found" in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_a_policy_ref_without_gates_toml_is_an_error(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    ws.repo.git.checkout("-q", "--orphan", "bare")
    ws.repo.git.rm("-rq", "--cached", ".")
    ws.repo.git.commit("-q", "--allow-empty", "-m", "an empty tree")
    ws.repo.git.checkout("-q", "-f", "main")
    result = ws.gates(capsys, "--policy-ref", "bare", "audit")
    assert result.code == 2
    assert "has no gates.toml" in result.err
