"""Runs in the sandbox (``python -P probe_worker.py REQUEST``): imports the probe's entry
point (PR code) and runs the consumption probe; writes one JSON result file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gates.core.errors import GatesError
from gates.tensors.probe import load_entry, probe


def main(request_path: str) -> None:
    request = json.loads(Path(request_path).read_text(encoding="utf-8"))
    result: dict[str, object]
    try:
        entry = load_entry(
            Path(request["path"]), request["function"], request["shown"], Path(request["root"])
        )
        chosen = tuple(request["names"]) or tuple(sorted(entry.tensors))
        repeatable, findings = probe(entry.forward, entry.tensors, chosen)
        result = {
            "repeatable": repeatable,
            "findings": [[f.name, f.consumed, f.dtype, list(f.shape)] for f in findings],
            "configuration": entry.configuration,
        }
    except GatesError as exc:
        result = {"error": exc.one_line()}
    except Exception as exc:  # noqa: BLE001  (the entry's own failure, reported as one line)
        result = {"error": f"the entry point failed: {type(exc).__name__}: {exc}"[:400]}
    Path(request["result"]).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
