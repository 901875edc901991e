"""`gates attest export` and `gates attest verify`: the verdict as others can check it, with
gates and with securesystemslib alone. Real keys, real signatures, real git repositories."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

from tests.helpers import (
    TrustSetup,
    Workspace,
    commit_all,
    declare_entrypoints,
    make_trust,
    run_gates,
    signed_run,
)
from tests.lossgen import train_losses

REMOTE = "https://ci-bot:ghp_secret@github.com/glm-port/glm52-paddle.git"


@pytest.fixture
def trusted(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> Workspace:
    """Both sides run for real under `gates run`, signed by the trusted CI key, and a remote."""
    declare_entrypoints(ws.root)
    commit_all(ws.repo, "declare the entrypoints")
    ws.repo.git.remote("add", "origin", REMOTE)
    losses = train_losses(100)
    signed_run(ws.root, capsys, "torch", losses)
    signed_run(ws.root, capsys, "paddle", losses)
    return ws


@pytest.fixture
def exported(trusted: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Path:
    out = tmp_path / "export"
    result = trusted.gates(capsys, "attest", "export", "--out", str(out))
    assert result.code == 1, result.err  # blocked: no checkpoints for the tensor inventory
    return out


def verify(capsys: pytest.CaptureFixture[str], folder: Path, trust: Path, *args: str) -> object:
    result = run_gates(
        capsys, "attest", "verify", str(folder), "--trust", str(trust), "--format", "json", *args
    )
    assert result.code in (0, 1), result.err
    document = json.loads(result.out)
    assert document["verified"] is (result.code == 0) or "--expect-pass" in args
    return document


def vsa_payload(folder: Path) -> dict[str, object]:
    envelope = json.loads((folder / "vsa.dsse.json").read_text())
    statement: dict[str, object] = json.loads(base64.b64decode(envelope["payload"]))
    return statement


@pytest.mark.slow
def test_the_vsa_carries_the_audit_figures_and_the_remote_without_credentials(
    trusted: Workspace, exported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    predicate = vsa_payload(exported)["predicate"]
    assert isinstance(predicate, dict)
    head = trusted.repo.head.commit.hexsha
    assert predicate["resourceUri"] == f"git+https://github.com/glm-port/glm52-paddle.git@{head}"
    assert "ghp_secret" not in json.dumps(predicate)
    audit = predicate["gatesAudit"]
    assert audit["verdict"] == "blocked"
    assert audit["commit"] == head
    assert audit["formal_alignment_steps"] == 100
    assert audit["required_steps"] == 100
    statuses = {c["id"]: c["status"] for c in audit["contracts"]}
    judged = json.loads(trusted.gates(capsys, "audit", "--format", "json").out)
    assert statuses == {c["id"]: c["dischargeStatus"] for c in judged["contracts"]}
    assert statuses["contract_environment.source-freeze-head-vs-pin"] == "discharged"
    assert statuses["contract_environment.tensor-inventory"] != "discharged"
    assert audit["policy"] == {"protected": False, "ref": None, "commit": None}


@pytest.mark.slow
def test_the_policy_commit_is_in_the_vsa_when_protected(
    trusted: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "export"
    result = trusted.gates(
        capsys, "--policy-ref", "refs/heads/main", "attest", "export", "--out", str(out)
    )
    assert result.code == 1, result.err
    predicate = vsa_payload(out)["predicate"]
    assert isinstance(predicate, dict)
    main = trusted.repo.commit("main").hexsha
    assert predicate["gatesAudit"]["policy"] == {
        "protected": True,
        "ref": "refs/heads/main",
        "commit": main,
    }
    assert predicate["policy"]["digest"]["gitCommit"] == main


@pytest.mark.slow
def test_verify_accepts_an_untouched_export(
    exported: Path, capsys: pytest.CaptureFixture[str], signing: TrustSetup
) -> None:
    text = run_gates(capsys, "attest", "verify", str(exported), "--trust", str(signing.trust))
    assert text.code == 0, text.out + text.err
    assert "verificationResult=FAILED verdict=blocked formal_alignment_steps = 100 / 100" in (
        text.out
    )
    assert "verified: 8 envelope(s) and the VSA" in text.out
    document = verify(capsys, exported, signing.trust)
    assert document["problems"] == []  # type: ignore[index]
    expecting = run_gates(
        capsys, "attest", "verify", str(exported), "--trust", str(signing.trust), "--expect-pass"
    )
    assert expecting.code == 1
    assert "expected PASSED, the VSA says FAILED" in expecting.out


@pytest.mark.slow
def test_securesystemslib_alone_verifies_the_export(exported: Path, signing: TrustSetup) -> None:
    """What a third party does without gates: DSSE signatures, then the VSA's input digests
    recomputed over each envelope's canonical JSON (sorted keys, no whitespace)."""
    pem = signing.key.with_suffix(".pub").read_text().encode()
    key = SSlibKey.from_crypto(load_pem_public_key(pem))
    digests = {}
    for path in sorted(exported.glob("*.dsse.json")):
        document = json.loads(path.read_text())
        canonical = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
        digests[hashlib.sha256(canonical).hexdigest()] = path.name
        assert key.keyid in Envelope.from_dict(document).verify([key], 1)
    inputs = vsa_payload(exported)["predicate"]["inputAttestations"]  # type: ignore[index]
    assert inputs
    assert all(entry["digest"]["sha256"] in digests for entry in inputs)


@pytest.mark.slow
def test_a_tampered_envelope_fails_with_the_reason(
    exported: Path, capsys: pytest.CaptureFixture[str], signing: TrustSetup
) -> None:
    path = exported / "results__paddle__loss.dsse.json"
    envelope = json.loads(path.read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["framework"] = "torch"
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    path.write_text(json.dumps(envelope))
    result = run_gates(capsys, "attest", "verify", str(exported), "--trust", str(signing.trust))
    assert result.code == 1
    assert "results__paddle__loss.dsse.json: FAILED (tampered: attestation: signature by ci" in (
        result.out
    )
    assert "input attestation results/paddle/loss.receipt.json" in result.out
    assert "NOT verified" in result.out


@pytest.mark.slow
def test_a_vsa_by_an_untrusted_key_fails(
    trusted: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path, signing: TrustSetup
) -> None:
    stranger = make_trust(tmp_path / "stranger", name="stranger")
    out = tmp_path / "export"
    result = trusted.gates(
        capsys, "attest", "export", "--out", str(out), "--key", str(stranger.key)
    )
    assert result.code == 1, result.err
    document = verify(capsys, out, signing.trust)
    assert document["verified"] is False  # type: ignore[index]
    assert any(
        p.startswith("vsa.dsse.json: untrusted: signed by key") and "not a trust anchor" in p
        for p in document["problems"]  # type: ignore[index]
    )


@pytest.mark.slow
def test_a_vsa_whose_inputs_are_missing_fails(
    exported: Path, capsys: pytest.CaptureFixture[str], signing: TrustSetup
) -> None:
    (exported / "results__torch__loss.dsse.json").unlink()
    document = verify(capsys, exported, signing.trust)
    assert document["verified"] is False  # type: ignore[index]
    missing = [p for p in document["problems"] if "missing" in p]  # type: ignore[index]
    assert len(missing) == 1
    assert missing[0].startswith(
        "vsa.dsse.json: input attestation results/torch/loss.receipt.json (sha256 "
    )
    assert missing[0].endswith("...) is missing from the folder")


@pytest.mark.slow
def test_an_unsigned_vsa_and_a_missing_trust_file_fail(
    trusted: Workspace,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    signing: TrustSetup,
) -> None:
    monkeypatch.delenv("GATES_SIGNING_KEY")
    out = tmp_path / "export"
    assert trusted.gates(capsys, "attest", "export", "--out", str(out)).code == 1
    document = verify(capsys, out, signing.trust)
    assert "vsa.dsse.json: the VSA is unsigned (vsa.intoto.json)" in document["problems"][-1]  # type: ignore[index]
    monkeypatch.delenv("GATES_TRUST")
    result = run_gates(capsys, "attest", "verify", str(out))
    assert result.code == 2
    assert result.err.strip().splitlines() == [
        "gates: error: no trust file to verify with (hint: pass --trust FILE (the signers you "
        "trust) or set GATES_TRUST)"
    ]


def test_export_without_a_remote_needs_a_resource_uri(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "export"
    result = ws.gates(capsys, "attest", "export", "--out", str(out))
    assert result.code == 2
    assert "cannot name the repository for the VSA's resourceUri: no remote" in result.err
    assert "--resource-uri" in result.err
    assert not out.exists()
    uri = "https://gitlab.example/ml/glm52.git"
    result = ws.gates(capsys, "attest", "export", "--out", str(out), "--resource-uri", uri)
    assert result.code == 1, result.err
    head = ws.repo.head.commit.hexsha
    assert vsa_payload(out)["predicate"]["resourceUri"] == f"git+{uri}@{head}"  # type: ignore[index]


def test_an_scp_like_remote_is_named_by_host_and_path(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ws.repo.git.remote("add", "origin", "git@github.com:glm-port/glm52-paddle.git")
    out = tmp_path / "export"
    assert ws.gates(capsys, "attest", "export", "--out", str(out)).code == 1
    head = ws.repo.head.commit.hexsha
    assert vsa_payload(out)["predicate"]["resourceUri"] == (  # type: ignore[index]
        f"git+ssh://github.com/glm-port/glm52-paddle.git@{head}"
    )
