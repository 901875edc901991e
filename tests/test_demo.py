"""`gates demo` replays the seed PR on the glm52-minimal example with real gates operations,
including real Paddle training runs under `gates run`."""

from __future__ import annotations

import pytest

from tests.conftest import run_gates


def statuses(section: str) -> dict[str, str]:
    rows = [
        line.split()
        for line in section.splitlines()
        if line.startswith(("contract_", "acceptance_"))
    ]
    return {row[0]: row[2] for row in rows}


def test_demo_shows_the_blocked_pr_then_what_discharges(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_gates(capsys, "demo")
    assert result.code == 0, result.err
    before, after = result.out.split("== (b)")
    assert "results/paddle (recorded run): manifest.json probe/0" in before
    assert "receipts: 11 (0 formal, 11 probe, 0 rejected)" in before
    assert "formal_alignment_steps = 0 / 100" in before
    assert "format:experiments/e055-acceptance-oracle-20260819/manifest.json" in before
    assert statuses(before)["contract_environment.source-freeze-head-vs-pin"] == "discharging"
    assert "gates run paddle -> results/paddle: exit 0" in after
    assert " 0 probe, 0 rejected)" in after
    found = statuses(after)
    assert found["contract_environment.source-freeze-head-vs-pin"] == "discharged"
    assert found["acceptance_oracle.results-schema-and-provenance"] == "discharging"
    assert found["contract_environment.tensor-inventory"] == "discharging"
    assert "formal_alignment_steps = 4 / 100" in after
    assert "first divergence at step 5" in after
    assert "model.layers.1.self_attn.indexer" in after
    assert after.count("verdict=blocked") == 1
