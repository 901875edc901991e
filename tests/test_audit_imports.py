"""What a warm `gates audit` imports: numpy loads only when a tensor comparison runs.

Real subprocesses (the test process may hold numpy already); the report is the same
in-process, cold and warm.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import REPO_ROOT, Workspace, run_script

AUDIT = """
import sys
sys.path.insert(0, {repo!r})
from gates.cli.app import main
try:
    main(["-C", {root!r}, "audit", "--format", "json"])
except SystemExit:
    pass
print("NUMPY-LOADED" if "numpy" in sys.modules else "NUMPY-ABSENT", file=sys.stderr)
"""


@pytest.mark.slow
def test_a_warm_audit_does_not_import_numpy(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    in_process = ws.gates(capsys, "audit", "--format", "json")
    code = AUDIT.format(repo=str(REPO_ROOT), root=str(ws.root))
    cold = run_script("-c", code)
    warm = run_script("-c", code)
    assert "NUMPY-ABSENT" in warm.err, warm.err
    assert json.loads(warm.out) == json.loads(cold.out) == json.loads(in_process.out)
