"""`gates demo` replays the seed PR on the glm52-minimal example with real gates operations,
including real Paddle training runs under `gates run`."""

from __future__ import annotations

import pytest

from tests.helpers import run_gates
from tests.kernels import kernels_as_recorded


def statuses(section: str) -> dict[str, str]:
    rows = [
        line.split()
        for line in section.splitlines()
        if line.startswith(("contract_", "acceptance_"))
    ]
    return {row[0]: row[2] for row in rows}


@pytest.mark.slow
@pytest.mark.heavy
def test_demo_shows_the_blocked_pr_then_what_discharges(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_gates(capsys, "demo")
    assert result.code == 0, result.err
    before, rest = result.out.split("== (b)")
    forgery, after = rest.split("== (c)")
    after, real = after.split("== (e)")  # the real port's act: tests/test_real_example.py
    assert "the real port: transformers' GlmMoeDsaForCausalLM against PaddleFormers" in real
    assert "results/paddle (recorded run, receipted by hand): manifest.json probe/0" in before
    assert "receipts: 14 (0 formal, 14 probe, 0 rejected)" in before
    assert "no formal candidate loss: results/paddle/loss.receipt.json: unsigned" in before
    assert "formal_alignment_steps = 0 / 100" in before
    assert "format:experiments/e055-acceptance-oracle-20260819/manifest.json" in before
    assert statuses(before)["contract_environment.source-freeze-head-vs-pin"] == "discharging"
    # the forgery: copies receipted by hand stay probe; the self-made waiver is not in force
    assert "loss.receipt.json: probe: not from a signed run of the declared entrypoint" in forgery
    assert "formal_alignment_steps = 0 / 100" in forgery
    assert "waivers in force: 0" in forgery
    assert "proposed: contracts/mtp.waiver.toml: added" in forgery
    assert "verdict=blocked" in forgery
    # the resume guard: forged outputs in the run folder are refused by name, and the run in
    # the emptied folder trains for real (its losses are its own, not torch's)
    assert "gates run paddle: refused: run folder results/paddle is not empty" in forgery
    assert "its losses first differ from torch's at step 5" in forgery
    assert "results/paddle/loss.receipt.json: formal" in forgery
    # the trusted path; the recorded torch run's signature still binds the example's tree
    # (if this fails after editing the example, run examples/glm52-minimal/sign_recorded.py)
    assert "its recorded run, signed where it ran: formal" in after
    assert "policy: protected: refs/heads/main at" in after
    assert "gates run paddle -> results/paddle: exit 0" in after
    # a verifier replays two windows drawn from its seed on each side: the same bits (the
    # recorded torch run by the torch of the test extra)
    assert "gates replay results/paddle --seed demo-ci-4711: exit 0;" in after
    reproduced = "gates replay results/torch --seed demo-ci-4711: exit 0;" in after
    if kernels_as_recorded():
        assert reproduced
    if reproduced:
        assert after.count("): match") == 4
    else:  # on other kernels the recorded last bits may not come back (tests/kernels.py)
        assert "gates replay results/torch --seed demo-ci-4711: exit 1;" in after
        assert "note: the recorded torch run was made on another CPU" in after
        assert after.count("): match") == 2
    assert "escapes with probability about (1 - f)^2" in after
    # a run whose loss was edited after one step and signed with the stolen key: caught
    assert "gates replay --window 42:44: exit 1, mismatch at step 43: loss bits" in after
    assert " 0 probe, 0 rejected)" in after
    found = statuses(after)
    assert found["contract_environment.source-freeze-head-vs-pin"] == "discharged"
    assert found["acceptance_oracle.results-schema-and-provenance"] == "discharging"
    # the probe explains the five tensors left out, and the content of every other one is
    # equal through the rules (issue 35, D12: hash_match no longer needs them)
    assert found["contract_environment.tensor-inventory"] == "discharged"
    assert "formal_alignment_steps = 4 / 100" in after
    assert "first divergence at step 5" in after
    # the consumption probe explains the five MTP indexer tensors the candidate leaves out
    assert "5 of 10 MTP tensors not consumed" in after
    # tensor level: the first divergence located to a named tensor, repeats identical
    assert "first divergence: step 1 activation model.layers.0.input_layernorm" in after
    assert "repeat-{1,2,3}/tensors: deterministic=true" in after
    assert "5 of 10 MTP tensors not consumed" in after
    assert after.count("verdict=blocked") == 1
