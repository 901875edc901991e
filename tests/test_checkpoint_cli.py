"""`gates check checkpoint`, `gates inventory diff` and the tensor-inventory contract, on real
safetensors files in real workspaces: hygiene, index problems, slices and merges, the cache."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import gates.checkpoints.digest
from tests.glm_fixture import (
    INDEXER,
    MTP,
    glm_aoa_statements,
    paddle_arrays,
    reference_arrays,
    write_checkpoint,
)
from tests.helpers import Workspace, write

REF = "results/torch/checkpoint"
CAND = "results/paddle/checkpoint"
INVENTORY_ID = "contract_environment.tensor-inventory"


def use_fixture_mtp(ws: Workspace, *, require_hash_match: bool = False) -> None:
    """The shipped GLM-5.2 rules; the MTP layer index comes from the reference's config.json."""
    path = ws.root / "contracts/tensor-inventory.toml"
    text = path.read_text()
    if require_hash_match:
        text = text.replace("require_hash_match = false", "require_hash_match = true")
    path.write_text(text)


def glm_pair(ws: Workspace, *, drop: bool) -> None:
    """The fixture pair; the reference folder holds a config.json, as a HF checkpoint does."""
    reference = reference_arrays()
    write_checkpoint(ws.root / REF, reference, shards=3)
    write(ws.root, f"{REF}/config.json", json.dumps({"num_hidden_layers": MTP}))
    write_checkpoint(ws.root / CAND, paddle_arrays(reference, drop_mtp_indexer=drop))


def small(folder: Path, shards: int = 2) -> Path:
    arrays = {f"w{i}": ("F32", np.arange(4 * (i + 1), dtype="<f4").view("<u4")) for i in range(4)}
    return write_checkpoint(folder, arrays, shards=shards)


def check_json(
    ws: Workspace, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, dict[str, object]]:
    result = ws.gates(capsys, "check", "checkpoint", *args, "--format", "json")
    assert result.out, result.err
    return result.code, json.loads(result.out)


def test_a_clean_checkpoint(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    small(ws.root / CAND)
    code, figures = check_json(ws, capsys, CAND)
    assert code == 0
    assert figures["valid"] is True
    assert figures["hygiene_clean"] is True
    assert figures["tensor_count"] == 4
    assert figures["shard_count"] == 2
    assert isinstance(figures["digest"], str) and len(figures["digest"]) == 64
    receipt = json.loads((ws.root / "outputs/checkpoint_check.receipt.json").read_text())
    assert receipt["kind"] == "checkpoint_check"


def test_symlink_hardlink_and_sparse_shards_are_named(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = small(ws.root / CAND, shards=3)
    shards = sorted(p for p in folder.iterdir() if p.suffix == ".safetensors")
    outside = tmp_path / "elsewhere.safetensors"
    outside.write_bytes(shards[0].read_bytes())
    shards[0].unlink()
    shards[0].symlink_to(outside)
    os.link(shards[1], tmp_path / "second-name.safetensors")
    size = shards[2].stat().st_size
    os.truncate(shards[2], size + 1 << 20)
    code, figures = check_json(ws, capsys, CAND)
    assert code == 1
    lines = figures["hygiene"]
    assert isinstance(lines, list)
    assert f"{shards[0].name}: is a symlink to {outside}" in lines
    assert f"{shards[1].name}: is a hardlink (2 links)" in lines
    assert any(
        line.startswith(f"{shards[2].name}: is a sparse file (hole at byte") for line in lines
    )
    assert figures["valid"] is False  # the sparse shard has bytes past its tensors


def test_index_problems_are_all_listed(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    folder = small(ws.root / CAND, shards=2)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    weight_map = index["weight_map"]
    weight_map["w0"] = "../outside.safetensors"
    weight_map["ghost"] = "model-00009-of-00009.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    code, figures = check_json(ws, capsys, CAND)
    assert code == 1
    problems = "\n".join(figures["problems"])  # type: ignore[arg-type]
    assert "shard '../outside.safetensors' is not a normalized workspace path" in problems
    assert "shard model-00009-of-00009.safetensors does not exist" in problems
    assert (
        "model.safetensors.index.json: w0 -> ../outside.safetensors, "
        "but it is in model-00001-of-00002.safetensors"
    ) in problems
    hygiene = "\n".join(figures["hygiene"])  # type: ignore[arg-type]
    assert "model.safetensors.index.json: shard '../outside.safetensors'" in hygiene


def test_a_tensor_in_two_shards(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_checkpoint(ws.root / CAND, {"a": ("F32", np.zeros(2, "<u4"))}, shards=1)
    write_checkpoint(ws.root / "tmp", {"a": ("F32", np.ones(2, "<u4"))}, shards=1)
    (ws.root / "tmp/model-00001-of-00001.safetensors").rename(folder / "extra.safetensors")
    (folder / "model.safetensors.index.json").unlink()
    code, figures = check_json(ws, capsys, CAND)
    assert code == 1
    assert (
        "tensor a is in two shards: extra.safetensors and model-00001-of-00001.safetensors"
        in figures["problems"]
    )  # type: ignore[operator]


def test_against_through_the_rules(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    use_fixture_mtp(ws)
    glm_pair(ws, drop=False)
    code, figures = check_json(ws, capsys, CAND, "--against", REF)
    assert code == 0
    against = figures["against"]
    assert isinstance(against, dict)
    assert against["hash_match"] is True
    assert against["structural_differences"] == 0
    assert against["mapped_reference_digest"] == figures["digest"]
    assert against["reference_digest"] != figures["digest"]


def test_against_the_seed_pair(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    use_fixture_mtp(ws)
    glm_pair(ws, drop=True)
    code, figures = check_json(ws, capsys, CAND, "--against", REF)
    assert code == 1
    against = figures["against"]
    assert isinstance(against, dict)
    assert (against["hash_match"], against["structural_differences"]) == (False, 5)


def test_inventory_diff_names_the_five_and_explains_the_rest(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    use_fixture_mtp(ws)
    glm_pair(ws, drop=True)
    result = ws.gates(capsys, "inventory", "diff", REF, CAND, "--format", "json")
    assert result.code == 1
    survey = json.loads(result.out)
    reference = reference_arrays()
    assert survey["reference"]["tensor_count"] == len(reference)
    assert survey["candidate"]["tensor_count"] == len(
        paddle_arrays(reference, drop_mtp_indexer=True)
    )
    structural = [d for d in survey["differences"] if d["class"] == "structural"]
    assert sorted(d["reference"][0] for d in structural) == sorted(
        f"model.layers.{MTP}.self_attn.indexer.{s}" for s in INDEXER
    )
    assert all(d["rules"] for d in survey["differences"] if d["class"] != "structural")
    assert survey["counts"]["structural"] == 5
    assert survey["rules"] == "contracts/tensor-inventory.toml"  # workspace-relative
    written = json.loads((ws.root / "outputs/surveys/structure-parity.json").read_text())
    assert written["differences"] == survey["differences"]
    text = ws.gates(capsys, "inventory", "diff", REF, CAND)
    assert "structural:" in text.out
    assert (
        f"model.layers.{MTP}.self_attn.indexer.wk.weight: missing on the candidate side" in text.out
    )
    assert "  naming  linear-transpose, ffn-fusion: 8 in 6 families" in text.out


def test_aoa_statements_give_the_same_survey(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    use_fixture_mtp(ws)
    glm_pair(ws, drop=True)
    from_rules = json.loads(
        ws.gates(capsys, "inventory", "diff", REF, CAND, "--format", "json").out
    )
    statements = glm_aoa_statements()
    contract = "\n".join(
        [
            'id = "x.aoa"',
            'title = "GLM via AOA"',
            'check = "tensor_inventory"',
            'discharge = "d"',
            "[params]",
            f"aoa = {json.dumps(statements)}",
            "[params.placeholders]",
            f'mtp = "{MTP}"',
            "",
        ]
    )
    write(ws.root, "outputs/aoa-contract.toml", contract)
    from_aoa = json.loads(
        ws.gates(
            capsys,
            "inventory",
            "diff",
            REF,
            CAND,
            "--rules",
            "outputs/aoa-contract.toml",
            "--format",
            "json",
            "-o",
            "outputs/aoa.receipt.json",
        ).out
    )
    assert from_aoa["rule_problems"] == []
    assert from_aoa["counts"] == from_rules["counts"]
    assert [d["reference"] for d in from_aoa["differences"]] == [
        d["reference"] for d in from_rules["differences"]
    ]
    assert [d["candidate"] for d in from_aoa["differences"]] == [
        d["candidate"] for d in from_rules["differences"]
    ]


def test_slices_merge_to_the_full_digest(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    small(ws.root / CAND, shards=3)
    _, full = check_json(ws, capsys, CAND, "-o", "outputs/full.receipt.json")
    for index in range(2):
        code, part = check_json(
            ws,
            capsys,
            CAND,
            "--shard-range",
            f"{index}/2",
            "-o",
            f"outputs/part{index}.receipt.json",
        )
        assert code == 0
        assert part["digest"] is None
    code, merged = check_json(
        ws,
        capsys,
        "--merge",
        "outputs/part0.receipt.json",
        "--merge",
        "outputs/part1.receipt.json",
        "-o",
        "outputs/merged.receipt.json",
    )
    assert code == 0
    assert merged["mode"] == "merged"
    assert merged["digest"] == full["digest"]
    receipt = json.loads((ws.root / "outputs/merged.receipt.json").read_text())
    assert len(receipt["provenance"]["inputs"]) == 2


def test_a_missing_slice_cannot_merge(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    small(ws.root / CAND, shards=3)
    check_json(ws, capsys, CAND, "--shard-range", "0/2", "-o", "outputs/part0.receipt.json")
    result = ws.gates(capsys, "check", "checkpoint", "--merge", "outputs/part0.receipt.json")
    assert result.code == 2
    assert "need each slice 0..1 exactly once, got [0]" in result.err


def test_a_tampered_slice_cannot_merge(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    small(ws.root / CAND, shards=2)
    for index in range(2):
        check_json(
            ws,
            capsys,
            CAND,
            "--shard-range",
            f"{index}/2",
            "-o",
            f"outputs/part{index}.receipt.json",
        )
    part = ws.root / "outputs/part1.json"
    part.write_text(part.read_text().replace('"w1"', '"w9"'))
    result = ws.gates(
        capsys,
        "check",
        "checkpoint",
        "--merge",
        "outputs/part0.receipt.json",
        "--merge",
        "outputs/part1.receipt.json",
    )
    assert result.code == 2
    assert (
        "outputs/part1.receipt.json: not an accepted receipt: subject outputs/part1.json changed"
        in result.err
    )


def test_bad_shard_range_is_a_usage_error(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    small(ws.root / CAND)
    result = ws.gates(capsys, "check", "checkpoint", CAND, "--shard-range", "2/2")
    assert result.code == 2
    assert "need 0 <= i < n" in result.err


def test_an_unchanged_checkpoint_is_never_read_again(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spy around the real hashing function (no mock) counts the tensors read."""
    folder = small(ws.root / CAND, shards=2)
    old = folder.stat().st_mtime_ns - 10_000_000_000
    for shard in folder.iterdir():
        os.utime(shard, ns=(old, old))
    reads: list[str] = []
    real = gates.checkpoints.digest.stream_content_digest

    def counting(
        fd: int, data_start: int, entry: gates.safetensors.header.TensorEntry, *more: object
    ) -> str:
        reads.append(entry.name)
        return real(fd, data_start, entry, *more)

    monkeypatch.setattr(gates.checkpoints.digest, "stream_content_digest", counting)
    _, first = check_json(ws, capsys, CAND)
    assert sorted(reads) == ["w0", "w1", "w2", "w3"]
    _, second = check_json(ws, capsys, CAND)
    assert sorted(reads) == ["w0", "w1", "w2", "w3"]
    assert second["digest"] == first["digest"]


def contract_criteria(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> tuple[str, dict[str, dict[str, object]]]:
    report = json.loads(ws.gates(capsys, "audit", "--format", "json").out)
    contract = next(c for c in report["contracts"] if c["id"] == INVENTORY_ID)
    return contract["dischargeStatus"], {c["name"]: c for c in contract["criteria"]}


def test_contract_blocks_on_the_five_and_discharges_on_the_full_pair(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    use_fixture_mtp(ws, require_hash_match=True)
    glm_pair(ws, drop=True)
    status, criteria = contract_criteria(ws, capsys)
    assert status == "discharging"
    structural = criteria["no_structural_difference"]
    assert structural["met"] is False
    assert f"model.layers.{MTP}.self_attn.indexer" in structural["detail"]  # type: ignore[operator]
    assert "5 structural" in structural["detail"]  # type: ignore[operator]
    assert criteria["hash_match"]["met"] is False
    glm_pair(ws, drop=False)
    for shard in (ws.root / CAND).glob("*.safetensors"):
        shard.unlink()
    glm_pair(ws, drop=False)
    status, criteria = contract_criteria(ws, capsys)
    assert status == "discharged", criteria


def test_contract_names_hygiene_problems(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    use_fixture_mtp(ws)
    glm_pair(ws, drop=False)
    shard = sorted((ws.root / CAND).glob("*.safetensors"))[0]
    os.link(shard, tmp_path / "second")
    status, criteria = contract_criteria(ws, capsys)
    assert status == "discharging"
    assert criteria["candidate_hygiene"]["met"] is False
    assert (
        f"{CAND}/{shard.name}: is a hardlink (2 links)" in criteria["candidate_hygiene"]["detail"]
    )  # type: ignore[operator]


def test_results_contract_can_require_equal_checkpoint_hashes(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    use_fixture_mtp(ws)
    write(
        ws.root,
        "contracts/results-schema-and-provenance.toml",
        "\n".join(
            [
                'id = "acceptance_oracle.results-schema-and-provenance"',
                'title = "Checkpoint hashes only"',
                'check = "results_schema_and_provenance"',
                'discharge = "hash_match=true"',
                'evidence_kinds = ["checkpoint_check"]',
                "[params]",
                "checkpoint_hash_equal = true",
                "min_repeats = 0",
                "",
            ]
        ),
    )

    def criterion() -> dict[str, object]:
        report = json.loads(ws.gates(capsys, "audit", "--format", "json").out)
        contract = next(c for c in report["contracts"] if c["id"].startswith("acceptance_oracle"))
        return next(c for c in contract["criteria"] if c["name"] == "checkpoint_hash_match")

    glm_pair(ws, drop=True)
    ws.gates(capsys, "check", "checkpoint", CAND, "--against", REF)
    assert criterion()["met"] is False
    glm_pair(ws, drop=False)
    assert ws.gates(capsys, "check", "checkpoint", CAND, "--against", REF).code == 0
    assert criterion()["met"] is True


@pytest.mark.slow
def test_a_hash_match_claim_is_recomputed_not_believed(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """A signed checker output that says hash_match=true for checkpoints that differ (its
    signer lied, or the candidate changed after the check and was re-receipted) is not met."""
    test_results_contract_can_require_equal_checkpoint_hashes(ws, capsys)
    output = ws.root / "outputs/checkpoint_check.json"
    claim = output.read_text()
    glm_pair(ws, drop=True)  # the candidate loses its MTP indexer tensors
    forged = ws.root / "outputs/forged_check.json"
    forged.write_text(claim)
    made = ws.gates(
        capsys, "receipt", "create", "--kind", "checkpoint_check", "--subject",
        "outputs/forged_check.json", "-o", "outputs/forged_check.receipt.json",
    )  # fmt: skip
    assert made.code == 0, made.err
    report = json.loads(ws.gates(capsys, "audit", "--format", "json").out)
    contract = next(c for c in report["contracts"] if c["id"].startswith("acceptance_oracle"))
    criterion = next(c for c in contract["criteria"] if c["name"] == "checkpoint_hash_match")
    assert criterion["met"] is False
    assert "recomput" in criterion["detail"]


@pytest.mark.parametrize("weight_map", [["model-00001-of-00002.safetensors"], "x", 7])
def test_an_index_whose_weight_map_is_not_an_object_is_a_problem_not_a_crash(
    ws: Workspace, capsys: pytest.CaptureFixture[str], weight_map: object
) -> None:
    folder = small(ws.root / CAND)
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    code, figures = check_json(ws, capsys, CAND)
    assert code != 0
    assert figures["valid"] is False
    assert any("weight_map" in problem for problem in figures["problems"])  # type: ignore[attr-defined]
    assert "Traceback" not in capsys.readouterr().err
