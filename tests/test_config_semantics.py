"""Config semantics: `gates check config` and the config-semantics contract, on small candidate
classes in their own git repositories (each historical bug, and the fix) and on bad input."""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any

import pytest

from tests.configsem_fixture import (
    CLASS,
    FIXED,
    OFFICIAL,
    OFFICIAL_REL,
    PARKED,
    PARTIAL_LOST,
    REVISION,
    TYPE_STRIPPED,
    candidate_files,
    env_json,
    set_files,
    table_with,
)
from tests.helpers import Result, Workspace, commit_all, write

CONTRACT_ID = "contract_environment.config-semantics"


@pytest.fixture
def cand(ws: Workspace) -> Workspace:
    """The workspace holding the fixed candidate class under src/ and the official config."""
    set_files(ws.root, ws.repo, candidate_files(FIXED))
    return ws


def check(ws: Workspace, capsys: pytest.CaptureFixture[str], *args: str) -> Result:
    return ws.gates(capsys, "check", "config", OFFICIAL_REL, "--class", CLASS, *args)


def check_json(
    ws: Workspace, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, dict[str, Any]]:
    result = check(ws, capsys, "--path", "src", "--format", "json", *args)
    assert result.code in (0, 1), result.err
    return result.code, json.loads(result.out)


def criteria(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["criteria"]}


def unmet(report: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["detail"] for c in report["criteria"] if not c["met"]}


def row(report: dict[str, Any], key: str) -> dict[str, Any]:
    return next(r for r in report["keys"] if r["key"] == key)


def test_the_fixed_class_discharges_every_criterion(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = check_json(cand, capsys)
    assert (code, unmet(report)) == (0, {})
    assert report["passed"] is True
    assert "glmcfg" not in sys.modules  # the candidate ran in a subprocess only
    assert report["candidate"]["source"] == "src"
    assert report["candidate"]["loaded_via"] == "from_pretrained"
    theta = row(report, "rope_parameters.rope_theta")
    assert (theta["attribute"], theta["value"], theta["status"]) == ("rope_theta", 8000000, "ok")
    assert theta["read_at"].startswith("glmcfg/modeling.py:")
    assert row(report, "indexer_types")["status"].startswith("absent from the official config")
    assert row(report, "transformers_version")["how"] == "ignored"
    # the output and its receipt, through the existing checker path
    assert report["output"] == "outputs/config_check.json"
    saved = json.loads((cand.root / "outputs" / "config_check.json").read_text())
    assert saved["format"] == "gates.config_check/v1"
    shown = cand.gates(capsys, "receipt", "verify", "outputs/config_check.receipt.json")
    assert shown.code == 0, shown.out + shown.err


def test_text_output_is_the_per_key_table_and_the_criteria(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    set_files(cand.root, cand.repo, {"src/glmcfg/configuration.py": PARKED})
    result = check(cand, capsys, "--path", "src")
    assert result.code == 1, result.err
    lines = result.out.splitlines()
    assert lines[0].split() == ["KEY", "OFFICIAL", "ATTRIBUTE", "VALUE", "STATUS", "READ", "AT"]
    parked = next(line for line in lines if line.startswith("indexer_rope_interleave "))
    assert "rotary_interleaved" in parked
    assert "holds false, official true" in parked
    assert (
        "UNMET meaning_held: 1 wrong: indexer_rope_interleave -> rotary_interleaved" in result.out
    )
    assert "passed=false" in result.out


def test_a_key_parked_in_an_extra_field_is_named(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    set_files(cand.root, cand.repo, {"src/glmcfg/configuration.py": PARKED})
    code, report = check_json(cand, capsys)
    assert code == 1
    assert set(unmet(report)) == {"meaning_held", "round_trips"}
    # parked in a dict, it is not in the saved file under its own name either
    assert unmet(report)["round_trips"] == (
        "indexer_rope_interleave dropped from the saved config.json"
    )
    assert (
        "indexer_rope_interleave -> rotary_interleaved: holds false"
        in unmet(report)["meaning_held"]
    )


def test_an_attribute_nothing_reads_is_named_with_where_the_others_are_read(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    files = candidate_files(FIXED, unread=("index_topk_freq", "rotary_interleaved"))
    set_files(cand.root, cand.repo, {"src/glmcfg/modeling.py": files["src/glmcfg/modeling.py"]})
    code, report = check_json(cand, capsys)
    assert code == 1
    assert set(unmet(report)) == {"consumed"}
    assert "2 attribute(s) read nowhere" in unmet(report)["consumed"]
    assert "index_topk_freq, rotary_interleaved" in unmet(report)["consumed"]
    assert row(report, "index_topk_freq")["read_at"] is None
    # a read through attribute_map counts for the attribute it maps to
    aliased = FIXED.replace(
        'model_type = "glm_moe_dsa"\n',
        'model_type = "glm_moe_dsa"\n    attribute_map = {"index_topk_every": "index_topk_freq"}\n',
    )
    modeling = files["src/glmcfg/modeling.py"] + "\n\ndef every(config):\n"
    modeling += "    return config.index_topk_every\n"
    set_files(
        cand.root,
        cand.repo,
        {"src/glmcfg/configuration.py": aliased, "src/glmcfg/modeling.py": modeling},
    )
    code, report = check_json(cand, capsys)
    assert "index_topk_freq" not in unmet(report)["consumed"]
    line = modeling.splitlines().index("    return config.index_topk_every") + 1
    assert row(report, "index_topk_freq")["read_at"] == f"glmcfg/modeling.py:{line}"


def test_reads_in_the_config_module_itself_do_not_count(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    files = candidate_files(FIXED, unread=("index_topk",))
    reads_itself = FIXED + "\n    def describe(self):\n        return self.index_topk\n"
    set_files(
        cand.root,
        cand.repo,
        {
            "src/glmcfg/modeling.py": files["src/glmcfg/modeling.py"],
            "src/glmcfg/configuration.py": reads_itself,
        },
    )
    _, report = check_json(cand, capsys)
    assert "1 attribute(s) read nowhere in src/: index_topk" in unmet(report)["consumed"]


def test_partial_rotary_factor_lost_across_to_dict_from_dict(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    files = candidate_files(PARTIAL_LOST, also_read=("rope_scaling.partial_rotary_factor",))
    set_files(cand.root, cand.repo, files)
    table = table_with(
        cand.root,
        "[[params.implied]]\n"
        'attribute = "rope_scaling.partial_rotary_factor"\n'
        "value = 0.5\n"
        'why = "the test model rotates half of each head"\n',
    )
    code, report = check_json(cand, capsys, "--table", table)
    assert code == 1
    assert set(unmet(report)) == {"round_trips"}
    detail = unmet(report)["round_trips"]
    assert "rope_scaling.partial_rotary_factor gone after to_dict -> from_dict" in detail
    assert "gone after to_json_string -> from_json_file" in detail
    # the fixed class keeps it through every path
    set_files(cand.root, cand.repo, {"src/glmcfg/configuration.py": FIXED})
    code, report = check_json(cand, capsys, "--table", table)
    assert (code, unmet(report)) == (0, {})


def test_a_nested_key_stripped_on_save_fails_even_though_reload_refills_it(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    set_files(cand.root, cand.repo, {"src/glmcfg/configuration.py": TYPE_STRIPPED})
    code, report = check_json(cand, capsys)
    assert code == 1
    assert unmet(report) == {
        "round_trips": "rope_parameters.rope_type dropped from the saved config.json"
    }
    assert row(report, "rope_parameters.rope_type")["value"] == "default"


def test_rope_theta_left_at_its_default_is_a_wrong_meaning(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    default_base = FIXED.replace(
        'self.rope_theta = self.rope_parameters["rope_theta"]', "self.rope_theta = 10000.0"
    )
    set_files(cand.root, cand.repo, {"src/glmcfg/configuration.py": default_base})
    _, report = check_json(cand, capsys)
    assert (
        "rope_parameters.rope_theta -> rope_theta: holds 10000.0, official 8000000"
        in (unmet(report)["meaning_held"])
    )


# ---- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "the official config is not valid JSON"),
        ('{"vocab_size": 1, "vocab_size": 2}', "duplicate key 'vocab_size'"),
        ('{"rms_norm_eps": NaN}', "NaN is not valid JSON"),
        ("[1, 2]", "the official config is not a JSON object"),
    ],
)
def test_an_unusable_official_config_is_one_error_line(
    cand: Workspace, capsys: pytest.CaptureFixture[str], text: str, problem: str
) -> None:
    write(cand.root, OFFICIAL_REL, text)
    result = check(cand, capsys, "--path", "src")
    assert result.code == 2
    assert result.out == ""
    assert result.err.startswith(f"gates: error: {OFFICIAL_REL}: ")
    assert problem in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_an_official_config_that_is_not_the_pinned_one_is_unmet(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    changed = OFFICIAL.read_text().replace('"index_topk": 2048', '"index_topk": 1024')
    write(cand.root, OFFICIAL_REL, changed)
    code, report = check_json(cand, capsys)
    assert code == 1
    digest = hashlib.sha256(changed.encode()).hexdigest()
    pinned = hashlib.sha256(OFFICIAL.read_bytes()).hexdigest()
    assert unmet(report)["official_pinned"] == (
        f"{OFFICIAL_REL}: sha256 {digest} is not the pinned {pinned}"
    )


def test_a_new_upstream_key_is_never_silently_ignored(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    document = json.loads(OFFICIAL.read_text())
    document["index_topk_window"] = 64
    document["rope_parameters"]["factor"] = 2.0
    write(cand.root, OFFICIAL_REL, json.dumps(document))
    table = table_with(cand.root, "", replace={'sha256 = "13f84f3e': 'xsha256 = "13f84f3e'})
    table_text = (cand.root / table).read_text().replace("xsha256 = ", "# sha256 = ")
    (cand.root / table).write_text(table_text)
    code, report = check_json(cand, capsys, "--table", table)
    assert code == 1
    assert unmet(report)["table_covers_official"] == (
        "2 official key(s) not in the table: rope_parameters.factor, index_topk_window"
    )
    assert row(report, "index_topk_window")["status"] == "not in the table"
    assert unmet(report)["official_pinned"].startswith(f"{OFFICIAL_REL}: no sha256 pin")


@pytest.mark.parametrize(
    ("configuration", "expected"),
    [
        (None, "glmcfg.nowhere:GlmMoeDsaConfig: import failed: ModuleNotFoundError: "),
        (
            "raise RuntimeError('no CUDA device found')\n",
            "import failed: RuntimeError: no CUDA device found",
        ),
        (
            FIXED.replace(
                "        super().__init__(**kwargs)\n",
                "        raise ValueError('unknown rope type')\n",
            ),
            "loading the official config failed: ValueError: unknown rope type",
        ),
        ("import os\nos._exit(3)\n", "ended with exit code 3 and no result"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", "killed by signal 11"),
        (
            FIXED + "\nprint('loading GLM config')\n",
            "printed to stdout: 'loading GLM config'",
        ),
    ],
    ids=["does-not-import", "import-raises", "constructor-raises", "exits", "crashes", "prints"],
)
def test_a_class_that_does_not_load_cleanly_is_unmet_never_a_traceback(
    cand: Workspace,
    capsys: pytest.CaptureFixture[str],
    configuration: str | None,
    expected: str,
) -> None:
    args: tuple[str, ...] = ()
    if configuration is None:
        args = ("--class", "glmcfg.nowhere:GlmMoeDsaConfig")
    else:
        set_files(cand.root, cand.repo, {"src/glmcfg/configuration.py": configuration})
    result = cand.gates(
        capsys,
        "check",
        "config",
        OFFICIAL_REL,
        "--class",
        CLASS,
        *args,
        "--path",
        "src",
        "--format",
        "json",
    )
    assert result.code == 1, result.err
    assert "Traceback" not in result.out + result.err
    report = json.loads(result.out)
    assert expected in unmet(report)["candidate_loads"]
    if "printed" not in expected:
        assert unmet(report)["meaning_held"] == "not evaluated: the candidate class did not load"


@pytest.mark.slow
@pytest.mark.heavy
def test_a_class_that_hangs_is_killed_at_the_timeout(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    set_files(
        cand.root, cand.repo, {"src/glmcfg/configuration.py": "import time\ntime.sleep(600)\n"}
    )
    table = table_with(cand.root, "", replace={"timeout_s = 180": "timeout_s = 2"})
    code, report = check_json(cand, capsys, "--table", table)
    assert code == 1
    assert unmet(report)["candidate_loads"] == f"{CLASS} did not load within 2 s (hung; killed)"


def test_a_table_attribute_that_does_not_exist_is_named(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    table = table_with(
        cand.root,
        "",
        replace={
            'key = "index_topk"\nattribute = "index_topk"': (
                'key = "index_topk"\nattribute = "indexer_topk"\nhow = "renamed"'
            )
        },
    )
    _, report = check_json(cand, capsys, "--table", table)
    assert unmet(report)["meaning_held"] == (
        "1 wrong: index_topk -> indexer_topk: no attribute indexer_topk"
    )


def test_a_table_naming_an_official_key_twice_is_an_error(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    table = table_with(cand.root, '[[params.keys]]\nkey = "vocab_size"\nattribute = "vocab_size"\n')
    result = check(cand, capsys, "--path", "src", "--table", table)
    assert result.code == 2
    assert result.err.strip() == (
        f"gates: error: {table}: params.keys[55] (vocab_size): "
        "the official key vocab_size is in the table twice"
    )


def test_a_candidate_writing_outside_its_save_folder_is_named(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    escapes = FIXED.replace(
        "    def to_dict(self):\n",
        "    def save_pretrained(self, folder):\n"
        "        super().save_pretrained(folder)\n"
        "        import os\n"
        "        with open(os.path.join(folder, '..', 'leaked.json'), 'w') as handle:\n"
        "            handle.write('{}')\n"
        "        with open('in-cwd.txt', 'w') as handle:\n"
        "            handle.write('x')\n"
        "\n"
        "    def to_dict(self):\n",
    )
    set_files(cand.root, cand.repo, {"src/glmcfg/configuration.py": escapes})
    _, report = check_json(cand, capsys)
    assert unmet(report) == {
        "round_trips": "wrote outside its save folder: out/leaked.json, work/in-cwd.txt"
    }


# ---- the contract in the audit ----------------------------------------------------------------


def contract_workspace(
    ws: Workspace, capsys: pytest.CaptureFixture[str], *, revision: str | None
) -> None:
    """Point the workspace's contract at the test class, record both sides' env.json, pin."""
    path = ws.root / "contracts" / "config-semantics.toml"
    text = path.read_text()
    text = text.replace(
        'class = "paddleformers.transformers.glm_moe_dsa.configuration:GlmMoeDsaConfig"',
        f'class = "{CLASS}"',
    )
    path.write_text(text.replace('source = ""', 'source = "src"'))
    for contract in (ws.root / "contracts").glob("*.toml"):
        if contract.name not in ("config-semantics.toml", "source-freeze-head-vs-pin.toml"):
            contract.unlink()
    digest = hashlib.sha256(OFFICIAL.read_bytes()).hexdigest()
    for side in ("torch", "paddle"):
        write(ws.root, f"results/{side}/env.json", env_json(side, revision=revision, sha256=digest))
    commit_all(ws.repo, "contract")
    assert ws.gates(capsys, "freeze", "pin", "HEAD").code == 0
    commit_all(ws.repo, "pin")


def audit(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    result = ws.gates(capsys, "audit", "--format", "json")
    report = json.loads(result.out)
    return result.code, next(c for c in report["contracts"] if c["id"] == CONTRACT_ID)


def test_the_contract_discharges_on_the_fixed_class_and_blocks_on_a_bug(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    contract_workspace(cand, capsys, revision=REVISION)
    code, contract = audit(cand, capsys)
    assert (code, contract["dischargeStatus"]) == (0, "discharged"), contract["criteria"]
    names = [c["name"] for c in contract["criteria"]]
    assert names == [
        "official_pinned",
        "table_covers_official",
        "candidate_loads",
        "meaning_held",
        "consumed",
        "round_trips",
        "env_agreement",
    ]
    set_files(cand.root, cand.repo, {"src/glmcfg/configuration.py": TYPE_STRIPPED})
    assert cand.gates(capsys, "freeze", "pin", "HEAD").code == 0
    commit_all(cand.repo, "pin")
    code, contract = audit(cand, capsys)
    assert (code, contract["dischargeStatus"]) == (1, "discharging")
    failing = {c["name"]: c["detail"] for c in contract["criteria"] if not c["met"]}
    assert failing == {
        "round_trips": "rope_parameters.rope_type dropped from the saved config.json"
    }


def test_env_json_must_record_the_pinned_revision_and_config_sha(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    contract_workspace(cand, capsys, revision="0" * 40)
    write(cand.root, "results/torch/env.json", "{oops")
    _, contract = audit(cand, capsys)
    failing = {c["name"]: c["detail"] for c in contract["criteria"] if not c["met"]}
    assert failing["env_agreement"].startswith("results/torch/env.json: not valid JSON")
    assert (
        f"results/paddle/env.json: revision {'0' * 40} is not the pinned {REVISION}"
        in (failing["env_agreement"])
    )


def test_the_default_contract_without_an_official_config_is_unmet_quickly(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    _, contract = audit(ws, capsys)
    assert contract["dischargeStatus"] == "undischarged"
    first = contract["criteria"][0]
    assert first["detail"] == (
        "model/glm52/config.json: official config not found "
        "(hint: check in the official config.json)"
    )


def test_a_malformed_class_path_is_one_error_line(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    result = cand.gates(
        capsys, "check", "config", OFFICIAL_REL, "--class", "glmcfg.GlmMoeDsaConfig"
    )
    assert result.code == 2
    assert result.err.startswith(
        "gates: error: --class 'glmcfg.GlmMoeDsaConfig': expected MODULE:CLASS"
    )


def test_a_class_from_outside_the_scanned_tree_and_without_save_methods(
    cand: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    # types.SimpleNamespace takes the official keys as keyword arguments and has no
    # from_pretrained, to_dict or save_pretrained: it loads through its constructor
    result = cand.gates(
        capsys,
        "check",
        "config",
        OFFICIAL_REL,
        "--class",
        "types:SimpleNamespace",
        "--path",
        "src",
        "--format",
        "json",
    )
    assert result.code == 1, result.err
    report = json.loads(result.out)
    assert report["candidate"]["loaded_via"] == "constructor"
    failing = unmet(report)
    assert failing["consumed"].startswith(
        f"scanned {cand.root / 'src'}, but the class was imported from "
    )
    assert failing["consumed"].endswith("types.py")
    assert failing["round_trips"].startswith(
        "to_dict -> from_dict: no to_dict/from_dict; "
        "to_json_string -> from_json_file: no to_json_string/from_json_file; "
        "save_pretrained -> from_pretrained: no save_pretrained/from_pretrained"
    )
    assert row(report, "hidden_size")["value"] == 6144
