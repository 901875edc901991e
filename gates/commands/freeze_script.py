"""`audit_source_freeze.py` / `audit-source-freeze`: the freeze check alone.

Usage: audit-source-freeze [-C WORKSPACE] [--json]. Exit 0 pass, 1 blocked, 2 error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gates import exitcodes
from gates.commands.freeze import show_settings
from gates.errors import GatesError
from gates.freeze_settings import find_root, load_freeze_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="audit_source_freeze.py",
        description="Run the source-freeze check alone: verdict=pass or verdict=blocked.",
    )
    parser.add_argument("-C", dest="workspace", default=".", help="workspace folder")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    try:
        root = find_root(Path(args.workspace))
        return show_settings(root, load_freeze_settings(root), as_json=args.json, echo=print)
    except GatesError as error:
        print(f"audit_source_freeze: error: {error.one_line()}", file=sys.stderr)
        return exitcodes.ERROR


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
