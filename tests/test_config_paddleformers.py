"""The config-semantics check on the real PaddleFormers 1.2.0 GlmMoeDsaConfig (CPU only, no
torch, no paddlefleet): every key comes back under its name, every round trip keeps the
values, and yet the model-facing semantics are wrong."""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any

import pytest

from tests.configsem_fixture import OFFICIAL_REL, candidate_files, set_files
from tests.helpers import Workspace

PADDLEFORMERS_CLASS = "paddleformers.transformers.glm_moe_dsa.configuration:GlmMoeDsaConfig"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("paddleformers") is None,
    reason="paddleformers is not installed (`make test` installs it: see the Makefile)",
)


@pytest.mark.slow
@pytest.mark.heavy
def test_the_real_glm_moe_dsa_config_stores_but_does_not_mean(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    set_files(ws.root, ws.repo, {OFFICIAL_REL: candidate_files("")[OFFICIAL_REL]})
    result = ws.gates(
        capsys, "check", "config", OFFICIAL_REL, "--class", PADDLEFORMERS_CLASS, "--format", "json"
    )
    assert result.code == 1, result.err
    assert "paddleformers" not in sys.modules  # imported in the subprocess only
    report: dict[str, Any] = json.loads(result.out)
    met = {c["name"]: c["met"] for c in report["criteria"]}
    detail = {c["name"]: c["detail"] for c in report["criteria"]}
    assert met["official_pinned"] and met["table_covers_official"] and met["candidate_loads"]
    assert "(paddleformers 1.2.0) loaded via from_pretrained" in detail["candidate_loads"]
    assert report["candidate"]["distribution"] == {"name": "paddleformers", "version": "1.2.0"}

    rows = {row["key"]: row for row in report["keys"]}
    # stored: every key mapped under its own name comes back with its official value
    same = [row for row in rows.values() if row["how"] == "same" and row["in_official"]]
    assert len(same) == 48
    assert all(row["present"] and row["value"] == row["official"] for row in same)
    # ... but not meant: the RoPE base stays the default, q/k norm is off, and the
    # indexer's interleave has no attribute the candidate reads
    assert detail["meaning_held"] == (
        "3 wrong: indexer_rope_interleave -> rotary_interleaved: no attribute rotary_interleaved;"
        " rope_parameters.rope_theta -> rope_theta: holds 10000.0, official 8000000;"
        " (implied) -> use_qk_norm: holds false, official true"
    )
    assert rows["rope_parameters.rope_type"]["value"] == "default"
    # ... and not consumed: stored as plain attributes that no code in the package reads
    assert detail["consumed"].startswith("8 attribute(s) read nowhere in paddleformers/: ")
    for unread in ("index_topk_freq", "index_share_for_mtp_iteration", "rope_interleave"):
        assert unread in detail["consumed"]
        assert rows[unread]["read_at"] is None
    assert rows["hidden_size"]["read_at"] is not None
    # every round trip keeps the values; the saved file writes dtype as torch_dtype
    assert detail["round_trips"] == "dtype dropped from the saved config.json"


@pytest.mark.slow
@pytest.mark.heavy
def test_reads_are_looked_for_in_every_package_the_policy_names(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    set_files(ws.root, ws.repo, {OFFICIAL_REL: candidate_files("")[OFFICIAL_REL]})
    contract = ws.root / "contracts/config-semantics.toml"
    text = contract.read_text()
    assert '\nsource = ""\n' in text
    contract.write_text(
        text.replace(
            '\nsource = ""\n', '\nsource = ""\nmodel_packages = ["transformers", "paddlefleet"]\n'
        )
    )
    result = ws.gates(
        capsys, "check", "config", OFFICIAL_REL, "--class", PADDLEFORMERS_CLASS, "--format", "json"
    )
    assert result.code == 1, result.err
    report: dict[str, Any] = json.loads(result.out)
    detail = {c["name"]: c["detail"] for c in report["criteria"]}
    # transformers' DeepSeek-V3 reads rope_interleave, which PaddleFormers leaves unread;
    # paddlefleet, which the package index does not have, is named as such
    scanned = "paddleformers/, transformers/, paddlefleet/ (not installed: not scanned)"
    assert f" read nowhere in {scanned}: " in detail["consumed"]
    assert report["candidate"]["missing_packages"] == ["paddlefleet"]
    assert report["candidate"]["scanned_packages"] == ["transformers"]
    rows = {row["key"]: row for row in report["keys"]}
    assert str(rows["rope_interleave"]["read_at"]).startswith("transformers/models/")
    assert detail["consumed"].startswith("4 attribute(s) read nowhere")
    assert "rope_interleave" not in detail["consumed"]
