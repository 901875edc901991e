"""The config step of `gates demo`: the official GLM-5.2 config.json through the example's class.

First the class as the PR's review found it (P1: the official
`indexer_rope_interleave` parked in an extra field, `rotary_interleaved` left
at its default), then the fixed class of the example, which discharges every
criterion. Each run is `gates check config`, with its output and receipt.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from gates.commands.config_check import check_config
from gates.core.atomic import write_text_atomic
from gates.core.echo import Echo, Output
from gates.core.errors import GatesError
from gates.core.invocation import Invocation
from gates.engine.inputs import load_inputs
from gates.workspace.repository import open_workspace

OFFICIAL = "model/glm52/config.json"
CLASS = "glm52.configuration:GlmMoeDsaConfig"
SOURCE = "model"
CLASS_FILE = "model/glm52/configuration.py"
OUTPUT = "outputs/config_check.receipt.json"

# The fixed lines of the example's class, and the PR's lines as the review found them.
FIXED_LINES = (
    "        self.indexer_rope_interleave = indexer_rope_interleave\n"
    "        self.rotary_interleaved = indexer_rope_interleave\n"
)
REVIEWED_LINES = (
    '        self.extra_config = {"indexer_rope_interleave": indexer_rope_interleave}\n'
    "        self.rotary_interleaved = False\n"
)
_QUIET = ("ok", "ignored: ", "absent from the official config")


def _run(root: Path, invocation: Invocation, echo: Echo, title: str) -> int:
    echo(f"  {title}")
    printed: list[str] = []
    code = check_config(
        load_inputs(open_workspace(root, invocation.environment), invocation),
        OFFICIAL,
        class_path=CLASS,
        table=None,
        path=SOURCE,
        env=(),
        output=OUTPUT,
        cwd=root,
        out=Output("json", printed.append),
    )
    report: dict[str, Any] = json.loads("\n".join(printed))
    for row in report["keys"]:
        if not row["status"].startswith(_QUIET):
            echo(f"    {row['key']} -> {row['attribute']}: {row['status']}")
    for criterion in report["criteria"]:
        mark = "met  " if criterion["met"] else "UNMET"
        echo(f"    {mark} {criterion['name']}: {criterion['detail']}")
    echo(f"    gates check config: exit {code}, wrote {report['output']}")
    return code


def config_step(root: Path, invocation: Invocation, *, echo: Echo) -> tuple[int, int]:
    """Check the reviewed class, then the fixed one; return both exit codes (1, then 0)."""
    echo("\n== (d) config semantics: the official GLM-5.2 config.json through the config class")
    path = root / CLASS_FILE
    fixed = path.read_text(encoding="utf-8")
    if FIXED_LINES not in fixed:
        raise GatesError("the example's config class changed; update demo_config", file=CLASS_FILE)
    kept_head = _git(root, "rev-parse", "HEAD").strip()
    write_text_atomic(path, fixed.replace(FIXED_LINES, REVIEWED_LINES))
    try:  # the check runs the committed class (in the sandbox): commit the reviewed one
        _git(root, "commit", "-q", "-m", "the class as reviewed (P1)", "--", CLASS_FILE)
        reviewed = _run(
            root, invocation, echo, "as reviewed (P1): indexer_rope_interleave parked in a field"
        )
    finally:
        _git(root, "reset", "-q", "--soft", kept_head)  # HEAD back; the index entry too:
        _git(root, "reset", "-q", kept_head, "--", CLASS_FILE)
        write_text_atomic(path, fixed)
    fixed_title = "fixed: rotary_interleaved carries indexer_rope_interleave"
    return reviewed, _run(root, invocation, echo, fixed_title)


def _git(root: Path, *args: str) -> str:
    identity = ("-c", "user.name=gates demo", "-c", "user.email=demo@gates.invalid")
    done = subprocess.run(
        ["git", *identity, "-C", str(root), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise GatesError(f"git {args[0]} failed: {done.stderr.strip()}", file=CLASS_FILE)
    return done.stdout
