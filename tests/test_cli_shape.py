"""The command line's shape: a command computes a typed result, a map from format to
renderer formats it, and the `--format` choices are that map's keys.

Every command whose `--format` reads a renderer map shows exactly its keys in `--help`;
every map in gates/commands/ and gates/checkers/ is one a command reads. The renderers
are pure: the same result renders to the same text twice, and again after the workspace
is deleted (they read no file), and what they render is what the command prints.
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import click
import numpy as np
import pytest

from gates.checkers import checkpoint_output
from gates.cli.app import cli
from gates.cli.options import RendererChoice, rendered_by
from gates.commands import (
    attest,
    check,
    checkpoint,
    config_check,
    evidence,
    explain,
    history,
    inventory,
    probe,
    receipt,
    report,
    status,
    steps,
    tensors,
)
from gates.commands import claims as claims_command
from gates.engine.audit import run_audit
from gates.freeze.check import evaluate_freeze
from gates.reporters.verify_export import verify_export
from gates.tensors.compare import Selection
from tests.configsem_fixture import CLASS, FIXED, OFFICIAL_REL, candidate_files, set_files
from tests.glm_fixture import MTP, paddle_arrays, reference_arrays, write_checkpoint
from tests.helpers import (
    GLM_PROFILE,
    RUN_ENV,
    Workspace,
    commit_all,
    inputs_at,
    profile_args,
    run_gates,
    sandbox_support,
    write,
)
from tests.lossgen import train_losses, write_loss_json
from tests.tensorgen import glm_pair as glm_dumps
from tests.tensorgen import write_dump

GATES = Path(__file__).resolve().parent.parent / "gates"

#: The audit's GitHub annotations still find the files an unmet criterion names in its
#: detail (docs/architecture.md): the one renderer that may read a file.
READS_FILES = {("audit", "github")}


def _commands(
    group: click.Group, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


def _format_params(group: click.Group) -> dict[tuple[str, ...], click.Parameter]:
    found = {}
    for path, command in _commands(group):
        for param in command.params:
            if param.name == "out" and isinstance(param.type, RendererChoice):
                found[path] = param
    return found


def _renderer_choices() -> dict[tuple[str, ...], RendererChoice]:
    found = {}
    for path, param in _format_params(cli).items():
        assert isinstance(param.type, RendererChoice)
        found[path] = param.type
    return found


def _renderers(where: str) -> Mapping[str, Callable[[Any], str]]:
    module, _, attribute = where.partition(":")
    renderers: Mapping[str, Callable[[Any], str]] = getattr(
        importlib.import_module(module), attribute
    )
    return renderers


def test_help_offers_exactly_the_renderers_keys(capsys: pytest.CaptureFixture[str]) -> None:
    choices = _renderer_choices()
    assert len(choices) >= 20, sorted(choices)
    for path, choice in choices.items():
        shown = run_gates(capsys, *path, "--help")
        assert shown.code == 0, shown.err
        offered = re.search(r"--format \[([a-z|]+)\]", shown.out)
        assert offered is not None, (path, shown.out)
        keys = _renderers(choice.where)
        assert offered.group(1).split("|") == sorted(keys), path
        assert _format_params(cli)[path].default in keys, path


def test_every_format_option_reads_a_renderer_map() -> None:
    formats = [
        path
        for path, command in _commands(cli)
        for param in command.params
        if "--format" in getattr(param, "opts", ())
    ]
    assert sorted(formats) == sorted(_renderer_choices())


def test_every_renderer_map_is_one_a_command_reads() -> None:
    read = {choice.where for choice in _renderer_choices().values()}
    # `check determinism` renders dumps' repeats with this map: the same names as the loss one
    read.add("gates.commands.tensors:DETERMINISM_RENDERERS")
    defined = set()
    for folder in ("commands", "checkers"):
        for source in sorted((GATES / folder).glob("*.py")):
            for name in re.findall(r"^([A-Z_]*RENDERERS)\b", source.read_text(), re.MULTILINE):
                defined.add(f"gates.{folder}.{source.stem}:{name}")
    assert defined == read
    keys = set(_renderers("gates.commands.check:RENDERERS"))
    assert set(_renderers("gates.commands.tensors:DETERMINISM_RENDERERS")) == keys


def test_a_format_no_renderer_has_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    refused = run_gates(capsys, "explain", "x", "--format", "markdown")
    assert refused.code == 2
    assert "'markdown' is not one of 'json', 'text'" in refused.err


def _record(
    ws: Workspace, capsys: pytest.CaptureFixture[str], framework: str, first: float
) -> None:
    write_loss_json(ws.root / f"results/{framework}/loss.json", [first, *train_losses(9)])
    write(ws.root, f"results/{framework}/env.json", json.dumps({"framework": framework, **RUN_ENV}))
    for kind, name in (("loss", "loss.json"), ("env", "env.json")):
        created = ws.gates(
            capsys,
            "receipt",
            "create",
            "--kind",
            kind,
            "--subject",
            f"results/{framework}/{name}",
            "--framework",
            framework,
            *profile_args(GLM_PROFILE),
        )
        assert created.code == 0, created.err


def _results(ws: Workspace, claims: Path, exported: Path) -> dict[tuple[str, str], object]:
    """Each converted command's result, computed as the command computes it."""
    inputs = inputs_at(ws.root)
    root = inputs.workspace.root
    anchors = inputs.policy.anchors
    found = attest.exported_to(inputs, exported, key_path=None, resource_uri="https://x.invalid/r")
    return {
        ("audit", "gates.commands.audit:RENDERERS"): run_audit(inputs),
        ("steps", "gates.commands.steps:RENDERERS"): steps.steps_report(inputs, None),
        ("explain", "gates.commands.explain:RENDERERS"): explain.explanation(inputs, "results"),
        ("status", "gates.commands.status:RENDERERS"): status.status_report(
            inputs, "en", figures=True
        ),
        ("freeze show", "gates.commands.freeze:RENDERERS"): evaluate_freeze(
            root, inputs.workspace.config
        ),
        ("evidence", "gates.commands.evidence:RENDERERS"): evidence.EvidenceList(
            tuple(evidence.evidence_items(inputs))
        ),
        ("refresh", "gates.commands.evidence:REFRESH_RENDERERS"): evidence.refreshed(
            inputs, dry_run=True, global_options=()
        ),
        ("claims check", "gates.commands.claims:RENDERERS"): claims_command.claims_report(
            inputs, claims
        ),
        ("receipt verify", "gates.commands.receipt:VERIFY_RENDERERS"): receipt.verdicts(
            inputs, ("results/torch/loss.receipt.json",), cwd=root
        ),
        ("receipt show", "gates.commands.receipt:SHOW_RENDERERS"): receipt.shown(
            inputs.workspace, "results/torch/loss.receipt.json", cwd=root
        ),
        ("history", "gates.commands.history:RENDERERS"): history.listing(
            root, anchors, None, step=1, depth=5
        ),
        ("attest export", "gates.commands.attest:EXPORT_RENDERERS"): found,
        ("report", "gates.commands.report:RENDERERS"): report.page_written(
            inputs, exported.parent / "page", history_range=None
        ),
        ("attest verify", "gates.commands.attest:VERIFY_RENDERERS"): attest.Verified(
            verify_export(exported, anchors), anchors.source, True
        ),
    }


def _checked(ws: Workspace) -> dict[tuple[str, str], object]:
    """The checkers' results (each writes its output and receipt: after the others)."""
    inputs = inputs_at(ws.root)
    root = inputs.workspace.root
    loss = ("results/torch/loss.json", "results/paddle/loss.json")
    return {
        ("check loss", "gates.commands.check:RENDERERS"): check.loss_check(
            inputs,
            *loss,
            required_steps=5,
            bit_exact=False,
            output="outputs/l.receipt.json",
            cwd=root,
        ),
        ("check determinism", "gates.commands.check:RENDERERS"): check.determinism_check(
            inputs, loss, output="outputs/d.receipt.json", cwd=root
        ),
    }


#: The read-only commands whose printout is compared with the renderer's text.
PRINTED = {
    "audit": ("audit",),
    "steps": ("steps",),
    "explain": ("explain", "results"),
    "status": ("status",),
    "freeze show": ("freeze", "show"),
    "evidence": ("evidence",),
    "refresh": ("refresh", "--dry-run"),
    "receipt verify": ("receipt", "verify", "results/torch/loss.receipt.json"),
    "receipt show": ("receipt", "show", "results/torch/loss.receipt.json"),
    "history": ("history", "--step", "1", "--max-count", "5"),
}


@pytest.mark.slow
def test_renderers_are_pure_and_print_what_the_command_prints(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _record(ws, capsys, "torch", 11.821396827697754)
    _record(ws, capsys, "paddle", 11.811029434204102)
    claims = tmp_path / "pr.md"
    claims.write_text("formal_alignment_steps = 100 / 100, loss 11.811029434204102\n")
    results = _results(ws, claims, tmp_path / "exported")
    for command, args in PRINTED.items():
        key = next(key for key in results if key[0] == command)
        for name, render in _renderers(key[1]).items():
            printed = ws.gates(capsys, *args, "--format", name)
            assert printed.out == render(results[key]) + "\n", (command, name)
    results |= _checked(ws)
    rendered: dict[tuple[str, str], str] = {}
    for (command, where), result in results.items():
        for name, render in _renderers(where).items():
            text = render(result)
            assert render(result) == text, (command, name)
            if name == "json":
                json.loads(text)  # exactly one document
            rendered[(command, name)] = text
    shutil.rmtree(ws.root)
    shutil.rmtree(tmp_path / "exported")
    shutil.rmtree(tmp_path / "page")
    for (command, where), result in results.items():
        for name, render in _renderers(where).items():
            if (command, name) not in READS_FILES:
                assert render(result) == rendered[(command, name)], (command, name)


@pytest.mark.slow
def test_the_checkers_renderers_are_pure(ws: Workspace) -> None:
    ref, cand = glm_dumps(np.random.default_rng(5), 2)
    write_dump(ws.root / "results/torch", ref, framework="torch")
    for folder in ("results/paddle", "results/paddle-2"):
        write_dump(ws.root / folder, cand)
    reference = reference_arrays()
    write_checkpoint(ws.root / "results/torch/checkpoint", reference, shards=2)
    write(ws.root, "results/torch/checkpoint/config.json", json.dumps({"num_hidden_layers": MTP}))
    write_checkpoint(
        ws.root / "results/paddle/checkpoint", paddle_arrays(reference, drop_mtp_indexer=True)
    )
    set_files(ws.root, ws.repo, candidate_files(FIXED))
    inputs = inputs_at(ws.root)
    root = inputs.workspace.root
    results: dict[str, tuple[Mapping[str, Callable[[Any], str]], object]] = {
        "check config": (
            config_check.RENDERERS,
            config_check.config_check(
                inputs,
                OFFICIAL_REL,
                class_path=CLASS,
                table=None,
                path="src",
                env=(),
                output="outputs/cfg.receipt.json",
                cwd=root,
            ),
        ),
        "check tensors": (
            tensors.RENDERERS,
            tensors.tensors_check(
                inputs,
                "results/torch",
                "results/paddle",
                rules=None,
                selection=Selection(),
                output="outputs/t.receipt.json",
                cwd=root,
            ),
        ),
        "check determinism (dumps)": (
            tensors.DETERMINISM_RENDERERS,
            tensors.dump_determinism_check(
                inputs,
                ("results/paddle", "results/paddle-2"),
                output="outputs/d.receipt.json",
                cwd=root,
            ),
        ),
        "check checkpoint": (
            checkpoint_output.RENDERERS,
            checkpoint.checkpoint_check(
                inputs,
                "results/paddle/checkpoint",
                against=None,
                rules=None,
                shard_range=None,
                threads=1,
                output="outputs/c.receipt.json",
                cwd=root,
            ),
        ),
        "inventory diff": (
            inventory.RENDERERS,
            inventory.inventory_diff(
                inputs,
                "results/torch/checkpoint",
                "results/paddle/checkpoint",
                rules=None,
                output="outputs/s.receipt.json",
                cwd=root,
            ),
        ),
    }
    rendered = {}
    for command, (renderers, result) in results.items():
        for name, render in renderers.items():
            rendered[(command, name)] = render(result)
            assert render(result) == rendered[(command, name)], (command, name)
    assert "structural: 5 in" in rendered[("inventory diff", "text")]
    assert "KEY" in rendered[("check config", "text")]
    shutil.rmtree(ws.root)
    for command, (renderers, result) in results.items():
        for name, render in renderers.items():
            assert render(result) == rendered[(command, name)], (command, name)


def test_the_probes_renderers_are_pure(ws: Workspace) -> None:
    # the probe runs the audited repository's entry point, which gates does only inside its
    # sandbox (bubblewrap, else unshare); `make test` installs bubblewrap first, so this skips
    # only where neither can run (docs/sandbox.md), and says which is missing
    if (found := sandbox_support()).mechanism is None:
        pytest.skip(f"no sandbox here: {found.reason}; `make bubblewrap` installs one")
    entry = (
        "import numpy as np\n\n"
        "def build():\n"
        "    used, unused = np.ones(2, dtype=np.float32), np.zeros(2, dtype=np.float32)\n"
        "    return (lambda: used * 2), {'used': used, 'unused': unused}\n"
    )
    write(ws.root, "probes/entry.py", entry)
    commit_all(ws.repo, "the probe's entry")
    inputs = inputs_at(ws.root)
    root = inputs.workspace.root
    found = probe.probe_consumed(
        inputs, "probes/entry.py:build", (), output="outputs/p.receipt.json", cwd=root
    )
    rendered = {name: render(found) for name, render in probe.RENDERERS.items()}
    assert "used: consumed" in rendered["text"]
    assert "unused: not consumed" in rendered["text"]
    assert {name: render(found) for name, render in probe.RENDERERS.items()} == rendered
    shutil.rmtree(ws.root)
    assert {name: render(found) for name, render in probe.RENDERERS.items()} == rendered


def test_a_renderer_map_outside_gates_is_refused() -> None:
    """The --format choices import their map by name: never a module gates does not own."""
    with pytest.raises(ValueError, match="not one of gates' modules"):
        rendered_by("trainer.train:RENDERERS", "text")
