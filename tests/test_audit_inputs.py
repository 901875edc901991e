"""One `gates audit` reads its inputs once: each contract file parsed once, the results
contract's params parsed once, the freeze evaluated once (and the freeze contract with it),
the stat cache loaded once."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import gates.contracts.results_schema_and_provenance
import gates.contracts.source_freeze
import gates.engine.audit
import gates.freeze.check
import gates.policy.contract_files
from gates.commands.demo import POLICY_REF, lay_out
from gates.core.hashing import StatCache
from tests.helpers import cache_file, run_gates


def _patch_everywhere(monkeypatch: pytest.MonkeyPatch, name: str, real: Any, wrapper: Any) -> None:
    """Replace ``real`` under ``name`` in every gates module that imported it."""
    for module in list(sys.modules.values()):
        if (
            getattr(module, "__name__", "").startswith("gates")
            and getattr(module, name, None) is real
        ):
            monkeypatch.setattr(module, name, wrapper)


@pytest.fixture
def example(tmp_path: Path) -> Path:
    root = tmp_path / "glm52-port"
    lay_out(root)
    return root


@pytest.mark.slow
def test_one_audit_parses_each_contract_once_and_judges_the_freeze_once(
    example: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_gates(capsys, "-C", str(example), "--policy-ref", POLICY_REF, "freeze", "show")  # imports
    parsed: Counter[bytes] = Counter()
    freezes: list[Path] = []
    freeze_contracts: list[object] = []
    loads: list[Path | None] = []
    results_params: list[object] = []

    real_parse = gates.policy.contract_files.parse_contract

    def parse(data: bytes, *args: Any, **kwargs: Any) -> Any:
        parsed[data] += 1
        return real_parse(data, *args, **kwargs)

    real_freeze = gates.freeze.check.evaluate_freeze

    def evaluate_freeze(root: Path, *args: Any, **kwargs: Any) -> Any:
        freezes.append(root)
        return real_freeze(root, *args, **kwargs)

    real_contract = gates.contracts.source_freeze.evaluate

    def freeze_contract(context: Any, params: Any) -> Any:
        freeze_contracts.append(context)
        return real_contract(context, params)

    real_load = StatCache._load

    def load(cache: StatCache) -> Any:
        loads.append(cache.path)
        return real_load(cache)

    real_params = gates.contracts.results_schema_and_provenance.parse_params

    def parse_params(raw: Any) -> Any:
        results_params.append(raw)
        return real_params(raw)

    _patch_everywhere(monkeypatch, "parse_contract", real_parse, parse)
    _patch_everywhere(monkeypatch, "parse_params", real_params, parse_params)
    _patch_everywhere(monkeypatch, "evaluate_freeze", real_freeze, evaluate_freeze)
    monkeypatch.setattr(gates.contracts.source_freeze, "evaluate", freeze_contract)
    monkeypatch.setattr(StatCache, "_load", load)

    result = run_gates(
        capsys, "-C", str(example), "--policy-ref", POLICY_REF, "audit", "--format", "json"
    )

    assert result.code in (0, 1), result.err
    contracts = sorted((example / "contracts").glob("*.toml"))
    assert len(contracts) == 5
    assert sorted(parsed.values()) == [1] * len(contracts)
    assert set(parsed) == {path.read_bytes() for path in contracts}
    assert freezes == [example]
    assert len(freeze_contracts) == 1
    assert loads.count(cache_file(example)) == 1
    assert len(results_params) == 1  # the results contract's params, parsed once
    report = json.loads(result.out)
    assert len(report["contracts"]) == len(contracts)  # every contract still evaluated


def test_explain_evaluates_that_contract_and_the_freeze_only(
    example: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    audited = run_gates(
        capsys, "-C", str(example), "--policy-ref", POLICY_REF, "audit", "--format", "json"
    )
    whole = next(
        c for c in json.loads(audited.out)["contracts"] if c["id"].endswith("manifest-format-key")
    )
    evaluated: list[str] = []
    real = gates.engine.audit.evaluator

    def evaluator(check: str) -> Any:
        evaluated.append(check)
        return real(check)

    monkeypatch.setattr(gates.engine.audit, "evaluator", evaluator)
    result = run_gates(
        capsys,
        "-C",
        str(example),
        "--policy-ref",
        POLICY_REF,
        "explain",
        "manifest-format-key",
        "--format",
        "json",
    )

    assert evaluated == ["source_freeze", "manifest_format_key"]
    explained = json.loads(result.out)
    assert explained.pop("remediation") == whole.pop("remediation")  # no placeholder here
    assert explained == whole  # criteria, status, evidence: what the whole audit says
    assert result.code == (0 if whole["dischargeStatus"] == "discharged" else 1)
