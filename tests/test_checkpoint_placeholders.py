"""The MTP layer index of the naming rules from the checkpoint's config.json: one contract for
the 2-layer fixture and the 78-layer model; a contract value wins, a disagreement is reported."""

from __future__ import annotations

import json
import tomllib

import pytest

from tests.glm_fixture import MTP, paddle_arrays, reference_arrays, write_checkpoint
from tests.helpers import Workspace, write

REF = "results/torch/checkpoint"
CAND = "results/paddle/checkpoint"
CONTRACT = "contracts/tensor-inventory.toml"
INVENTORY_ID = "contract_environment.tensor-inventory"


def pair(ws: Workspace, config: object | None) -> None:
    reference = reference_arrays()
    write_checkpoint(ws.root / REF, reference, shards=2)
    write_checkpoint(ws.root / CAND, paddle_arrays(reference, drop_mtp_indexer=False))
    if config is not None:
        text = config if isinstance(config, str) else json.dumps(config)
        write(ws.root, f"{REF}/config.json", text)


def pin_mtp(ws: Workspace, value: str) -> None:
    path = ws.root / CONTRACT
    text = path.read_text()
    assert "[params.placeholders]\n" in text
    path.write_text(
        text.replace("[params.placeholders]\n", f'[params.placeholders]\nmtp = "{value}"\n')
    )


def diff(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    result = ws.gates(capsys, "inventory", "diff", REF, CAND, "--format", "json")
    return result.code, json.loads(result.out)


def test_the_shipped_contract_takes_the_mtp_index_from_config_json(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "mtp" not in tomllib.loads((ws.root / CONTRACT).read_text())["params"]["placeholders"]
    pair(ws, {"num_hidden_layers": MTP, "hidden_size": 16})
    code, survey = diff(ws, capsys)
    assert code == 0, survey
    assert survey["counts"]["structural"] == 0  # type: ignore[index]
    assert survey["notes"] == []


def test_without_config_json_or_contract_value_the_placeholder_is_a_rule_problem(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    pair(ws, None)
    code, survey = diff(ws, capsys)
    assert code == 1
    assert any(
        "placeholder {mtp} is not set" in problem and "num_hidden_layers" in problem
        for problem in survey["rule_problems"]  # type: ignore[union-attr]
    )


def test_a_contract_value_wins_and_the_disagreement_is_reported(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    pin_mtp(ws, "78")
    pair(ws, {"num_hidden_layers": MTP})
    code, survey = diff(ws, capsys)
    assert code == 1, "layer 78 does not exist here: the MTP layer is left unmapped"
    assert survey["notes"] == [
        f"mtp: the contract sets 78, {REF}/config.json has num_hidden_layers = {MTP}; "
        "using the contract's 78"
    ]
    text = ws.gates(capsys, "inventory", "diff", REF, CAND)
    assert f"note: mtp: the contract sets 78, {REF}/config.json" in text.out
    report = json.loads(ws.gates(capsys, "audit", "--format", "json").out)
    contract = next(c for c in report["contracts"] if c["id"] == INVENTORY_ID)
    structure = next(c for c in contract["criteria"] if c["name"] == "no_structural_difference")
    assert "note: mtp: the contract sets 78" in structure["detail"]


def test_a_contract_value_that_agrees_gives_no_note(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    pin_mtp(ws, str(MTP))
    pair(ws, {"num_hidden_layers": MTP})
    code, survey = diff(ws, capsys)
    assert (code, survey["notes"]) == (0, [])


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ("{not json", "is not readable JSON"),
        ({"num_hidden_layers": "2"}, "num_hidden_layers is '2', not a non-negative integer"),
    ],
)
def test_an_unusable_config_json_is_named(
    ws: Workspace, capsys: pytest.CaptureFixture[str], config: object, said: str
) -> None:
    pin_mtp(ws, str(MTP))
    pair(ws, config)
    code, survey = diff(ws, capsys)
    assert code == 0
    assert any(said in note and f"{REF}/config.json" in note for note in survey["notes"])  # type: ignore[union-attr]
