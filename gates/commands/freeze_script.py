"""`audit_source_freeze.py` / `audit-source-freeze`: the freeze check alone.

Usage: audit-source-freeze [-C WORKSPACE] [--json] [--ref REF]. Exit 0 pass, 1 blocked, 2 error.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gates.core import exitcodes
from gates.core.errors import GatesError
from gates.core.invocation import read_invocation

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
        pushed = (os.environ.get(name) for name in PUSHED_REF_VARIABLES)
        ref = args.ref or next((value for value in pushed if value), None)
        return _show(Path(args.workspace), args.policy_ref, ref, as_json=args.json)
    except GatesError as error:
        print(f"audit_source_freeze: error: {error.one_line()}", file=sys.stderr)
        return exitcodes.ERROR


def _show(folder: Path, policy_ref: str | None, ref: str | None, *, as_json: bool) -> int:
    """Judge the commit ``ref`` names (its own pin), else the worktree under the [freeze]
    settings in force (a protected ref's, with the worktree's pin; without a ref, the
    worktree's own)."""
    from gates.commands.freeze import render_freeze, show  # noqa: PLC0415
    from gates.core.echo import Output  # noqa: PLC0415
    from gates.core.hashing import Caches  # noqa: PLC0415
    from gates.freeze.check import FreezeInputs  # noqa: PLC0415
    from gates.freeze.ref import evaluate_freeze_at  # noqa: PLC0415
    from gates.workspace.repository import open_workspace  # noqa: PLC0415

    invocation = read_invocation(os.environ, policy_ref=policy_ref)
    workspace = open_workspace(folder, invocation.environment)
    root = workspace.root
    if ref:
        report = evaluate_freeze_at(root, ref, workspace.config)
        print(render_freeze(report, as_json=as_json))
        return exitcodes.OK if report.verdict == "pass" else exitcodes.BLOCKED
    if invocation.policy_ref is not None or workspace.config.policy.ref:
        # the policy's modules load only under a ref: the hook's usual start skips them
        from gates.policy.in_force import governed, load_policy  # noqa: PLC0415

        given = invocation.policy_ref
        policy = load_policy(root, workspace.config, ref=given, with_anchors=False)
        workspace = governed(workspace, policy)
    freeze = FreezeInputs(Caches.open(invocation.caching, root).blobs, invocation.pre_commit_store)
    return show(workspace, freeze, out=Output("json" if as_json else "text", print))


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
