"""`audit_source_freeze.py` / `audit-source-freeze`: the freeze check alone.

Usage: audit-source-freeze [-C WORKSPACE] [--json] [--ref REF]. Exit 0 pass, 1 blocked, 2 error.
"""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from pathlib import Path

from gates.commands.freeze import show_settings
from gates.core import exitcodes
from gates.core.errors import GatesError
from gates.freeze.settings import load_freeze_settings
from gates.workspace.root import CONFIG_NAME, find_root

#: What pre-commit sets at pre-push: the local commit being pushed, or (a first push, whose
#: history the remote lacks from its root) the local branch being pushed (docs/hooks.md).
PUSHED_REF_VARIABLES = ("PRE_COMMIT_TO_REF", "PRE_COMMIT_LOCAL_BRANCH")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="audit_source_freeze.py",
        description="Run the source-freeze check alone: verdict=pass or verdict=blocked.",
    )
    parser.add_argument("-C", dest="workspace", default=".", help="workspace folder")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--policy-ref",
        metavar="REF",
        help="protected ref whose [freeze] settings judge (default: GATES_POLICY_REF, gates.toml)",
    )
    parser.add_argument(
        "--ref",
        metavar="REF",
        help="judge the commit REF names, not the worktree (default at pre-push under "
        "pre-commit: the commit being pushed, PRE_COMMIT_TO_REF or PRE_COMMIT_LOCAL_BRANCH)",
    )
    args = parser.parse_args(argv)
    try:
        root = find_root(Path(args.workspace))
        pushed = (os.environ.get(name) for name in PUSHED_REF_VARIABLES)
        ref = args.ref or next((value for value in pushed if value), None)
        if ref:
            return _show_ref(root, ref, as_json=args.json)
        if _names_a_policy_ref(root, args.policy_ref):
            return _show_protected(root, args.policy_ref, as_json=args.json)
        return show_settings(root, load_freeze_settings(root), as_json=args.json, echo=print)
    except GatesError as error:
        print(f"audit_source_freeze: error: {error.one_line()}", file=sys.stderr)
        return exitcodes.ERROR


def _names_a_policy_ref(root: Path, option: str | None) -> bool:
    if option or os.environ.get("GATES_POLICY_REF"):
        return True
    text = (root / CONFIG_NAME).read_text(encoding="utf-8", errors="replace")
    if "[policy]" not in text:
        return False
    try:
        policy = tomllib.loads(text).get("policy", {})
    except tomllib.TOMLDecodeError:
        return True  # the full path names the problem
    return isinstance(policy, dict) and bool(policy.get("ref"))


def _show_protected(root: Path, option: str | None, *, as_json: bool) -> int:
    """Judge by the protected ref's [freeze] settings (with the worktree's pin)."""
    from gates.commands.freeze import show  # noqa: PLC0415  (pydantic: only under a policy ref)
    from gates.core.echo import Output  # noqa: PLC0415
    from gates.policy.in_force import governed, load_policy  # noqa: PLC0415
    from gates.workspace.repository import open_workspace  # noqa: PLC0415

    workspace = open_workspace(root)
    policy = load_policy(root, workspace.config, ref_option=option, with_anchors=False)
    return show(governed(workspace, policy), out=Output("json" if as_json else "text", print))


def _show_ref(root: Path, ref: str, *, as_json: bool) -> int:
    from gates.commands.freeze import render_freeze  # noqa: PLC0415
    from gates.freeze.ref import evaluate_freeze_at  # noqa: PLC0415

    report = evaluate_freeze_at(root, ref, load_freeze_settings(root))
    print(render_freeze(report, as_json=as_json))
    return exitcodes.OK if report.verdict == "pass" else exitcodes.BLOCKED


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
