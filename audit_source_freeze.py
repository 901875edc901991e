#!/usr/bin/env python3
"""Run the source-freeze check alone: `verdict=pass` or `verdict=blocked` and its reasons.

Usage: audit_source_freeze.py [-C WORKSPACE] [--json]. Exit 0 pass, 1 blocked, 2 error.
The same check is installed as the `audit-source-freeze` command.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))  # noqa: PTH120

from gates.commands.freeze_script import main

if __name__ == "__main__":
    sys.exit(main())
