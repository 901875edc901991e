"""gates.toml, `gates init` and `gates freeze pin`: errors name the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT, Workspace, make_repo, run_gates, run_script, write


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[freeze]\npin = "abc"\nstrickt = true\n', "unknown key 'freeze.strickt'"),
        ('[freeze]\nstrict = "yes"\n', "key 'freeze.strict': Input should be a valid boolean"),
        ('[evidence]\nlocations = "results"\n', "key 'evidence.locations'"),
        ("[freeze\npin = 1\n", "not valid TOML"),
        ("[surprise]\n", "unknown key 'surprise'"),
        ('[evidence]\nlocations = ["../elsewhere"]\n', "evidence.locations '../elsewhere'"),
        ('[freeze]\npin = "main\\nHEAD"\n', "key 'freeze.pin'"),
    ],
)
def test_bad_config_is_one_line_naming_file_and_key(
    ws: Workspace, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    (ws.root / "gates.toml").write_text(text)
    result = ws.gates(capsys, "audit")
    assert result.code == 2
    lines = result.err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"gates: error: {ws.root / 'gates.toml'}: ")
    assert expected in lines[0]
    assert result.out == ""


@pytest.mark.slow
def test_no_traceback_without_debug_but_with_it(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    (ws.root / "gates.toml").write_text("[freeze]\nstrickt = 1\n")
    plain = run_script("-m", "gates", "-C", str(ws.root), "audit")
    assert plain.code == 2
    assert "Traceback" not in plain.err
    debug = run_script("-m", "gates", "--debug", "-C", str(ws.root), "audit")
    assert debug.code == 2
    assert "Traceback" in debug.err


@pytest.mark.slow
def test_a_childs_debug_flag_is_not_gates_debug(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--debug` after `--` belongs to the training script; gates stays without tracebacks."""
    (ws.root / "gates.toml").write_text("[freeze]\nstrickt = 1\n")
    child = ["run", "--framework", "paddle", "--", "python", "train.py", "--debug"]
    result = run_script("-m", "gates", "-C", str(ws.root), *child)
    assert result.code == 2
    assert "gates.toml" in result.err
    assert "Traceback" not in result.err


def test_missing_config_says_how_to_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_repo(tmp_path / "repo")
    result = run_gates(capsys, "-C", str(tmp_path / "repo"), "audit")
    assert result.code == 2
    assert "no gates.toml" in result.err
    assert "gates init" in result.err


def test_workspace_is_found_from_a_subfolder(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_gates(capsys, "-C", str(ws.root / "paddleformers" / "glm"), "freeze", "show")
    assert result.code == 0
    assert result.out.strip() == "verdict=pass"


def test_init_writes_config_and_the_contract_set(ws: Workspace) -> None:
    names = sorted(p.name for p in (ws.root / "contracts").glob("*.toml"))
    assert names == sorted(p.name for p in (REPO_ROOT / "contracts").glob("*.toml"))
    text = (ws.root / "gates.toml").read_text()
    assert f'pin = "{ws.pin}"' in text
    assert 'locations = ["results", "experiments", "outputs", ".gates"]' in text


def test_init_refuses_to_overwrite(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    (ws.root / "gates.toml").write_text("# mine\n")
    result = ws.gates(capsys, "init")
    assert result.code == 2
    assert "already exists" in result.err
    assert (ws.root / "gates.toml").read_text() == "# mine\n"


def test_init_outside_a_repository_root_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_gates(capsys, "-C", str(tmp_path), "init")
    assert result.code == 2
    assert "not the root of a git repository" in result.err


def test_freeze_pin_rewrites_only_the_pin(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    original = (
        "# governance for GLM-5.2\r\n"
        "[freeze]  # the freeze\r\n"
        f"pin   =   '{ws.pin}'   # set by release\r\n"
        "strict = false\r\n"
        "\r\n"
        "[evidence]\r\n"
        'locations = ["results"]\r\n'
    )
    (ws.root / "gates.toml").write_bytes(original.encode())
    write(ws.root, "paddleformers/glm/config.py", "HIDDEN = 17\n")
    ws.repo.git.add(A=True)
    ws.repo.git.commit("-q", "-m", "new")
    new = ws.repo.head.commit.hexsha
    result = ws.gates(capsys, "freeze", "pin", "HEAD")
    assert (result.code, result.out.strip()) == (0, f"pin={new}")
    expected = original.replace(f"'{ws.pin}'", f'"{new}"')
    assert (ws.root / "gates.toml").read_bytes() == expected.encode()


def test_freeze_pin_adds_a_missing_pin_line(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    (ws.root / "gates.toml").write_text('[contracts]\ndir = "contracts"\n')
    assert ws.gates(capsys, "freeze", "pin", ws.pin).code == 0
    assert (ws.root / "gates.toml").read_text() == (
        f'[contracts]\ndir = "contracts"\n\n[freeze]\npin = "{ws.pin}"\n'
    )


def test_freeze_pin_of_an_unknown_revision_changes_nothing(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (ws.root / "gates.toml").read_bytes()
    result = ws.gates(capsys, "freeze", "pin", "no-such-branch")
    assert result.code == 2
    assert "does not name a commit" in result.err
    assert (ws.root / "gates.toml").read_bytes() == before
