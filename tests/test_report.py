"""`gates report --html`: the page the release manager reads, on real workspaces (signed runs,
real tensor dumps), bad inputs included, and opened in a real headless browser."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from gates.reporters.report_data import ulp_differences
from tests.glm_fixture import INDEXER, MTP, paddle_arrays, reference_arrays, write_checkpoint
from tests.helpers import (
    Workspace,
    commit_all,
    declare_entrypoints,
    signed_run,
    write,
)
from tests.lossgen import train_losses
from tests.tensorgen import glm_pair, write_dump

PREFIX = "model.layers.0.mlp.experts.0"


def report(ws: Workspace, capsys: pytest.CaptureFixture[str], out: Path) -> str:
    result = ws.gates(capsys, "report", "--html", str(out), "--format", "json")
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    page = (out / "report.html").read_text()
    assert summary["bytes"] == len(page.encode())
    assert "<script" not in page and "<link" not in page  # nothing runs, nothing is fetched
    assert re.search(r"(src|href)\s*=\s*[\"'](https?:)?//|url\((?!#)", page) is None
    return page


def text_of(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def diverging(at: int) -> tuple[list[float], list[float]]:
    reference = train_losses(100)
    candidate = list(reference)
    for index in range(at - 1, 100):
        candidate[index] = reference[index] * (1 + 2**-6)  # two bfloat16 ULPs up
    return reference, candidate


@pytest.fixture
def runs(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> Workspace:
    """Both sides run and signed; the candidate's losses leave the reference's at step 58."""
    declare_entrypoints(ws.root)
    commit_all(ws.repo, "declare the entrypoints")
    reference, candidate = diverging(58)
    signed_run(ws.root, capsys, "torch", reference)
    signed_run(ws.root, capsys, "paddle", candidate)
    return ws


@pytest.mark.slow
def test_the_page_shows_verdict_curves_first_divergence_and_evidence(
    runs: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    page = report(runs, capsys, tmp_path / "report")
    words = text_of(page)
    assert "verdict=blocked" in words
    assert "formal_alignment_steps = 57 / 100" in words
    for series in ('id="reference-loss"', 'id="candidate-loss"', 'id="ulp-difference"'):
        assert series in page
    assert page.count('id="first-divergence"') == 2  # on the loss and the ULP charts
    assert "First diverging step: 58." in words
    assert "(bfloat16)" in words  # the profile's dtype: the ULPs are counted in it
    assert "ULPs" in words
    evidence = page[page.index('id="evidence"') :]
    assert "results/paddle/loss.receipt.json" in evidence
    assert "formal/1" in evidence
    assert page.index('id="verdict"') < page.index('id="contracts"') < page.index('id="losses"')


def test_ulp_differences_are_in_the_source_dtype() -> None:
    one = 1.0
    next32 = float(np.nextafter(np.float32(1.0), np.float32(2)))
    assert ulp_differences((one,), (next32,), "float32") == (1.0,)
    assert ulp_differences((one,), (next32,), "bfloat16") == (0.0,)  # same bf16 value
    assert ulp_differences((one,), (1.0078125,), "bfloat16") == (1.0,)  # one bf16 ULP at 1
    assert ulp_differences((-one,), (one,), "float32")[0] == 2 * 0x3F800000
    assert np.isnan(ulp_differences((float("nan"),), (one,), "float32")[0])  # no distance


def test_no_losses_still_writes_the_page(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    page = report(ws, capsys, tmp_path / "out")
    words = text_of(page)
    assert "No loss receipts: nothing to draw." in words
    assert 'id="reference-loss"' not in page
    assert "verdict=blocked" in words


@pytest.mark.slow
def test_one_side_only_is_drawn_and_said(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    declare_entrypoints(ws.root)
    commit_all(ws.repo, "declare the entrypoints")
    signed_run(ws.root, capsys, "torch", train_losses(100))
    page = report(ws, capsys, tmp_path / "out")
    assert "No candidate loss receipt: only one side is drawn." in text_of(page)
    assert 'id="reference-loss"' in page
    assert 'id="candidate-loss"' not in page


@pytest.mark.slow
def test_nan_losses_are_drawn_marked_and_not_evidence(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    declare_entrypoints(ws.root)
    commit_all(ws.repo, "declare the entrypoints")
    signed_run(ws.root, capsys, "torch", train_losses(100))
    losses = [*train_losses(100)[:40], *([float("nan")] * 60)]
    folder = ws.root / "results/paddle"
    folder.mkdir(parents=True)
    (folder / "loss.json").write_text(json.dumps({"losses": losses}))  # NaN as written
    created = ws.gates(
        capsys,
        "receipt",
        "create",
        "--kind",
        "loss",
        "--subject",
        "results/paddle/loss.json",
        "--framework",
        "paddle",
    )
    assert created.code == 0, created.err
    page = report(ws, capsys, tmp_path / "out")
    words = text_of(page)
    assert "not evidence as it stands: results/paddle/loss.json: $.losses[" in words
    assert "NaN is not finite" in words
    assert 'id="candidate-loss-nan"' in page
    assert "60 NaN step(s)" in words
    assert "First diverging step: 41." in words


def test_the_tensor_map_marks_the_first_differing_tensor(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    contract = ws.root / "contracts/tensor-alignment.toml"
    contract.write_text(contract.read_text().replace('steps = "1:100"', 'steps = "1:3"'))
    commit_all(ws.repo, "three steps")
    ref, cand = glm_pair(np.random.default_rng(9), 3)
    cand[3]["grad"][f"{PREFIX}.up_gate_proj.weight"].view(np.uint32)[0, 0] ^= 1
    write_dump(ws.root / "results/torch", ref, framework="torch")
    write_dump(ws.root / "results/paddle", cand)
    page = report(ws, capsys, tmp_path / "out")
    words = text_of(page)
    assert f"First differing tensor (outlined): step 3 grad {PREFIX}.up_gate_proj.weight" in words
    assert "tensor_aligned_steps = 2 / 3" in words  # the tensor contract's steps, not the loss's
    assert 'id="tensor-map"' in page
    assert 'id="first-differing-tensor"' in page
    assert "tensor(s) dumped, in 2 row(s)" in words  # layer 0 and the embedding


@pytest.mark.slow
@pytest.mark.heavy
def test_sixty_thousand_tensors_aggregate_and_the_page_stays_small(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    contract = ws.root / "contracts/tensor-alignment.toml"
    contract.write_text(contract.read_text().replace('steps = "1:100"', 'steps = "1:1"'))
    commit_all(ws.repo, "one step")
    value = np.ones(1, dtype=np.float32)
    names = [f"model.layers.{i // 400}.mlp.experts.{i % 400}.w" for i in range(30_000)]
    phases = {"grad": dict.fromkeys(names, value), "param": dict.fromkeys(names, value)}
    write_dump(ws.root / "results/torch", {1: phases}, framework="torch")
    nudged = {p: dict(t) for p, t in phases.items()}
    nudged["param"][names[-1]] = np.full(1, 2, dtype=np.float32)
    write_dump(ws.root / "results/paddle", {1: nudged})
    page = report(ws, capsys, tmp_path / "out")
    assert len(page.encode()) < 5_000_000
    words = text_of(page)
    assert "60000 candidate tensor(s) dumped, in 75 row(s)." in words
    assert f"step 1 param {names[-1]}" in words
    assert 'id="first-differing-tensor"' in page


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed: `make test` installs it (apt-get install chromium)")
    return found


@pytest.mark.slow
def test_the_page_renders_its_charts_in_a_real_browser(
    runs: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    browser = _chromium()
    out = tmp_path / "report"
    report(runs, capsys, out)
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1200,2600",
            f"--screenshot={shot}",
            (out / "report.html").as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and shot.is_file(), done.stderr.decode()[-2000:]
    pixels = (matplotlib.image.imread(str(shot))[..., :3] * 255).round().astype(int)

    def near(colour: str) -> int:
        rgb = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
        return int((np.abs(pixels - rgb).sum(axis=-1) < 40).sum())

    assert near("#1f5fbf") > 150  # the reference curve (under the candidate up to step 57)
    assert near("#d9480f") > 500  # the candidate curve
    assert near("#5f3dc4") > 200  # the ULP difference
    assert near("#a4000f") > 100  # the first divergence and the verdict
    dom = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile2'}",
            "--dump-dom",
            (out / "report.html").as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=False,
        text=True,
    )
    assert 'id="reference-loss"' in dom.stdout and 'id="candidate-loss"' in dom.stdout


def test_a_hostile_path_is_text_not_markup_nor_mathtext(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The PR names its files: `<script>` must stay text and `$...$` must not be parsed as
    matplotlib mathtext (which would fail on an unbalanced `$`)."""
    folder = ws.root / "results/paddle/$x<script>alert(1)</script>"
    folder.mkdir(parents=True)
    (folder / "loss.json").write_text(json.dumps({"losses": [2.0, 1.5, 1.25]}))
    subject = f"{folder.relative_to(ws.root).as_posix()}/loss.json"
    created = ws.gates(
        capsys, "receipt", "create", "--kind", "loss", "--subject", subject, "--framework", "paddle"
    )
    assert created.code == 0, created.err
    page = report(ws, capsys, tmp_path / "out")
    assert "<script" not in page
    assert "$x&lt;script&gt;alert(1)&lt;/script&gt;/loss.receipt.json" in page
    assert 'id="candidate-loss"' in page


def test_an_unwritable_target_is_one_error_line(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    blocker = tmp_path / "taken"
    blocker.write_text("a file, not a folder\n")
    result = ws.gates(capsys, "report", "--html", str(blocker / "sub"))
    assert result.code == 2
    lines = result.err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"gates: error: {blocker / 'sub' / 'report.html'}: cannot write")
    assert "internal error" not in lines[0]


def test_the_inventory_lists_every_structural_difference_the_contract_found(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The page reads the contract's typed findings, not its detail line (which names five)."""
    reference = reference_arrays()
    write_checkpoint(ws.root / "results/torch/checkpoint", reference, shards=3)
    write(ws.root, "results/torch/checkpoint/config.json", json.dumps({"num_hidden_layers": MTP}))
    candidate = paddle_arrays(reference, drop_mtp_indexer=True)
    extra = [f"model.extra.{i}.weight" for i in range(3)]
    candidate |= {name: ("F32", np.zeros(4, dtype="<u4")) for name in extra}
    write_checkpoint(ws.root / "results/paddle/checkpoint", candidate)
    audit = json.loads(ws.gates(capsys, "audit", "--format", "json").out)
    inventory = next(c for c in audit["contracts"] if c["id"].endswith("tensor-inventory"))
    structural = next(c for c in inventory["criteria"] if c["name"] == "no_structural_difference")
    assert not structural["met"]
    assert sum(name in structural["detail"] for name in extra) < len(extra)  # five at most
    shown = text_of(report(ws, capsys, tmp_path / "html"))
    for name in [*extra, *(f"model.layers.{MTP}.self_attn.indexer.{s}" for s in INDEXER)]:
        assert name in shown, name
    assert "8 structural" in shown  # the summary, one item of its own
