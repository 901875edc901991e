"""Every command that offers `--format json` prints exactly one JSON document on stdout.

The list of commands is read from the CLI itself, so a new command with a JSON
format fails this test until it is exercised here. Inputs are chosen to make
the commands talk: rounded losses (notes), a blocked freeze, unbacked claims.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click
import numpy as np
import pytest

import audit_source_freeze
from gates.cli.app import cli
from tests.glm_fixture import write_checkpoint
from tests.helpers import (
    REPO_ROOT,
    Workspace,
    commit_all,
    write,
)
from tests.lossgen import train_losses, write_loss_json
from tests.tensorgen import glm_pair, write_dump

REF = "results/torch/loss.json"
CAND = "results/paddle/loss.json"
ROUNDED = [round(value, 4) for value in train_losses(20)]


def json_commands() -> set[str]:
    """`group command` names of every CLI command whose --format accepts json."""
    found: set[str] = set()

    def walk(command: click.Command, prefix: tuple[str, ...]) -> None:
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, (*prefix, name))
            return
        for param in command.params:
            choices = getattr(param.type, "choices", ())
            if isinstance(param, click.Option) and "--format" in param.opts and "json" in choices:
                found.add(" ".join(prefix))

    walk(cli, ())
    return found


def prepare(ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Path:
    write_loss_json(ws.root / REF, ROUNDED)
    write_loss_json(ws.root / CAND, ROUNDED)
    for subject, framework in ((REF, "torch"), (CAND, "paddle")):
        created = ws.gates(
            capsys,
            "receipt",
            "create",
            "--kind",
            "loss",
            "--subject",
            subject,
            "--framework",
            framework,
        )
        assert created.code == 0, created.err
    arrays = {f"w{i}": ("F32", np.arange(4 * (i + 1), dtype="<f4").view("<u4")) for i in range(3)}
    write_checkpoint(ws.root / "results/torch/checkpoint", arrays, shards=2)
    write_checkpoint(ws.root / "results/paddle/checkpoint", arrays, shards=1)
    ref, cand = glm_pair(np.random.default_rng(1), 1)
    write_dump(ws.root / "results/torch", ref, framework="torch")
    write_dump(ws.root / "results/paddle", cand)
    example_model = REPO_ROOT / "examples/glm52-minimal/model"
    shutil.copytree(example_model, ws.root / "model", ignore=shutil.ignore_patterns("__pycache__"))
    commit_all(ws.repo, "the example's model")  # the probe and the config class run committed
    assert ws.gates(capsys, "freeze", "pin", "HEAD").code == 0
    claims = tmp_path / "pr.md"
    claims.write_text(f"HEAD {ws.pin[:8]}; loss 12.416634559631348; max_diff=1.5\n")
    return claims


def invocations(ws: Workspace, claims: Path) -> dict[str, list[str]]:
    return {
        "audit": ["audit"],
        "freeze show": ["freeze", "show"],
        "receipt verify": ["receipt", "verify", "results/torch/loss.receipt.json"],
        "receipt show": ["receipt", "show", "results/paddle/loss.receipt.json"],
        "check loss": ["check", "loss", REF, CAND],
        "check determinism": ["check", "determinism", REF, CAND],
        "check checkpoint": [
            "check",
            "checkpoint",
            "results/paddle/checkpoint",
            "--against",
            "results/torch/checkpoint",
        ],
        "inventory diff": [
            "inventory",
            "diff",
            "results/torch/checkpoint",
            "results/paddle/checkpoint",
        ],
        "steps": ["steps"],
        "status": ["status"],
        "explain": ["explain", "contract_environment.source-freeze-head-vs-pin"],
        "claims check": ["claims", "check", str(claims)],
        "check tensors": ["check", "tensors", "results/torch", "results/paddle"],
        "check config": [
            "check",
            "config",
            "model/glm52/config.json",
            "--class",
            "glm52.configuration:GlmMoeDsaConfig",
            "--path",
            "model",
        ],
        "probe consumed": ["probe", "consumed", "model/probe_mtp.py:build"],
        "attest export": [
            "attest",
            "export",
            "--out",
            str(claims.parent / "export"),
            "--resource-uri",
            "https://github.com/glm-port/glm52-paddle.git",
        ],
        "attest verify": ["attest", "verify", str(claims.parent / "export")],
        "report": ["report", "--html", str(claims.parent / "html")],
        "history": ["history"],
        "evidence": ["evidence"],
        "refresh": ["refresh", "--dry-run"],
        "replay": ["replay", "results/paddle", "--seed", "ci"],
    }


@pytest.mark.slow
@pytest.mark.heavy
def test_every_json_format_prints_one_document(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    claims = prepare(ws, capsys, tmp_path)
    calls = invocations(ws, claims)
    assert set(calls) == json_commands(), "exercise every command with --format json here"
    write(ws.root, "README.md", "edited: the freeze is blocked, and the commands say so\n")
    for name, args in calls.items():
        result = ws.gates(capsys, *args, "--format", "json")
        assert result.code in (0, 1), f"{name}: {result.err}"
        try:
            json.loads(result.out)
        except json.JSONDecodeError as error:
            pytest.fail(f"`gates {name} --format json` stdout is not one JSON document: {error}")


def test_rounded_loss_notes_go_to_stderr(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    write_loss_json(ws.root / REF, ROUNDED)
    write_loss_json(ws.root / CAND, train_losses(20))
    result = ws.gates(capsys, "check", "loss", REF, CAND, "--format", "json")
    figures = json.loads(result.out)
    assert figures["reference_rounded"] is True
    assert f"rounded=true: every value of {REF}" in result.err
    assert "rounded=true" not in result.out


def test_freeze_script_json_is_one_document(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write(ws.root, "paddleformers/glm/extra.py", "x = 1\n")
    capsys.readouterr()
    assert audit_source_freeze.main(["-C", str(ws.root), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["verdict"] == "blocked"
