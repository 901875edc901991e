"""The freeze script's lean start: gates.toml validated once, then read from a small cache
(no pydantic on the warm path), and any change of gates.toml validated again."""

from __future__ import annotations

import json
import os

import pytest

from gates.core.hashing import cache_file
from gates.freeze.settings import SETTINGS_KIND
from tests.helpers import REPO_ROOT, Workspace, run_script

PROBE = (
    "import json, sys; sys.path.insert(0, {repo!r}); import audit_source_freeze; "
    "code = audit_source_freeze.main(['-C', {root!r}, '--json']); "
    "print(json.dumps({{'code': code, 'pydantic': 'pydantic' in sys.modules}}))"
)


def age_config(ws: Workspace) -> None:
    path = ws.root / "gates.toml"
    past = path.stat().st_mtime_ns - 3600 * 10**9
    os.utime(path, ns=(past, past))


def run_freeze(ws: Workspace) -> tuple[dict[str, object], dict[str, object]]:
    """(the freeze report, what the probe says about the run) from a fresh interpreter."""
    result = run_script("-c", PROBE.format(repo=str(REPO_ROOT), root=str(ws.root)), cwd=ws.root)
    lines = result.out.strip().splitlines()
    report = json.loads("\n".join(lines[:-1]))
    return report, json.loads(lines[-1])


@pytest.mark.slow
def test_the_warm_freeze_check_does_not_load_pydantic(ws: Workspace) -> None:
    age_config(ws)
    report, first = run_freeze(ws)
    assert (report["verdict"], first["pydantic"]) == ("pass", True)
    report, warm = run_freeze(ws)
    assert (report["verdict"], warm["code"], warm["pydantic"]) == ("pass", 0, False)


@pytest.mark.slow
def test_an_edited_gates_toml_is_validated_again(ws: Workspace) -> None:
    age_config(ws)
    run_freeze(ws)
    path = ws.root / "gates.toml"
    path.write_text(path.read_text().replace(ws.pin, "0123456789" * 4))
    report, probe = run_freeze(ws)
    assert probe["pydantic"] is True
    assert [r["code"] for r in report["reasons"]] == ["pin_missing"]  # type: ignore[union-attr]
    path.write_text(path.read_text().replace("[freeze]", "[freeze]\nbogus = 1"))
    result = run_script(str(REPO_ROOT / "audit_source_freeze.py"), "-C", str(ws.root))
    assert result.code == 2
    assert "unknown key 'freeze.bogus'" in result.err


@pytest.mark.slow
def test_a_corrupt_settings_cache_is_ignored(ws: Workspace) -> None:
    age_config(ws)
    run_freeze(ws)
    cache = cache_file(ws.root, SETTINGS_KIND)
    assert cache is not None and cache.exists()
    cache.write_text('{"key": "nonsense", "settings": {"pin": "HEAD~9"}}')
    report, probe = run_freeze(ws)
    assert (report["verdict"], report["pin"], probe["pydantic"]) == ("pass", ws.pin, True)
