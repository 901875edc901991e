"""The freeze script validates gates.toml on every run: there is no cache of validated
settings, so an edit that breaks gates.toml, or moves the pin, is judged at once."""

from __future__ import annotations

import json

import pytest

from tests.helpers import REPO_ROOT, Workspace, run_script

SCRIPT = str(REPO_ROOT / "audit_source_freeze.py")


@pytest.mark.slow
def test_an_edited_gates_toml_is_validated_again(ws: Workspace) -> None:
    first = run_script(SCRIPT, "-C", str(ws.root), "--json")
    assert (first.code, json.loads(first.out)["verdict"]) == (0, "pass")
    path = ws.root / "gates.toml"
    path.write_text(path.read_text().replace(ws.pin, "0123456789" * 4))
    moved = run_script(SCRIPT, "-C", str(ws.root), "--json")
    assert [r["code"] for r in json.loads(moved.out)["reasons"]] == ["pin_missing"]
    path.write_text(path.read_text().replace("[freeze]", "[freeze]\nbogus = 1"))
    broken = run_script(SCRIPT, "-C", str(ws.root))
    assert broken.code == 2
    assert "unknown key 'freeze.bogus'" in broken.err
