"""The config step for `gates demo` on a copy of the glm52-minimal example: the class as the
review found it (P1) is named, the example's fixed class discharges."""

from __future__ import annotations

import shutil
from pathlib import Path

import git
import pytest

from gates.commands.demo.config_act import CLASS_FILE, config_step
from tests.helpers import REPO_ROOT, commit_all, invocation_now, run_gates


@pytest.mark.slow
def test_the_config_step_shows_the_p1_bug_then_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "glm52-port"
    shutil.copytree(REPO_ROOT / "examples" / "glm52-minimal", root)
    repo = git.Repo.init(root, initial_branch="main")
    commit_all(repo, "example")
    assert run_gates(capsys, "-C", str(root), "freeze", "pin", "HEAD").code == 0
    commit_all(repo, "pin")
    before = (root / CLASS_FILE).read_bytes()

    lines: list[str] = []
    assert config_step(root, invocation_now(), echo=lines.append) == (1, 0)
    text = "\n".join(lines)
    reviewed, fixed = text.split("  fixed: ")
    assert "indexer_rope_interleave -> rotary_interleaved: holds false, official true" in reviewed
    assert "indexer_rope_interleave -> indexer_rope_interleave" not in reviewed
    assert "UNMET meaning_held: 1 wrong: indexer_rope_interleave" in reviewed
    assert "UNMET round_trips: indexer_rope_interleave dropped from the saved config.json" in (
        reviewed
    )
    assert "UNMET" not in fixed
    assert "met   consumed: every mapped attribute is read" in fixed
    # the class is restored byte for byte and the source freeze holds again
    assert (root / CLASS_FILE).read_bytes() == before
    assert not repo.is_dirty(untracked_files=False)
    freeze = run_gates(capsys, "-C", str(root), "freeze", "show")
    assert (freeze.code, freeze.out.splitlines()[0]) == (0, "verdict=pass")
