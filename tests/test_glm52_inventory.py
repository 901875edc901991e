"""The GLM-5.2 key set, reduced but same-shaped (real dimensions from the official config,
fewer layers and experts; header-only shards), through the shipped naming rules."""

from __future__ import annotations

import json

import pytest

from bench.glm52_keyset import (
    INDEXER,
    load_config,
    paddle_keyset,
    reference_keyset,
    write_header_only,
)
from tests.helpers import Workspace

REF = "results/torch/checkpoint"
CAND = "results/paddle/checkpoint"
REDUCED = {"num_hidden_layers": 4, "n_routed_experts": 6}  # 3 dense, 1 MoE, MTP layer 4


@pytest.fixture
def glm52_pair(ws: Workspace) -> Workspace:
    config = load_config(REDUCED)
    mtp = config["num_hidden_layers"]
    reference = reference_keyset(config)
    write_header_only(ws.root / REF, reference, shard_bytes=2 * 1024**3)
    # the official checkpoint ships its config.json: {mtp} comes from num_hidden_layers
    (ws.root / REF / "config.json").write_text(json.dumps(config))
    candidate = paddle_keyset(reference, mtp, drop_mtp_indexer=True)
    write_header_only(ws.root / CAND, candidate, shard_bytes=2 * 1024**3)
    return ws


def test_the_full_size_key_set_has_the_official_counts() -> None:
    config = load_config()
    reference = reference_keyset(config)
    assert len(reference) == 59870
    assert "model.layers.78.mlp.experts.255.down_proj.weight" in reference
    assert reference["model.layers.3.self_attn.q_b_proj.weight"] == ("BF16", (16384, 2048))
    assert len(paddle_keyset(reference, 78, drop_mtp_indexer=True)) == 40330


def test_only_the_mtp_indexer_is_structural(
    glm52_pair: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = glm52_pair
    result = ws.gates(capsys, "inventory", "diff", REF, CAND, "--format", "json")
    assert result.code == 1, result.err
    document = json.loads(result.out)
    structural = [d for d in document["differences"] if d["class"] == "structural"]
    assert sorted(name for d in structural for name in d["reference"]) == sorted(
        f"model.layers.4.self_attn.indexer.{suffix}" for suffix in INDEXER
    )
    assert document["counts"]["structural"] == 5
    assert document["counts"]["naming"] > 0 and document["counts"]["layout"] > 0
    assert len(document["differences"]) == sum(document["counts"].values())


def test_human_output_is_grouped_with_the_first_few_of_each_group(
    glm52_pair: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = glm52_pair
    text = ws.gates(capsys, "inventory", "diff", REF, CAND).out
    lines = text.splitlines()
    assert "structural: 5 in 5 families" in lines
    assert "    e.g. model.layers.4.self_attn.indexer.wk.weight: missing" in text
    assert any(line.startswith("  naming  linear-transpose, ffn-fusion: ") for line in lines), text
    assert "model.layers.{L}.mlp.experts.{E}.gate_proj.weight" in text
    assert any("more famil" in line for line in lines)
    assert len(lines) < 80, "grouped, not one line per tensor"
    assert "model.layers.3.mlp.experts.5.up_proj.weight" not in text
