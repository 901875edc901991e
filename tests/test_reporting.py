"""The PR status block, --pr-body, waivers, explain, claims and the CI formats, via the CLI.

Golden files: tests/golden/status.{en,zh}.md. After an intended change of the block,
regenerate them with `GATES_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_reporting.py`
and review the diff.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.helpers import (
    GLM_PROFILE,
    RUN_ENV,
    Workspace,
    declare_entrypoints,
    profile_args,
    write,
)
from tests.lossgen import train_losses, write_loss_json

GOLDEN = Path(__file__).parent / "golden"
FULLWIDTH_OPEN, FULLWIDTH_CLOSE = "\uff08", "\uff09"  # the parentheses of Chinese text
SEED_PR = Path(__file__).parent / "data" / "seed-pr-glm52-alignment.txt"  # the seed PR text
PROFILE = profile_args(GLM_PROFILE)
ENV = RUN_ENV


def record(ws: Workspace, capsys: pytest.CaptureFixture[str], framework: str, first: float) -> None:
    losses = [first, *train_losses(99)]
    write_loss_json(ws.root / f"results/{framework}/loss.json", losses)
    write(ws.root, f"results/{framework}/env.json", json.dumps({"framework": framework, **ENV}))
    for kind, name in (("loss", "loss.json"), ("env", "env.json")):
        result = ws.gates(
            capsys,
            "receipt",
            "create",
            "--kind",
            kind,
            "--subject",
            f"results/{framework}/{name}",
            "--framework",
            framework,
            *PROFILE,
        )
        assert result.code == 0, result.err


@pytest.fixture
def seeded(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> Workspace:
    """The seed PR's situation: both sides recorded, losses differing from step 1."""
    record(ws, capsys, "torch", 11.821396827697754)
    record(ws, capsys, "paddle", 11.811029434204102)
    ws.gates(
        capsys,
        "check",
        "loss",
        "results/torch/loss.json",
        "results/paddle/loss.json",
        "-o",
        "experiments/e055-acceptance-oracle/checker_run.receipt.json",
    )
    return ws


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_status_block_matches_the_golden_file(
    seeded: Workspace, capsys: pytest.CaptureFixture[str], lang: str
) -> None:
    result = seeded.gates(capsys, "status", "--lang", lang)
    assert result.code == 1
    golden = GOLDEN / f"status.{lang}.md"
    if os.environ.get("GATES_UPDATE_GOLDEN") == "1":
        golden.write_text(result.out, encoding="utf-8")
    assert result.out == golden.read_text(encoding="utf-8")


@pytest.mark.slow
def test_status_is_deterministic_and_fixed_size(
    seeded: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    first = seeded.gates(capsys, "status").out
    assert seeded.gates(capsys, "status").out == first
    contract_rows = [
        line for line in first.splitlines() if line.startswith("| `") and "` | yes |" in line
    ]
    assert len(contract_rows) == 6
    for index in range(20):
        write_loss_json(
            seeded.root / f"experiments/extra/run{index:02d}/loss.json",
            [float(index) + 0.123456789],
        )
        seeded.gates(
            capsys,
            "receipt",
            "create",
            "--kind",
            "loss",
            "--subject",
            f"experiments/extra/run{index:02d}/loss.json",
        )
    grown = seeded.gates(capsys, "status").out
    evidence_rows = [
        line for line in grown.splitlines() if line.startswith("| `") and ".receipt.json` |" in line
    ]
    assert len(evidence_rows) == 12
    assert "…and 13 more receipt(s)" in grown


@pytest.mark.slow
def test_pr_body_block_is_replaced_in_place_and_idempotent(
    seeded: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    body = tmp_path / "pr.md"
    before, after = (
        "## Description\r\nAOA keeps the DSA index sharing.\r\n\n",
        "\n## Tests\nsee CI 😊\n",
    )
    body.write_bytes(
        (before + "<!-- gates:status -->\nstale\n<!-- /gates:status -->" + after).encode()
    )
    result = seeded.gates(capsys, "status", "--pr-body", str(body))
    assert result.out.strip().endswith("status block updated")
    text = body.read_bytes().decode()
    assert text.startswith(before)
    assert text.endswith(after)
    assert "stale" not in text
    assert seeded.gates(capsys, "status").out.rstrip("\n") in text
    stamp = body.stat().st_mtime_ns
    again = seeded.gates(capsys, "status", "--pr-body", str(body))
    assert again.out.strip().endswith("status block unchanged")
    assert body.read_bytes().decode() == text
    assert body.stat().st_mtime_ns == stamp


def test_pr_body_without_markers_gets_the_block_appended(
    seeded: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    body = tmp_path / "pr.md"
    body.write_text("Draft.\n")
    seeded.gates(capsys, "status", "--pr-body", str(body))
    text = body.read_text()
    assert text.startswith("Draft.\n\n<!-- gates:status -->\n")
    assert text.endswith("<!-- /gates:status -->\n")
    seeded.gates(capsys, "status", "--pr-body", str(body))
    assert body.read_text() == text


def test_status_json_carries_unverified_and_not_claimed(
    seeded: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(seeded.gates(capsys, "status", "--format", "json").out)
    assert data["verdict"] == "blocked"
    assert any("Checkpoint canonical hash equality" in item for item in data["unverified"])
    assert (
        data["not_claimed"]
        == "_Not claimed by this PR: loss alignment, checkpoint alignment, completion._"
    )


def waiver(
    ws: Workspace, name: str, contract: str, expires: str, criterion: str | None = None
) -> None:
    lines = [
        f'contract = "{contract}"',
        'owner = "zrr1999"',
        'reason = "MTP indexer not built on the Paddle side yet"',
        f"expires = {expires}",
    ]
    if criterion:
        lines.append(f'criterion = "{criterion}"')
    write(ws.root, f"contracts/{name}.waiver.toml", "\n".join(lines) + "\n")


def keep_freeze_and_inventory(ws: Workspace) -> None:
    for path in (ws.root / "contracts").glob("*.toml"):
        if "source-freeze" not in path.name and "tensor-inventory" not in path.name:
            path.unlink()


def test_an_active_waiver_unblocks_and_an_expired_one_blocks_again(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    keep_freeze_and_inventory(ws)
    inventory = "contract_environment.tensor-inventory"
    waiver(ws, "inventory", inventory, "2999-12-31")
    report = json.loads(ws.gates(capsys, "audit", "--format", "json").out)
    assert report["verdict"] == "pass"
    entry = next(c for c in report["contracts"] if c["id"] == inventory)
    assert entry["dischargeStatus"] == "undischarged"
    assert entry["waived"] is True
    assert entry["waivers"][0]["owner"] == "zrr1999"
    assert report["formal_alignment_steps"] == 0
    status = ws.gates(capsys, "status").out
    assert "undischarged (waived)" in status
    assert "waived by zrr1999 until 2999-12-31" in status
    waiver(ws, "inventory", inventory, "2020-01-01")
    result = ws.gates(capsys, "audit")
    assert result.code == 1
    assert (
        f"blocked by: {inventory} is undischarged (waiver by zrr1999 expired on 2020-01-01)"
        in result.out
    )


def test_a_criterion_waiver_covers_only_that_criterion(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    keep_freeze_and_inventory(ws)
    inventory = "contract_environment.tensor-inventory"
    waiver(ws, "one", inventory, "2999-12-31", criterion="no_structural_difference")
    assert json.loads(ws.gates(capsys, "audit", "--format", "json").out)["verdict"] == "blocked"


@pytest.mark.parametrize(
    ("contract", "criterion", "message"),
    [
        (
            "contract_environment.no-such-contract",
            None,
            "waiver for unknown contract contract_environment.no-such-contract",
        ),
        (
            "contract_environment.tensor-inventory",
            "no_such_criterion",
            "has no criterion no_such_criterion",
        ),
    ],
)
def test_a_waiver_for_something_unknown_is_an_error(
    ws: Workspace,
    capsys: pytest.CaptureFixture[str],
    contract: str,
    criterion: str | None,
    message: str,
) -> None:
    waiver(ws, "bad", contract, "2999-12-31", criterion)
    result = ws.gates(capsys, "audit")
    assert result.code == 2
    assert message in result.out


def test_a_malformed_waiver_is_an_error(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    write(
        ws.root,
        "contracts/late.waiver.toml",
        'contract = "x.y"\nowner = "a"\nreason = "r"\nexpires = "soon"\n',
    )
    result = ws.gates(capsys, "audit", "--format", "json")
    assert result.code == 2
    assert any(
        "contracts/late.waiver.toml: key 'expires'" in b for b in json.loads(result.out)["blockers"]
    )


def test_explain_lists_criteria_and_commands(
    seeded: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    result = seeded.gates(capsys, "explain", "acceptance_oracle.results-schema-and-provenance")
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines[0] == (
        "acceptance_oracle.results-schema-and-provenance: "
        "Results are schema-valid, receipted, and formally aligned for the required steps"
    )
    assert (
        "  [x] reference_results_valid: "
        "loss.json, env.json present, valid and receipted in results/torch/"
    ) in lines
    assert any(
        line.startswith("  [ ] formal_alignment_steps: formal_alignment_steps = 0 / 100")
        for line in lines
    )
    assert (
        "  $ gates check loss results/torch/loss.json results/paddle/loss.json --bit-exact" in lines
    )
    unknown = seeded.gates(capsys, "explain", "no.such")
    assert unknown.code == 2
    assert "no contract 'no.such'" in unknown.err


def test_explain_takes_the_short_id_the_status_block_shows(
    seeded: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    block = seeded.gates(capsys, "status").out
    assert "| `tensor-inventory` · `contract_environment.tensor-inventory` | yes |" in block
    short = seeded.gates(capsys, "explain", "tensor-inventory")
    assert short.code == 1
    assert short.out.splitlines()[0].startswith("contract_environment.tensor-inventory: ")
    # a short id that names two contracts is refused, never guessed
    write(
        seeded.root,
        "contracts/other-inventory.toml",
        (seeded.root / "contracts/tensor-inventory.toml")
        .read_text()
        .replace("contract_environment.tensor-inventory", "second_group.tensor-inventory"),
    )
    ambiguous = seeded.gates(capsys, "explain", "tensor-inventory")
    assert ambiguous.code == 2
    assert "'tensor-inventory' names more than one contract" in ambiguous.err


def test_the_zh_block_words_statuses_classes_and_sides_in_chinese(
    seeded: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    block = seeded.gates(capsys, "status", "--lang", "zh").out
    rows = [line.split(" | ") for line in block.splitlines() if line.startswith("| `")]
    contract_statuses = {row[2] for row in rows if len(row) == 5}
    assert contract_statuses == {"未解除", "部分解除", "已解除"}
    evidence = [row for row in rows if len(row) == 6]
    assert {row[3] for row in evidence} == {"探查"}
    assert {row[2] for row in evidence} == {"-", "候选侧 (paddle)", "参考侧 (torch)"}
    for english in ("undischarged", "discharging", "signer(s)", "step-1 loss", "| probe |"):
        assert english not in block.split("<details>")[0], english


@pytest.mark.parametrize(
    ("lang", "words"),
    [
        (
            "en",
            [
                "**formal**",
                "**probe**",
                "**discharged**",
                "**discharging**",
                "**undischarged**",
                "**formal/1**",
            ],
        ),
        (
            "zh",
            [
                f"正式{FULLWIDTH_OPEN}formal{FULLWIDTH_CLOSE}",
                f"探查{FULLWIDTH_OPEN}probe{FULLWIDTH_CLOSE}",
                f"已解除{FULLWIDTH_OPEN}discharged{FULLWIDTH_CLOSE}",
                f"部分解除{FULLWIDTH_OPEN}discharging{FULLWIDTH_CLOSE}",
                f"未解除{FULLWIDTH_OPEN}undischarged{FULLWIDTH_CLOSE}",
                "**formal/1**",
            ],
        ),
    ],
)
def test_the_block_ends_with_a_glossary(
    seeded: Workspace, capsys: pytest.CaptureFixture[str], lang: str, words: list[str]
) -> None:
    block = seeded.gates(capsys, "status", "--lang", lang).out
    glossary = block[block.index("<details>") : block.index("</details>")]
    for word in words:
        assert word in glossary, word
    assert block.rstrip("\n").endswith("</details>\n<!-- /gates:status -->")


def test_claims_check_flags_the_withdrawn_forward_loss(
    seeded: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    result = seeded.gates(capsys, "claims", "check", str(SEED_PR), "--format", "json")
    assert result.code == 1
    claims = json.loads(result.out)
    by_text = {claim["text"]: claim for claim in claims}
    withdrawn = by_text["12.416634559631348"]
    assert withdrawn["backed"] is False
    assert withdrawn["line"] == next(
        n
        for n, line in enumerate(SEED_PR.read_text().splitlines(), 1)
        if "12.416634559631348" in line
    )
    assert by_text["11.811029434204102"]["backed"] is True
    assert by_text["11.811029434204102"]["source"] == "results/paddle/loss.json"
    assert by_text["length_match=true"]["backed"] is True
    assert by_text["consistent_steps=0"]["backed"] is False  # the checker found 99
    assert by_text["187 vs paddle 182"]["backed"] is False
    text = seeded.gates(capsys, "claims", "check", str(SEED_PR))
    assert f"{SEED_PR}:{withdrawn['line']}: unbacked float claim: 12.416634559631348" in text.out


def test_claims_backed_by_a_survey_and_receipts(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    record(ws, capsys, "paddle", 11.811029434204102)
    claim = tmp_path / "claim.md"
    claim.write_text(
        f"HEAD {ws.pin[:8]}; loss 11.811029434204102; weights_loaded=true; max_diff=1.58...\n"
    )
    claims = json.loads(ws.gates(capsys, "claims", "check", str(claim), "--format", "json").out)
    backed = {c["text"]: c["backed"] for c in claims}
    assert backed == {
        ws.pin[:8]: True,
        "11.811029434204102": True,
        "weights_loaded=true": True,
        "max_diff=1.58...": False,
    }


def test_junit_has_one_testcase_per_contract(
    seeded: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    result = seeded.gates(capsys, "audit", "--format", "junit")
    assert result.code == 1
    suite = ET.fromstring(result.out.split("\n", 1)[1])  # noqa: S314  (our own output)
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "contract_environment.config-semantics",
        "contract_environment.manifest-format-key",
        "acceptance_oracle.results-schema-and-provenance",
        "contract_environment.source-freeze-head-vs-pin",
        "acceptance_oracle.tensor-alignment",
        "contract_environment.tensor-inventory",
    ]
    assert cases[3].find("failure") is None
    assert cases[2].find("failure") is not None
    assert suite.get("failures") == "5"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["formal_alignment_steps"] == "0"
    # the JUnit XSD orders a testsuite's children: <properties> before any <testcase>
    assert [child.tag for child in suite][:2] == ["properties", "testcase"]


def test_github_annotations(seeded: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    lines = seeded.gates(capsys, "audit", "--format", "github").out.splitlines()
    assert lines[-1] == "::notice title=gates verdict=blocked::formal_alignment_steps = 0 / 100"
    contracts = [line for line in lines if line.startswith("::error file=contracts/")]
    assert len(contracts) == 5
    # file and line: the TOML line of the first unmet criterion's key, else the id line
    assert contracts[0].startswith(
        "::error file=contracts/config-semantics.toml,line=22,"
        "title=contract_environment.config-semantics::"
    )
    config_lines = (seeded.root / "contracts/config-semantics.toml").read_text().splitlines()
    assert config_lines[21].startswith("official = ")  # official_pinned
    assert contracts[1].startswith(
        "::error file=contracts/manifest-format-key.toml,line=3,"
        "title=contract_environment.manifest-format-key::"
    )
    # an unmet criterion that names workspace files is annotated on each of them too
    assert any(
        line.startswith(
            "::error file=results/torch/env.json,line=1,"
            "title=contract_environment.config-semantics%3A env_agreement::"
        )
        for line in lines
    )


def test_claims_skip_the_status_block_and_read_past_a_full_stop(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    record(ws, capsys, "paddle", 11.811029434204102)
    body = tmp_path / "pr.md"  # outside the source tree, as the README writes it
    body.write_text("The first loss was 11.811029434204102. weights_loaded=true.\n")
    assert ws.gates(capsys, "status", "--pr-body", str(body)).code in (0, 1)
    assert "<!-- gates:status -->" in body.read_text()
    claims = json.loads(ws.gates(capsys, "claims", "check", str(body), "--format", "json").out)
    assert {c["text"]: c["backed"] for c in claims} == {
        "11.811029434204102": True,
        "weights_loaded=true.": True,
    }, "only the author's own lines are claims; a sentence's full stop is not part of a value"
    body.write_text(body.read_text() + "Also max_diff=3.57e-07.\n")
    claims = json.loads(ws.gates(capsys, "claims", "check", str(body), "--format", "json").out)
    assert {c["text"]: c["backed"] for c in claims}["max_diff=3.57e-07."] is False


def test_explain_takes_a_short_id_and_fills_in_the_declared_entrypoints(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    declare_entrypoints(ws.root)
    for given in ("results-schema-and-provenance", "results-schema"):
        result = ws.gates(capsys, "explain", given)
        assert result.out.startswith("acceptance_oracle.results-schema-and-provenance: "), given
    lines = result.out.splitlines()
    assert "  $ gates run --framework torch -- python trainer/train.py" in lines
    assert "  $ gates run --framework paddle -- python trainer/train.py" in lines
    assert "<reference entrypoint>" not in result.out
    entry = json.loads(ws.gates(capsys, "explain", "results-schema", "--format", "json").out)
    assert "gates run --framework torch -- python trainer/train.py" in entry["remediation"]
    ambiguous = ws.gates(capsys, "explain", "contract_environment")
    assert ambiguous.code == 2
    assert "names more than one contract" in ambiguous.err


@pytest.mark.slow
def test_the_evidence_table_puts_the_side_results_before_the_repeats(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    for index in range(14):  # repeats sort before results/ by name, and fill the table
        write_loss_json(ws.root / f"experiments/a-repeat-{index:02}/loss.json", [1.5, 1.25])
        ws.gates(
            capsys,
            "receipt",
            "create",
            "--kind",
            "loss",
            "--subject",
            f"experiments/a-repeat-{index:02}/loss.json",
            "--framework",
            "paddle",
        )
    record(ws, capsys, "torch", 11.821396827697754)
    record(ws, capsys, "paddle", 11.811029434204102)
    block = ws.gates(capsys, "status").out
    rows = [line for line in block.splitlines() if line.startswith("| `")]
    receipts = [row.split("`")[1] for row in rows if "receipt.json" in row.split("`")[1]]
    assert receipts[:4] == [
        "results/paddle/loss.receipt.json",
        "results/torch/loss.receipt.json",
        "results/paddle/env.receipt.json",
        "results/torch/env.receipt.json",
    ]
    assert "more" in block


def test_github_annotates_a_rejected_receipt_on_its_file(
    seeded: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    loss = seeded.root / "results/paddle/loss.json"
    # the sizes depend on the float repr of the generated losses (the BLAS kernel's bits)
    before = loss.stat().st_size
    loss.write_text(loss.read_text().replace("11.811029434204102", "11.5"))
    after = loss.stat().st_size
    assert after == before - len("811029434204102") + len("5")
    lines = seeded.gates(capsys, "audit", "--format", "github").out.splitlines()
    rejected = [line for line in lines if "title=rejected receipt::" in line]
    assert (
        "::error file=results/paddle/loss.receipt.json,line=1,title=rejected receipt::"
        f"subject results/paddle/loss.json changed: {after} bytes, receipt says {before}"
    ) in rejected
    # the checker receipt that consumed it is rejected in turn, on its own file
    assert any(
        line.startswith(
            "::error file=experiments/e055-acceptance-oracle/checker_run.receipt.json,line=1,"
        )
        for line in rejected
    )


def test_github_format_writes_the_job_summary(
    seeded: Workspace,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert seeded.gates(capsys, "audit", "--format", "github").code == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n<!-- gates:status -->\n### gates: **blocked**")
    assert "| Contract |" in text
    assert text.endswith("<!-- /gates:status -->\n")
    # other formats leave it alone
    assert seeded.gates(capsys, "audit", "--format", "junit").code == 1
    assert summary.read_text() == text


def test_an_unwritable_job_summary_is_one_line_and_the_annotations_stay(
    seeded: Workspace,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "missing-folder" / "summary.md"))
    result = seeded.gates(capsys, "audit", "--format", "github")
    assert result.code == 1
    assert result.out.splitlines()[-1].startswith("::notice title=gates verdict=blocked")
    assert "cannot append the job summary" in result.err
    assert "Traceback" not in result.err


def test_every_locale_file_is_a_language_of_the_cli(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """The --lang choices and gates/locales/*.json agree, and each locale has every text."""
    locales = Path(__file__).resolve().parent.parent / "gates/locales"
    languages = sorted(path.stem for path in locales.glob("*.json"))
    assert languages == ["en", "zh"]
    keys = {lang: set(json.loads((locales / f"{lang}.json").read_text())) for lang in languages}
    assert keys["zh"] >= keys["en"]
    for lang in languages:
        assert ws.gates(capsys, "status", "--lang", lang).code in (0, 1)
    refused = ws.gates(capsys, "status", "--lang", "fr")
    assert refused.code == 2
    assert "'fr' is not one of 'en', 'zh'" in refused.err
