"""Receipts through the CLI: stamping, verifying, and every way a receipt is rejected."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gates.core.content_ids import content_id
from gates.core.hashing import StatCache
from gates.core.json_writer import pretty_json
from gates.receipts.verify import JudgingContext, judge
from tests.helpers import Workspace, cache_file, commit_all, write

LOSS = "results/paddle/loss.json"
RECEIPT = "results/paddle/loss.receipt.json"


def make_loss(ws: Workspace, relpath: str = LOSS) -> Path:
    return write(ws.root, relpath, json.dumps({"losses": [11.811029434204102, 11.2]}) + "\n")


def create(ws: Workspace, capsys: pytest.CaptureFixture[str], *extra: str) -> object:
    # structure_parity, not loss: a hand-made loss receipt can never be formal (only a signed
    # run of the declared entrypoint makes run outputs formal, tests/test_trust.py); these
    # tests are about the receipt mechanics every kind shares.
    return ws.gates(
        capsys,
        "receipt",
        "create",
        "--kind",
        "structure_parity",
        "--subject",
        LOSS,
        "--framework",
        "paddle",
        *extra,
    )


def load(ws: Workspace, relpath: str = RECEIPT) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((ws.root / relpath).read_text())
    return loaded


def verify(
    ws: Workspace, capsys: pytest.CaptureFixture[str], relpath: str = RECEIPT
) -> tuple[int, dict[str, object]]:
    result = ws.gates(capsys, "receipt", "verify", "--format", "json", str(ws.root / relpath))
    return result.code, json.loads(result.out)[0]


def rewrite(
    ws: Workspace, document: dict[str, object], *, reid: bool, relpath: str = RECEIPT
) -> None:
    if reid:
        document["id"] = content_id(document)
    (ws.root / relpath).write_text(pretty_json(document))


def test_formal_receipt_on_a_passing_freeze(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    make_loss(ws)
    result = create(ws, capsys, "--profile", "tp=2", "--profile", "sp=true")
    assert result.code == 0, result.err
    assert result.out.startswith(f"{RECEIPT}: formal/1 sha256:")
    document = load(ws)
    assert document["evidenceClass"] == "formal"
    assert document["formalWeight"] == 1
    assert document["id"] == content_id(document)
    provenance = document["provenance"]
    assert isinstance(provenance, dict)
    assert provenance["gitHead"] == ws.pin
    assert provenance["profile"] == {"tp": "2", "sp": "true"}
    assert provenance["freezeVerdict"] == "pass"
    code, entry = verify(ws, capsys)
    assert code == 0
    assert entry["status"] == "formal"


def test_formal_requested_while_freeze_blocked_gives_probe_with_reasons(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    make_loss(ws)
    write(ws.root, "paddleformers/glm/modeling.py", "def forward(x):\n    return -x\n")
    result = create(ws, capsys, "--class", "formal")
    assert result.code == 0
    assert "probe/0" in result.out
    document = load(ws)
    assert (document["evidenceClass"], document["formalWeight"]) == ("probe", 0)
    reasons = document["stampReasons"]
    assert isinstance(reasons, list)
    assert any("paddleformers/glm/modeling.py" in reason for reason in reasons)
    provenance = document["provenance"]
    assert isinstance(provenance, dict)
    assert provenance["dirty"] is True
    assert provenance["sourceTree"] is None


def test_probe_requested_stays_probe(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    make_loss(ws)
    assert create(ws, capsys, "--class", "probe").code == 0
    code, entry = verify(ws, capsys)
    assert (code, entry["status"]) == (0, "probe")
    assert "probe requested" in str(entry["reason"])


def test_a_byte_changed_in_a_subject_is_rejected(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_loss(ws)
    create(ws, capsys)
    data = bytearray(path.read_bytes())
    data[5] ^= 0x01
    path.write_bytes(bytes(data))
    code, entry = verify(ws, capsys)
    assert code == 1
    assert entry["status"] == "rejected"
    assert entry["reason"] == f"subject {LOSS} changed: sha256 differs from the receipt"


def test_an_edited_receipt_is_rejected_as_tampered(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    make_loss(ws)
    create(ws, capsys, "--class", "probe")
    document = load(ws)
    document["evidenceClass"], document["formalWeight"] = "formal", 1
    document["stampReasons"] = []
    rewrite(ws, document, reid=False)
    code, entry = verify(ws, capsys)
    assert code == 1
    assert str(entry["reason"]).startswith("id mismatch")


def test_a_schema_invalid_receipt_names_the_json_path(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    make_loss(ws)
    create(ws, capsys)
    document = load(ws)
    provenance = document["provenance"]
    assert isinstance(provenance, dict)
    provenance["dirty"] = "no"
    rewrite(ws, document, reid=True)
    code, entry = verify(ws, capsys)
    assert code == 1
    assert entry["reason"] == "schema: $.provenance.dirty: 'no' is not of type 'boolean'"


def test_formal_stamp_with_blocked_freeze_is_rejected_even_with_a_fresh_id(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    make_loss(ws)
    write(ws.root, "README.md", "dirty\n")
    create(ws, capsys)
    document = load(ws)
    document["evidenceClass"], document["formalWeight"], document["stampReasons"] = "formal", 1, []
    rewrite(ws, document, reid=True)
    code, entry = verify(ws, capsys)
    assert code == 1
    assert str(entry["reason"]).startswith("schema: $.provenance.freezeVerdict")


def test_malformed_and_duplicate_key_json_are_rejected(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write(ws.root, "results/broken.receipt.json", '{"id": "sha256:')
    code, entry = verify(ws, capsys, "results/broken.receipt.json")
    assert code == 1
    assert str(entry["reason"]).startswith("malformed JSON")
    write(ws.root, "results/dup.receipt.json", '{"kind": "loss", "kind": "env"}')
    code, entry = verify(ws, capsys, "results/dup.receipt.json")
    assert "duplicate key 'kind'" in str(entry["reason"])


def test_symlinked_subject_is_refused_at_create_and_rejected_at_audit(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_loss(ws)
    real = write(ws.root, "results/paddle/real-loss.json", path.read_text())
    path.unlink()
    path.symlink_to(real)
    result = create(ws, capsys)
    assert result.code == 2
    assert "goes through a symlink" in result.err
    assert "Traceback" not in result.err
    # A receipt made on the regular file, whose subject is later swapped for a link.
    path.unlink()
    path.write_text(real.read_text())
    assert create(ws, capsys).code == 0
    path.unlink()
    path.symlink_to(real)
    code, entry = verify(ws, capsys)
    assert code == 1
    assert "symlink" in str(entry["reason"])


@pytest.mark.parametrize("subject", ["../outside.json", "/etc/hostname", "results/../../x"])
def test_subject_outside_the_workspace_is_refused_at_create(
    ws: Workspace, capsys: pytest.CaptureFixture[str], subject: str
) -> None:
    result = ws.gates(
        capsys,
        "receipt",
        "create",
        "--kind",
        "loss",
        "--subject",
        subject,
        "-o",
        "results/x.receipt.json",
    )
    assert result.code == 2
    assert subject in result.err
    assert not (ws.root / "results/x.receipt.json").exists()


@pytest.mark.parametrize("subject", ["../outside.json", "/etc/hostname"])
def test_subject_outside_the_workspace_is_rejected_at_audit(
    ws: Workspace, capsys: pytest.CaptureFixture[str], subject: str
) -> None:
    make_loss(ws)
    create(ws, capsys)
    document = load(ws)
    document["subjects"] = [{"path": subject, "sha256": "0" * 64, "size": 1}]
    rewrite(ws, document, reid=True)
    code, entry = verify(ws, capsys)
    assert code == 1
    assert subject in str(entry["reason"])


def test_missing_subject_is_rejected(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    path = make_loss(ws)
    create(ws, capsys)
    path.unlink()
    code, entry = verify(ws, capsys)
    assert (code, entry["reason"]) == (1, f"subject {LOSS} is missing")


def test_receipt_outside_evidence_locations_is_refused(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    make_loss(ws)
    result = create(ws, capsys, "-o", "paddleformers/loss.receipt.json")
    assert result.code == 2
    assert "outside the evidence locations" in result.err
    assert not (ws.root / "paddleformers/loss.receipt.json").exists()


def test_existing_receipt_is_not_overwritten_without_force(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    make_loss(ws)
    create(ws, capsys)
    before = (ws.root / RECEIPT).read_bytes()
    result = create(ws, capsys, "--class", "probe")
    assert result.code == 2
    assert "refusing to overwrite" in result.err
    assert (ws.root / RECEIPT).read_bytes() == before
    assert create(ws, capsys, "--class", "probe", "--force").code == 0
    assert load(ws)["evidenceClass"] == "probe"


def test_bad_profile_is_a_usage_error(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    make_loss(ws)
    result = create(ws, capsys, "--profile", "TP=2")
    assert result.code == 2
    assert "--profile" in result.err


def test_receipt_made_on_another_source_tree_counts_as_probe(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    make_loss(ws)
    create(ws, capsys)
    write(ws.root, "paddleformers/glm/config.py", "HIDDEN = 128\n")
    new_pin = commit_all(ws.repo, "new model code")
    assert ws.gates(capsys, "freeze", "pin", new_pin).code == 0
    code, entry = verify(ws, capsys)
    assert code == 0
    assert entry["status"] == "probe"
    assert str(entry["reason"]).startswith("produced on a source tree that is not the pin's")
    assert "paddleformers/glm/config.py" in str(entry["reason"])  # the changed code, named


def test_formal_receipt_counts_zero_while_the_freeze_is_not_discharged(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    make_loss(ws)
    create(ws, capsys)
    write(ws.root, "scratch.py", "x\n")
    code, entry = verify(ws, capsys)
    assert (code, entry["status"]) == (0, "probe")
    assert "not discharged now" in str(entry["reason"])


def test_show_prints_the_stamp_and_subjects(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    make_loss(ws)
    create(ws, capsys, "--profile", "tp=2")
    result = ws.gates(capsys, "receipt", "show", str(ws.root / RECEIPT))
    assert result.code == 0
    assert "stamp     formal/1" in result.out
    assert f"  {LOSS}  " in result.out
    assert "profile   tp=2" in result.out
    as_json = ws.gates(capsys, "receipt", "show", "--format", "json", str(ws.root / RECEIPT))
    assert json.loads(as_json.out) == load(ws)


def age(*paths: Path) -> None:
    """Move mtimes past the racy window, as for files written before the audit."""
    for path in paths:
        old = path.stat().st_mtime_ns - 10_000_000_000
        os.utime(path, ns=(old, old))


def fresh_context(ws: Workspace) -> JudgingContext:
    return JudgingContext(ws.root, StatCache(cache_file(ws.root)), True, None)


def test_stat_cache_skips_rehashing_and_rechecking_unchanged_files(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_loss(ws)
    create(ws, capsys)
    age(path, ws.root / RECEIPT)
    first = fresh_context(ws)
    judge(first, RECEIPT)
    # the receipt, its subject and its attestation
    assert (first.cache.hits, first.cache.misses) == (0, 3)
    first.cache.save()
    second = fresh_context(ws)
    assert judge(second, RECEIPT).receipt is not None
    assert (second.cache.hits, second.cache.misses) == (3, 0)
    path.write_text(path.read_text().replace("11.2", "11.3"))
    third = fresh_context(ws)
    assert judge(third, RECEIPT).status == "rejected"
    assert (third.cache.hits, third.cache.misses) == (1, 1)


def test_a_cached_receipt_that_is_then_edited_is_checked_again(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    make_loss(ws)
    create(ws, capsys, "--class", "probe")
    age(ws.root / RECEIPT)
    context = fresh_context(ws)
    assert judge(context, RECEIPT).status == "probe"
    context.cache.save()
    document = load(ws)
    document["evidenceClass"], document["formalWeight"], document["stampReasons"] = (
        "formal",
        1,
        [],
    )
    rewrite(ws, document, reid=False)
    assert str(judge(fresh_context(ws), RECEIPT).reason).startswith("id mismatch")


def test_cache_lives_outside_the_workspace_and_can_be_turned_off(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    location = cache_file(ws.root)
    assert location is not None
    assert not location.is_relative_to(ws.root)
    monkeypatch.setenv("GATES_CACHE_DIR", "off")
    assert cache_file(ws.root) is None


def test_freshly_modified_files_are_not_cached(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    make_loss(ws)
    create(ws, capsys)
    context = fresh_context(ws)
    judge(context, RECEIPT)
    context.cache.save()
    location = cache_file(ws.root)
    assert location is not None
    assert not location.exists()
