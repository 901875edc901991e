"""External evidence roots: a checkpoint outside the workspace, named in gates.toml, checked,
bound by receipts, re-verified by the audit, and refused when the root is unusable."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.glm_fixture import MTP, paddle_arrays, reference_arrays, write_checkpoint
from tests.helpers import Workspace, commit_all

CAND = "results/paddle/checkpoint"
INVENTORY_ID = "contract_environment.tensor-inventory"
HOUR_AGO_NS = 3600 * 10**9


def official(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A read-only GLM-like checkpoint outside the workspace, files an hour old."""
    data = tmp_path / "shared-storage"
    folder = write_checkpoint(data / "glm-5.2", reference_arrays(), shards=3)
    past = folder.stat().st_mtime_ns - HOUR_AGO_NS
    for path in folder.iterdir():
        os.utime(path, ns=(past, past))
    monkeypatch.setenv("GLM52_DIR", str(data))
    return folder


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
    }


def repin(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    assert ws.gates(capsys, "freeze", "pin", "HEAD").code == 0
    commit_all(ws.repo, "pin")


@pytest.fixture
def external_ws(
    ws: Workspace,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Workspace:
    official(tmp_path, monkeypatch)
    config = ws.root / "gates.toml"
    config.write_text(config.read_text() + '\n[evidence.external]\nofficial = "${GLM52_DIR}"\n')
    commit_all(ws.repo, "external root")
    repin(ws, capsys)
    return ws


def rejected(audit: dict[str, object]) -> dict[str, str]:
    receipts = audit["receipts"]
    assert isinstance(receipts, list)
    return {r["path"]: r["reason"] for r in receipts if r["status"] == "rejected"}


def audit_json(ws: Workspace, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    result = ws.gates(capsys, "audit", "--format", "json", *extra)
    document: dict[str, object] = json.loads(result.out)
    return document


def test_a_checkpoint_below_a_root_is_checked_bound_and_reverified(
    external_ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "shared-storage"
    before = snapshot(data)
    for path in data.rglob("*"):
        path.chmod(0o555 if path.is_dir() else 0o444)
    data.chmod(0o555)
    try:
        by_label = external_ws.gates(
            capsys, "check", "checkpoint", "external:official/glm-5.2", "--format", "json"
        )
        assert by_label.code == 0, by_label.err
        figures = json.loads(by_label.out)
        assert figures["path"] == "external:official/glm-5.2"
        assert figures["valid"] is True and figures["incomplete"] == []
        by_path = external_ws.gates(
            capsys, "check", "checkpoint", str(data / "glm-5.2"), "--format", "json"
        )
        assert json.loads(by_path.out)["digest"] == figures["digest"]
        receipt = json.loads(
            (external_ws.root / "outputs/checkpoint_check.receipt.json").read_text()
        )
        paths = [s["path"] for s in receipt["subjects"]]
        assert paths == [
            "outputs/checkpoint_check.json",
            *(f"external:official/glm-5.2/model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)),
            "external:official/glm-5.2/model.safetensors.index.json",
        ]
        shard = data / "glm-5.2/model-00002-of-00003.safetensors"
        assert receipt["subjects"][2]["sha256"] == hashlib.sha256(shard.read_bytes()).hexdigest()
        assert receipt["subjects"][2]["size"] == shard.stat().st_size
        assert rejected(audit_json(external_ws, capsys)) == {}
        assert snapshot(data) == before, "nothing may be written into an external root"
    finally:
        for path in [data, *data.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)


def test_a_missing_or_unset_root_makes_its_receipts_unverifiable(
    external_ws: Workspace,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert external_ws.gates(capsys, "check", "checkpoint", "external:official/glm-5.2").code == 0
    monkeypatch.delenv("GLM52_DIR")
    audit = audit_json(external_ws, capsys)
    assert audit["verdict"] == "blocked"
    reason = rejected(audit)["outputs/checkpoint_check.receipt.json"]
    assert "external root 'official'" in reason and "GLM52_DIR is unset" in reason
    monkeypatch.setenv("GLM52_DIR", str(tmp_path / "not-mounted"))
    reason = rejected(audit_json(external_ws, capsys))["outputs/checkpoint_check.receipt.json"]
    assert "external root 'official'" in reason and "not available on this machine" in reason


def test_verify_all_catches_a_shard_replaced_with_size_and_mtime_kept(
    external_ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert external_ws.gates(capsys, "check", "checkpoint", "external:official/glm-5.2").code == 0
    assert rejected(audit_json(external_ws, capsys)) == {}
    shard = tmp_path / "shared-storage/glm-5.2/model-00001-of-00003.safetensors"
    info = shard.stat()
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    with shard.open("r+b") as handle:  # in place: same inode, same size
        handle.write(data)
    os.utime(shard, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert (shard.stat().st_ino, shard.stat().st_size) == (info.st_ino, info.st_size)
    # the stat key holds ctime, which an in-place write changes: even the cached audit sees it
    cached = rejected(audit_json(external_ws, capsys))
    assert "sha256 differs" in cached["outputs/checkpoint_check.receipt.json"]
    reasons = rejected(audit_json(external_ws, capsys, "--verify-all"))
    assert (
        "model-00001-of-00003.safetensors changed: sha256 differs"
        in (reasons["outputs/checkpoint_check.receipt.json"])
    )


def test_the_inventory_contract_reads_the_reference_from_a_root(
    external_ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_checkpoint(external_ws.root / CAND, paddle_arrays(reference_arrays()))
    contract = external_ws.root / "contracts/tensor-inventory.toml"
    text = contract.read_text().replace(
        "[params.placeholders]\n", f'[params.placeholders]\nmtp = "{MTP}"\n'
    )
    text = text.replace(
        'reference = "results/torch/checkpoint"', 'reference = "external:official/glm-5.2"'
    )
    contract.write_text(text)
    commit_all(external_ws.repo, "contract")
    repin(external_ws, capsys)

    def inventory() -> dict[str, object]:
        contracts = audit_json(external_ws, capsys)["contracts"]
        assert isinstance(contracts, list)
        found: dict[str, object] = next(c for c in contracts if c["id"] == INVENTORY_ID)
        return found

    assert inventory()["dischargeStatus"] == "discharged"
    monkeypatch.delenv("GLM52_DIR")
    result = inventory()
    assert result["dischargeStatus"] != "discharged"
    details = json.dumps(result["criteria"])
    assert "external:official/glm-5.2" in details and "GLM52_DIR is unset" in details


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("data/glm", "is a relative path"),
        ("/data/../etc", "contains '..'"),
        ("$GLM52_DIR", "write variables as ${NAME}"),
    ],
)
def test_bad_root_spellings_are_one_config_error(
    ws: Workspace, capsys: pytest.CaptureFixture[str], spec: str, message: str
) -> None:
    config = ws.root / "gates.toml"
    config.write_text(config.read_text() + f'\n[evidence.external]\nofficial = "{spec}"\n')
    result = ws.gates(capsys, "audit")
    assert result.code == 2
    assert "gates.toml" in result.err and "evidence.external.official" in result.err
    assert message in result.err and "Traceback" not in result.err


def test_a_root_that_links_into_the_workspace_is_refused(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write_checkpoint(ws.root / CAND, paddle_arrays(reference_arrays()))
    link = tmp_path / "looks-external"
    link.symlink_to(ws.root / "results")
    config = ws.root / "gates.toml"
    config.write_text(config.read_text() + f'\n[evidence.external]\nofficial = "{link}"\n')
    result = ws.gates(capsys, "check", "checkpoint", "external:official/paddle/checkpoint")
    assert result.code == 2
    assert "external root 'official'" in result.err and "overlaps the workspace" in result.err
    assert "a symlink to" in result.err


def test_paths_inside_a_root_follow_the_workspace_rules(
    external_ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "shared-storage"
    (data / "elsewhere").symlink_to(tmp_path)
    escape = external_ws.gates(capsys, "check", "checkpoint", "external:official/../etc")
    assert escape.code == 2 and "not a normalized workspace path" in escape.err
    through = external_ws.gates(capsys, "check", "checkpoint", "external:official/elsewhere")
    assert through.code == 2 and "goes through a symlink (elsewhere)" in through.err
    unknown = external_ws.gates(capsys, "check", "checkpoint", "external:mirror/glm-5.2")
    assert unknown.code == 2 and "no external root named 'mirror'" in unknown.err
    shard = data / "glm-5.2/model-00003-of-00003.safetensors"
    outside = tmp_path / "outside.safetensors"
    outside.write_bytes(shard.read_bytes())
    shard.unlink()
    shard.symlink_to(outside)
    linked = external_ws.gates(
        capsys, "check", "checkpoint", "external:official/glm-5.2", "--format", "json"
    )
    figures = json.loads(linked.out)
    assert linked.code == 1 and figures["valid"] is False
    assert any("model-00003-of-00003.safetensors: is a symlink" in h for h in figures["hygiene"])


def test_receipt_create_binds_an_external_file(
    external_ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = "external:official/glm-5.2/model.safetensors.index.json"
    made = external_ws.gates(
        capsys,
        "receipt",
        "create",
        "--kind",
        "checkpoint_check",
        "--subject",
        subject,
        "--output",
        "outputs/index.receipt.json",
    )
    assert made.code == 0, made.err
    receipt = json.loads((external_ws.root / "outputs/index.receipt.json").read_text())
    assert receipt["subjects"][0]["path"] == subject
    missing = external_ws.gates(
        capsys,
        "receipt",
        "create",
        "--kind",
        "checkpoint_check",
        "--subject",
        "external:official/glm-5.2/nope.json",
        "--output",
        "outputs/nope.receipt.json",
    )
    assert missing.code == 2 and "does not exist" in missing.err


def test_inventory_diff_reads_a_side_below_a_root(
    external_ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write_checkpoint(
        external_ws.root / CAND, paddle_arrays(reference_arrays(), drop_mtp_indexer=True)
    )
    contract = external_ws.root / "contracts/tensor-inventory.toml"
    contract.write_text(
        contract.read_text().replace(
            "[params.placeholders]\n", f'[params.placeholders]\nmtp = "{MTP}"\n'
        )
    )
    result = external_ws.gates(
        capsys, "inventory", "diff", "external:official/glm-5.2", CAND, "--format", "json"
    )
    assert result.code == 1, result.err
    document = json.loads(result.out)
    assert document["reference"]["path"] == "external:official/glm-5.2"
    assert document["counts"]["structural"] == 5
