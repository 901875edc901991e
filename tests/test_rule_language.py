"""The rule language on the real naming (issue 35), through the command line on real
safetensors files: routed experts fused in 3-D (transformers) against one Linear per expert
(PaddleFormers) in both directions, N-D permutations, reshape, PaddleFormers' fused_qkv AOA
statement, and the bad inputs: a rule matching 2-D and 3-D tensors, an AOA statement with
unknown options. The candidate side of every pair is built here with numpy, independently
of gates' rule engine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.glm_fixture import write_checkpoint
from tests.helpers import Workspace, commit_all, write
from tests.tensorgen import write_dump

REF = "results/torch/checkpoint"
CAND = "results/paddle/checkpoint"
EXPERTS, FFN, HIDDEN = 4, 3, 5
PREFIX = "model.layers.1.mlp.experts"

Arrays = dict[str, tuple[str, np.ndarray]]


def f32(array: np.ndarray) -> tuple[str, np.ndarray]:
    return "F32", np.ascontiguousarray(array, dtype="<f4").view("<u4")


def rules_contract(ws: Workspace, relpath: str, body: str) -> str:
    """A tensor-inventory contract holding ``body`` (TOML of its params' rules)."""
    text = "\n".join(
        [
            'id = "x.rules"',
            'title = "rules"',
            'check = "tensor_inventory"',
            "blocking = false",
            'discharge = "x"',
            "[params]",
            body,
        ]
    )
    write(ws.root, relpath, text)
    return relpath


def fused_experts(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """transformers' routed experts: gate_up_proj [E, 2I, H] (gate rows first), down_proj
    [E, H, I], each expert an `[out, in]` Linear weight."""
    gate_up = rng.standard_normal((EXPERTS, 2 * FFN, HIDDEN)).astype("<f4")
    down = rng.standard_normal((EXPERTS, HIDDEN, FFN)).astype("<f4")
    return gate_up, down


def per_expert(gate_up: np.ndarray, down: np.ndarray) -> dict[str, np.ndarray]:
    """PaddleFormers' experts: one Linear per expert, `[in, out]`."""
    arrays = {}
    for expert in range(EXPERTS):
        arrays[f"{PREFIX}.{expert}.gate_proj.weight"] = gate_up[expert, :FFN, :].T
        arrays[f"{PREFIX}.{expert}.up_proj.weight"] = gate_up[expert, FFN:, :].T
        arrays[f"{PREFIX}.{expert}.down_proj.weight"] = down[expert].T
    return arrays


UNSTACK_RULES = """
[[params.rules]]
name = "experts-unstack"
kind = "unstack"
source = "{prefix}.mlp.experts.{proj:gate_up_proj|down_proj}"
target = "{prefix}.mlp.experts.{expert}.{proj}"
index = "expert"

[[params.rules]]
name = "gate-up-split"
kind = "split"
source = "{prefix}.mlp.experts.{expert}.gate_up_proj"
targets = [
  "{prefix}.mlp.experts.{expert}.gate_proj.weight",
  "{prefix}.mlp.experts.{expert}.up_proj.weight",
]

[[params.rules]]
name = "down-weight"
kind = "rename"
source = "{prefix}.mlp.experts.{expert}.down_proj"
target = "{prefix}.mlp.experts.{expert}.down_proj.weight"

[[params.rules]]
name = "linear-transpose"
kind = "transpose"
match = "{prefix}.mlp.experts.{expert}.{proj:gate_proj|up_proj|down_proj}.weight"
"""

STACK_RULES = """
[[params.rules]]
name = "linear-transpose"
kind = "transpose"
match = "{prefix}.mlp.experts.{expert}.{proj:gate_proj|up_proj|down_proj}.weight"

[[params.rules]]
name = "gate-up-fuse"
kind = "fuse"
sources = [
  "{prefix}.mlp.experts.{expert}.gate_proj.weight",
  "{prefix}.mlp.experts.{expert}.up_proj.weight",
]
target = "{prefix}.mlp.experts.{expert}.gate_up_proj"
axis = 0

[[params.rules]]
name = "down-name"
kind = "rename"
source = "{prefix}.mlp.experts.{expert}.down_proj.weight"
target = "{prefix}.mlp.experts.{expert}.down_proj"

[[params.rules]]
name = "experts-stack"
kind = "stack"
source = "{prefix}.mlp.experts.{expert}.{proj:gate_up_proj|down_proj}"
target = "{prefix}.mlp.experts.{proj}"
index = "expert"
"""


def check_json(ws: Workspace, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    result = ws.gates(capsys, *args, "--format", "json")
    assert result.out, result.err
    document: dict[str, object] = json.loads(result.out)
    return document


def against(
    ws: Workspace, capsys: pytest.CaptureFixture[str], rules: str
) -> tuple[dict[str, object], dict[str, object]]:
    """`check checkpoint --against` (its `against` figures) and `inventory diff` of the
    workspace's pair."""
    checked = check_json(
        ws,
        capsys,
        "check",
        "checkpoint",
        CAND,
        "--against",
        REF,
        "--rules",
        rules,
        "-o",
        "outputs/check.receipt.json",
        "--force",
    )
    surveyed = check_json(
        ws,
        capsys,
        "inventory",
        "diff",
        REF,
        CAND,
        "--rules",
        rules,
        "-o",
        "outputs/diff.receipt.json",
        "--force",
    )
    return checked["against"], surveyed  # type: ignore[return-value]


def test_fused_3d_experts_against_one_linear_per_expert(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    gate_up, down = fused_experts(np.random.default_rng(1))
    write_checkpoint(
        ws.root / REF, {f"{PREFIX}.gate_up_proj": f32(gate_up), f"{PREFIX}.down_proj": f32(down)}
    )
    write_checkpoint(ws.root / CAND, {n: f32(a) for n, a in per_expert(gate_up, down).items()})
    rules = rules_contract(ws, "contracts/experts.toml", UNSTACK_RULES)
    checked, surveyed = against(ws, capsys, rules)
    assert checked["hash_match"] is True, checked
    assert checked["structural_differences"] == 0
    assert surveyed["rule_problems"] == []
    assert surveyed["counts"]["structural"] == 0  # type: ignore[index]
    naming = [d for d in surveyed["differences"] if d["class"] == "naming"]  # type: ignore[attr-defined]
    assert {d["reference"][0] for d in naming} == {f"{PREFIX}.gate_up_proj", f"{PREFIX}.down_proj"}
    gate_up_difference = next(d for d in naming if d["reference"] == [f"{PREFIX}.gate_up_proj"])
    assert len(gate_up_difference["candidate"]) == 2 * EXPERTS
    assert gate_up_difference["rules"] == ["experts-unstack", "gate-up-split", "linear-transpose"]


def test_one_linear_per_expert_against_fused_3d_experts(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """The other direction: the reference keeps one Linear per expert ([out, in]), the
    candidate the 3-D tensors, stacked by the expert index."""
    gate_up, down = fused_experts(np.random.default_rng(2))
    reference = {}
    for expert in range(EXPERTS):
        reference[f"{PREFIX}.{expert}.gate_proj.weight"] = f32(gate_up[expert, :FFN].T)
        reference[f"{PREFIX}.{expert}.up_proj.weight"] = f32(gate_up[expert, FFN:].T)
        reference[f"{PREFIX}.{expert}.down_proj.weight"] = f32(down[expert].T)
    write_checkpoint(ws.root / REF, reference)
    write_checkpoint(
        ws.root / CAND, {f"{PREFIX}.gate_up_proj": f32(gate_up), f"{PREFIX}.down_proj": f32(down)}
    )
    checked, surveyed = against(ws, capsys, rules_contract(ws, "contracts/stack.toml", STACK_RULES))
    assert checked["hash_match"] is True, checked
    assert surveyed["counts"]["structural"] == 0, surveyed  # type: ignore[index]


def test_a_stack_with_an_expert_missing_is_a_problem_of_that_group_alone(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(3)
    reference = {
        f"model.layers.{layer}.mlp.experts.{expert}.{proj}.weight": f32(
            rng.standard_normal((HIDDEN, FFN))
        )
        for layer in (0, 1)
        for expert in range(EXPERTS)
        for proj in ("gate_proj", "up_proj", "down_proj")
        if (layer, expert) != (1, 2)
    }
    write_checkpoint(ws.root / REF, reference)
    write_checkpoint(ws.root / CAND, reference)
    surveyed = check_json(
        ws,
        capsys,
        "inventory",
        "diff",
        REF,
        CAND,
        "--rules",
        rules_contract(ws, "contracts/stack.toml", STACK_RULES),
        "-o",
        "outputs/diff.receipt.json",
    )
    problems = surveyed["rule_problems"]
    assert problems and all("model.layers.1.mlp.experts." in p for p in problems), problems  # type: ignore[attr-defined]
    assert any("positions 0, 1, 3" in p for p in problems)  # type: ignore[attr-defined]
    assert not any("model.layers.0." in p for p in problems)  # type: ignore[attr-defined]


def test_an_n_d_permutation_and_a_reshape(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(4)
    weight = rng.standard_normal((EXPERTS, 2 * FFN, HIDDEN)).astype("<f4")
    flat = rng.standard_normal((EXPERTS * HIDDEN, FFN)).astype("<f4")
    write_checkpoint(ws.root / REF, {"m.experts.w": f32(weight), "m.experts.flat": f32(flat)})
    write_checkpoint(
        ws.root / CAND,
        {
            "m.experts.w": f32(weight.transpose(0, 2, 1)),
            "m.experts.flat": f32(flat.reshape(EXPERTS, HIDDEN, FFN)),
        },
    )
    body = """
[[params.rules]]
kind = "transpose"
match = "m.experts.w"
axes = [0, 2, 1]

[[params.rules]]
kind = "reshape"
match = "m.experts.flat"
shape = [4, -1, 3]
"""
    checked, surveyed = against(ws, capsys, rules_contract(ws, "contracts/nd.toml", body))
    assert checked["hash_match"] is True, checked
    assert {d["class"] for d in surveyed["differences"]} == {"layout"}  # type: ignore[attr-defined]


def test_a_transpose_that_matches_2d_and_3d_tensors_touches_only_the_3d_one(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """D4: the rule transposes every 2-D weight it matches; the 3-D one is its one problem,
    named once; no 2-D weight reads as a false shape mismatch; the rule is not listed as
    matching nothing."""
    rng = np.random.default_rng(5)
    ref_grads = {
        "model.layers.0.mlp.down_proj.weight": rng.standard_normal((4, 6)).astype("<f4"),
        "model.layers.0.mlp.up_proj.weight": rng.standard_normal((6, 4)).astype("<f4"),
        "model.layers.0.mlp.experts.weight": rng.standard_normal((2, 3, 4)).astype("<f4"),
    }
    cand_grads = {
        name: (np.ascontiguousarray(a.T) if a.ndim == 2 else a.copy())
        for name, a in ref_grads.items()
    }
    write_dump(ws.root / "results/torch", {1: {"grad": ref_grads}}, framework="torch")
    write_dump(ws.root / "results/paddle", {1: {"grad": cand_grads}})
    body = """
[[params.rules]]
name = "linear-transpose"
kind = "transpose"
match = "{prefix}.mlp.{rest}"
"""
    rules = rules_contract(ws, "contracts/d4.toml", body)
    document = check_json(
        ws,
        capsys,
        "check",
        "tensors",
        "results/torch",
        "results/paddle",
        "--rules",
        rules,
        "--steps",
        "1",
        "-o",
        "outputs/tensors.receipt.json",
    )
    problems = document["problems"]
    assert len(problems) == 1, problems  # type: ignore[arg-type]
    assert "model.layers.0.mlp.experts.weight" in problems[0]  # type: ignore[index]
    assert "3 dimensions" in problems[0]  # type: ignore[index]
    assert document["unmatched_rules"] == []
    assert document["unequal"] == []
    assert document["totals"]["equal"] == 2  # type: ignore[index]
    write_checkpoint(ws.root / REF, {n: f32(a) for n, a in ref_grads.items()})
    write_checkpoint(ws.root / CAND, {n: f32(a) for n, a in cand_grads.items()})
    surveyed = check_json(
        ws,
        capsys,
        "inventory",
        "diff",
        REF,
        CAND,
        "--rules",
        rules,
        "-o",
        "outputs/diff.receipt.json",
    )
    assert len(surveyed["rule_problems"]) == 1  # type: ignore[arg-type]
    layout = [d["reference"][0] for d in surveyed["differences"] if d["class"] == "layout"]  # type: ignore[attr-defined]
    assert sorted(layout) == [
        "model.layers.0.mlp.down_proj.weight",
        "model.layers.0.mlp.up_proj.weight",
    ]


def _grouped_qkv(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, heads: int, groups: int
) -> np.ndarray:
    """Paddle's fused_qkv layout along axis 1 ([in, out] weights): per key-value group its
    query heads, its key head, its value head."""
    per = heads // groups
    qs, ks, vs = (
        np.split(q, heads, axis=1),
        np.split(k, groups, axis=1),
        np.split(v, groups, axis=1),
    )
    parts = []
    for group in range(groups):
        parts += [*qs[group * per : (group + 1) * per], ks[group], vs[group]]
    return np.concatenate(parts, axis=1)


def test_paddleformers_fused_qkv_statement(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """L5: `q^T, k^T, v^T -> qkv, fused_qkv, num_heads=4, num_key_value_groups=2`, as
    PaddleFormers writes it (spaces around `=` included); a statement with unknown options
    is one problem naming it, and the others still apply."""
    rng = np.random.default_rng(6)
    heads, groups, head_dim = 4, 2, 2
    layer = "model.layers.0.self_attn"
    q = rng.standard_normal((heads * head_dim, HIDDEN)).astype("<f4")  # [out, in]
    k = rng.standard_normal((groups * head_dim, HIDDEN)).astype("<f4")
    v = rng.standard_normal((groups * head_dim, HIDDEN)).astype("<f4")
    o = rng.standard_normal((HIDDEN, heads * head_dim)).astype("<f4")
    write_checkpoint(
        ws.root / REF,
        {
            f"{layer}.q_proj.weight": f32(q),
            f"{layer}.k_proj.weight": f32(k),
            f"{layer}.v_proj.weight": f32(v),
            f"{layer}.o_proj.weight": f32(o),
        },
    )
    fused = _grouped_qkv(q.T, k.T, v.T, heads, groups)
    write_checkpoint(
        ws.root / CAND,
        {f"{layer}.qkv_proj.weight": f32(fused), f"{layer}.o_proj.weight": f32(o.T)},
    )
    source = "model.layers.$LAYER_ID.self_attn"
    statements = [
        f"{source}.q_proj.weight^T, {source}.k_proj.weight^T, {source}.v_proj.weight^T"
        f" -> {source}.qkv_proj.weight, fused_qkv, num_heads={heads},"
        f" num_key_value_groups = {groups}",
        f"{source}.o_proj.weight^T -> {source}.o_proj.weight",
    ]
    good = rules_contract(ws, "contracts/aoa.toml", f"aoa = {json.dumps(statements)}")
    checked, surveyed = against(ws, capsys, good)
    assert checked["hash_match"] is True, checked
    assert surveyed["rule_problems"] == []
    bad = [f"{statements[0]}, interleave=2", statements[1]]
    spoiled = rules_contract(ws, "contracts/bad-aoa.toml", f"aoa = {json.dumps(bad)}")
    surveyed = check_json(
        ws,
        capsys,
        "inventory",
        "diff",
        REF,
        CAND,
        "--rules",
        spoiled,
        "-o",
        "outputs/bad.receipt.json",
    )
    problems = surveyed["rule_problems"]
    assert len(problems) == 1 and "unknown options ['interleave']" in problems[0], problems  # type: ignore[index,arg-type]
    o_proj = [d for d in surveyed["differences"] if d["reference"] == [f"{layer}.o_proj.weight"]]  # type: ignore[attr-defined]
    assert [d["class"] for d in o_proj] == ["layout"], "the other statement still applies"


def test_fused_experts_in_tensor_dumps(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    """The same rules compare the gradients of fused and per-expert weights bit for bit, and
    name the first element that differs through the unstack."""
    gate_up, down = fused_experts(np.random.default_rng(7))
    ref = {f"{PREFIX}.gate_up_proj": gate_up, f"{PREFIX}.down_proj": down}
    cand = {name: np.ascontiguousarray(a) for name, a in per_expert(gate_up, down).items()}
    write_dump(ws.root / "results/torch", {1: {"grad": ref}}, framework="torch")
    spoiled = {**cand}
    spoiled[f"{PREFIX}.2.up_proj.weight"] = spoiled[f"{PREFIX}.2.up_proj.weight"].copy()
    spoiled[f"{PREFIX}.2.up_proj.weight"][1, 0] += 1.0
    write_dump(ws.root / "results/paddle", {1: {"grad": cand}, 2: {"grad": spoiled}})
    write_dump(ws.root / "results/torch", {2: {"grad": ref}}, framework="torch")
    rules = rules_contract(ws, "contracts/experts.toml", UNSTACK_RULES)
    document = check_json(
        ws,
        capsys,
        "check",
        "tensors",
        "results/torch",
        "results/paddle",
        "--rules",
        rules,
        "-o",
        "outputs/tensors.receipt.json",
    )
    assert document["problems"] == [], document["problems"]
    by_step = {t["step"]: t for t in document["by_step"] if t["phase"] == "grad"}  # type: ignore[attr-defined]
    assert by_step[1]["equal"] == 3 * EXPERTS and by_step[1]["unequal"] == 0
    assert by_step[2]["unequal"] == 1
    first = document["first_divergence"]
    assert first["candidate"] == f"{PREFIX}.2.up_proj.weight"  # type: ignore[index]
    assert first["reference"] == f"{PREFIX}.gate_up_proj"  # type: ignore[index]


def test_rule_files_load_from_any_place_every_command_names_the_same_way(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """D7: `check tensors`, `inventory diff` and `check checkpoint` accept the same rules file
    from the same places, inside the workspace or outside it."""
    gate_up, down = fused_experts(np.random.default_rng(8))
    ref = {f"{PREFIX}.gate_up_proj": gate_up, f"{PREFIX}.down_proj": down}
    cand = per_expert(gate_up, down)
    write_checkpoint(ws.root / REF, {n: f32(a) for n, a in ref.items()})
    write_checkpoint(ws.root / CAND, {n: f32(a) for n, a in cand.items()})
    write_dump(ws.root / "results/torch", {1: {"grad": ref}}, framework="torch")
    write_dump(
        ws.root / "results/paddle",
        {1: {"grad": {n: np.ascontiguousarray(a) for n, a in cand.items()}}},
    )
    outside = tmp_path / "elsewhere" / "experts.toml"
    outside.parent.mkdir()
    outside.write_text(
        "\n".join(
            [
                'id = "x.rules"',
                'title = "x"',
                'check = "tensor_inventory"',
                "blocking = false",
                'discharge = "x"',
                "[params]",
                UNSTACK_RULES,
            ]
        )
    )
    checked, surveyed = against(ws, capsys, str(outside))
    assert checked["hash_match"] is True
    assert surveyed["rules"] == str(outside)
    document = check_json(
        ws,
        capsys,
        "check",
        "tensors",
        "results/torch",
        "results/paddle",
        "--rules",
        str(outside),
        "-o",
        "outputs/tensors.receipt.json",
    )
    assert document["aligned"] is True, document["problems"]


def test_candidate_only_tensors_are_declared_with_a_reason_and_undeclared_ones_stay_structural(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """L2: PaddleFormers' MTP `eh_proj.bias` exists only on the candidate side: declared, it
    is shown with its reason in every report and hash_match still holds; undeclared, it is a
    structural extra; a declaration that matches nothing is a problem."""
    rng = np.random.default_rng(9)
    weight = rng.standard_normal((HIDDEN, 2 * HIDDEN)).astype("<f4")
    bias = rng.standard_normal(HIDDEN).astype("<f4")
    write_checkpoint(ws.root / REF, {"model.layers.2.eh_proj.weight": f32(weight)}, shards=1)
    write_checkpoint(
        ws.root / CAND,
        {
            "model.layers.2.eh_proj.weight": f32(weight),
            "model.layers.2.eh_proj.bias": f32(bias),
            "model.layers.2.extra.weight": f32(bias),
        },
    )
    body = """
[[params.candidate_only]]
match = "model.layers.{layer}.eh_proj.bias"
reason = "PaddleFormers' MTP eh_proj is a Linear with a bias; the HF layer has none"
"""
    rules = rules_contract(ws, "contracts/only.toml", body)
    checked, surveyed = against(ws, capsys, rules)
    only = [d for d in surveyed["differences"] if d["class"] == "candidate_only"]  # type: ignore[attr-defined]
    assert [d["candidate"] for d in only] == [["model.layers.2.eh_proj.bias"]]
    assert "HF layer has none" in only[0]["detail"]
    structural = [d for d in surveyed["differences"] if d["class"] == "structural"]  # type: ignore[attr-defined]
    assert [d["candidate"] for d in structural] == [["model.layers.2.extra.weight"]]
    assert checked["structural_differences"] == 1 and checked["hash_match"] is False, checked
    assert any("eh_proj.bias: only on the candidate" in line for line in checked["declared"])  # type: ignore[union-attr]
    text = ws.gates(
        capsys, "inventory", "diff", REF, CAND, "--rules", rules, "-o", "outputs/t.receipt.json"
    )
    assert "candidate only (declared): 1" in text.out and "HF layer has none" in text.out
    write_checkpoint(
        ws.root / CAND,
        {"model.layers.2.eh_proj.weight": f32(weight), "model.layers.2.eh_proj.bias": f32(bias)},
    )
    checked, _ = against(ws, capsys, rules)
    assert checked["hash_match"] is True, checked
    stale = rules_contract(ws, "contracts/stale.toml", body.replace("eh_proj.bias", "nothing.bias"))
    surveyed = check_json(
        ws, capsys, "inventory", "diff", REF, CAND, "--rules", stale, "-o", "outputs/s.receipt.json"
    )
    assert any("matches no candidate tensor" in p for p in surveyed["rule_problems"])  # type: ignore[attr-defined]


def test_a_pair_declared_not_comparable_is_shown_never_counted_equal(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """L4: `mlp.gate` is router logits [32, 4] F32 in transformers and top-k indices [32, 2]
    int64 in PaddleFormers: declared not comparable, the pair is listed with its reason and
    neither compared nor counted; a declaration naming no tensor is a problem."""
    rng = np.random.default_rng(10)
    hidden = rng.standard_normal((32, HIDDEN)).astype("<f4")
    logits = rng.standard_normal((32, 4)).astype("<f4")
    indices = rng.integers(0, 4, (32, 2)).astype("<i8")
    ref = {"model.layers.1.mlp.gate": logits, "model.layers.1.mlp": hidden}
    cand = {"model.layers.1.mlp.gate": indices, "model.layers.1.mlp": hidden.copy()}
    write_dump(ws.root / "results/torch", {1: {"activation": ref}}, framework="torch")
    write_dump(ws.root / "results/paddle", {1: {"activation": cand}})
    body = """
[[params.not_comparable]]
reference = "model.layers.{layer}.mlp.gate"
candidate = "model.layers.{layer}.mlp.gate"
reason = "router logits in transformers, top-k expert indices in PaddleFormers"
"""
    rules = rules_contract(ws, "contracts/nc.toml", body)
    document = check_json(
        ws,
        capsys,
        "check",
        "tensors",
        "results/torch",
        "results/paddle",
        "--rules",
        rules,
        "-o",
        "outputs/tensors.receipt.json",
    )
    assert document["problems"] == [] and document["unequal"] == []
    assert document["totals"]["compared"] == 1 and document["totals"]["equal"] == 1  # type: ignore[index]
    assert len(document["not_comparable"]) == 1  # type: ignore[arg-type]
    assert "top-k expert indices" in document["not_comparable"][0]  # type: ignore[index]
    assert document["aligned"] is True
    text = ws.gates(
        capsys,
        "check",
        "tensors",
        "results/torch",
        "results/paddle",
        "--rules",
        rules,
        "-o",
        "outputs/tensors.receipt.json",
        "--force",
    )
    assert "not comparable: step 1 activation: model.layers.1.mlp.gate" in text.out
    wrong = rules_contract(ws, "contracts/wrong.toml", body.replace("mlp.gate", "mlp.router"))
    document = check_json(
        ws,
        capsys,
        "check",
        "tensors",
        "results/torch",
        "results/paddle",
        "--rules",
        wrong,
        "-o",
        "outputs/wrong.receipt.json",
    )
    assert any("names no pair of tensors" in p for p in document["problems"])  # type: ignore[attr-defined]
    assert document["aligned"] is False


def test_a_checkpoint_saved_in_the_reference_layout_is_held_to_it(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """L6: a candidate saved by `save_pretrained` in HF names and layouts, but for MTP
    eh_proj, saved in Paddle's [in, out] under the HF name: with `saved_layout =
    "reference"`, the in-memory transpose rule does not explain it away."""
    rng = np.random.default_rng(11)
    eh_proj = rng.standard_normal((HIDDEN, 2 * HIDDEN)).astype("<f4")
    o_proj = rng.standard_normal((HIDDEN, HIDDEN + 1)).astype("<f4")
    write_checkpoint(
        ws.root / REF,
        {
            "model.layers.2.eh_proj.weight": f32(eh_proj),
            "model.layers.0.o_proj.weight": f32(o_proj),
        },
    )
    write_checkpoint(
        ws.root / CAND,
        {
            "model.layers.2.eh_proj.weight": f32(eh_proj.T),
            "model.layers.0.o_proj.weight": f32(o_proj),
        },
    )
    rules = """
[[params.rules]]
name = "linear-transpose"
kind = "transpose"
match = "{prefix}.{proj:o_proj|eh_proj}.weight"
"""
    in_memory = rules_contract(ws, "contracts/mem.toml", rules)
    _, surveyed = against(ws, capsys, in_memory)
    eh = next(d for d in surveyed["differences"] if "eh_proj" in d["reference"][0])  # type: ignore[attr-defined]
    assert eh["class"] == "layout", "without the declaration the rule explains it"
    saved = rules_contract(ws, "contracts/saved.toml", 'saved_layout = "reference"\n' + rules)
    checked, surveyed = against(ws, capsys, saved)
    structural = [d for d in surveyed["differences"] if d["class"] == "structural"]  # type: ignore[attr-defined]
    assert [d["reference"] for d in structural] == [["model.layers.2.eh_proj.weight"]]
    assert "saved in the candidate's in-memory layout [10, 5]" in structural[0]["detail"]
    assert checked["hash_match"] is False and checked["structural_differences"] == 1
    assert not [d for d in surveyed["differences"] if "o_proj" in d["reference"][0]]  # type: ignore[attr-defined]


def test_check_tensors_defaults_to_the_tensor_alignment_contract_s_rules(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """D5: the alignment contract's own rules (in-memory: a transpose), not the inventory's
    (saved: none), decide `check tensors` without --rules, as they decide the audit."""
    rng = np.random.default_rng(12)
    weight = rng.standard_normal((4, 6)).astype("<f4")
    write_dump(ws.root / "results/torch", {1: {"grad": {"m.w": weight}}}, framework="torch")
    write_dump(ws.root / "results/paddle", {1: {"grad": {"m.w": np.ascontiguousarray(weight.T)}}})
    path = ws.root / "contracts/tensor-alignment.toml"
    path.write_text(
        path.read_text()
        + '\n[[params.rules]]\nname = "in-memory-transpose"\nkind = "transpose"\nmatch = "m.w"\n'
    )
    document = check_json(
        ws,
        capsys,
        "check",
        "tensors",
        "results/torch",
        "results/paddle",
        "--steps",
        "1",
        "-o",
        "outputs/tensors.receipt.json",
    )
    assert document["rules"] == "contracts/tensor-alignment.toml"
    assert document["totals"]["equal"] == 1 and document["unequal"] == [], document  # type: ignore[index]


PROBE_ENTRY = """
import numpy as np

def build():
    used = np.arange(6, dtype=np.float32).reshape(2, 3)
    unused = np.ones((2, 3), np.float32)
    return (lambda: used * 2.0), {"m.used": used, "m.unused": unused}
"""


@pytest.mark.slow
def test_check_checkpoint_against_honours_expected_absent_and_candidate_only(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """D12 and L3: a formal consumption probe of the reference's forward finds `m.unused`
    not consumed and, having probed every tensor its model holds, shows `m.never` is never
    built (transformers never loads the MTP layer); `check checkpoint --against` and
    `inventory diff` then explain both as expected absent, count the declared candidate-only
    tensor with its reason, and hash_match holds for everything else."""
    write(ws.root, "model/probe.py", PROBE_ENTRY)
    commit_all(ws.repo, "the probe's entry")
    assert ws.gates(capsys, "freeze", "pin", "HEAD").code == 0
    commit_all(ws.repo, "pin")
    rng = np.random.default_rng(13)
    used = np.arange(6, dtype="<f4").reshape(2, 3)
    write_checkpoint(
        ws.root / REF,
        {
            "m.used": f32(used),
            "m.unused": f32(np.ones((2, 3))),
            "m.never": f32(rng.standard_normal(4)),
        },
        shards=1,
    )
    write_checkpoint(
        ws.root / CAND, {"m.used": f32(used), "m.extra_bias": f32(np.zeros(3))}, shards=1
    )
    body = """
[[params.expected_absent]]
name = "m.unused"
justification = "the candidate's forward never reads it"

[[params.expected_absent]]
name = "m.never"
justification = "transformers never builds the MTP layer"
reference_builds = false

[[params.candidate_only]]
match = "m.extra_bias"
reason = "PaddleFormers' Linear keeps a bias"
"""
    rules = rules_contract(ws, "contracts/absent.toml", body)
    checked, surveyed = against(ws, capsys, rules)
    assert checked["hash_match"] is False, "no probe yet: both stay structural"
    assert checked["structural_differences"] == 2
    probed = ws.gates(capsys, "probe", "consumed", "model/probe.py:build", "--format", "json")
    assert probed.code == 0, probed.err
    document = json.loads(probed.out)
    assert document["every_tensor"] is True
    receipt = json.loads((ws.root / "outputs/consumption_probe.receipt.json").read_text())
    assert receipt["evidenceClass"] == "formal", receipt.get("stampReasons")
    checked, surveyed = against(ws, capsys, rules)
    assert checked["hash_match"] is True, checked
    assert checked["structural_differences"] == 0
    declared = "\n".join(checked["declared"])  # type: ignore[arg-type]
    assert "m.unused: expected absent" in declared and "not consumed" in declared
    assert "m.never: expected absent" in declared and "never builds it" in declared
    assert "m.extra_bias: only on the candidate" in declared
    assert surveyed["counts"]["expected_absent"] == 2  # type: ignore[index]
    assert surveyed["counts"]["candidate_only"] == 1  # type: ignore[index]
