"""The console scripts' entry points: the warm answer (gates/fastpath.py) first, then the
full command line. Kept apart from gates.fastpath, which gates.cli calls to store a report."""

from __future__ import annotations

import sys

from gates import fastpath

# `typing` imports `re`: the warm path needs neither at run time
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def main() -> Any:
    """The `gates` command: the stored report when it holds, else the full command line."""
    code = fastpath.warm_answer(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from gates.cli import main as full_main  # noqa: PLC0415  (only when the warm path misses)

    return full_main()


def freeze_main() -> int:
    """`audit_source_freeze.py` / `audit-source-freeze`: the stored answer when it holds."""
    argv = sys.argv[1:]
    code = fastpath.warm_answer(argv, freeze_script=True)
    if code is not None:
        return code
    from gates.commands.freeze_script import main as full_main  # noqa: PLC0415  (a miss)

    return fastpath.storing_stdout(lambda: full_main(argv))


def freeze_run() -> None:
    """The `audit-source-freeze` console script."""
    sys.exit(freeze_main())
