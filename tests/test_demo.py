"""`gates demo` runs the real pipeline end to end on a workspace it builds itself."""

from __future__ import annotations

import pytest

from tests.conftest import run_gates


def test_demo_shows_blocked_then_pinned_states(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_gates(capsys, "demo")
    assert result.code == 0, result.err
    blocked, pinned = result.out.split("== (b)")
    assert "results/paddle: manifest.json probe/0, env.json probe/0, loss.json probe/0" in blocked
    assert "pin_resolves: no pin set" in blocked
    assert "results/paddle: manifest.json formal/1, env.json formal/1, loss.json formal/1" in pinned
    freeze_row = next(
        line
        for line in pinned.splitlines()
        if line.startswith("contract_environment.source-freeze-head-vs-pin")
    )
    assert freeze_row.split()[2:4] == ["discharged", "4/4"]
    assert "receipts: 6 (6 formal, 0 probe, 0 rejected)" in pinned
    assert pinned.count("verdict=blocked") == 1
    statuses = {
        line.split()[0]: line.split()[2]
        for line in pinned.splitlines()
        if "." in line.split(" ")[0]
    }
    assert statuses["contract_environment.manifest-format-key"] == "discharged"
    assert statuses["acceptance_oracle.results-schema-and-provenance"] == "discharging"
    assert "first divergence at step 1" in pinned
    assert "UnsupportedRunSchemaError" in blocked
