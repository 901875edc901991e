"""Benchmark `gates check config` on the real PaddleFormers class, as a ratio to its bare import.

Builds a workspace holding the official GLM-5.2 config.json and times, on the
same machine and in the same script:
  * the reference: `python -c "import paddleformers.transformers.glm_moe_dsa.configuration"`;
  * the whole check: `gates check config ... --class ...GlmMoeDsaConfig` (subprocess
    import and load, three round trips, the saved file, and the static read analysis
    of the installed paddleformers package, run while the class imports);
  * the static read analysis alone (in process), the part gates adds on top of the import.
Medians of --repeats runs; only the ratios mean something on a shared machine.

Usage: python bench/bench_config.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from common import OUT, median_seconds, report

from gates.configsem.check import installed_root
from gates.configsem.reads import SourceIndex
from gates.configsem.table import parse_table

REPO = Path(__file__).resolve().parent.parent
MODULE = "paddleformers.transformers.glm_moe_dsa.configuration"
CLASS = f"{MODULE}:GlmMoeDsaConfig"
OFFICIAL = REPO / "examples" / "glm52-minimal" / "model" / "glm52" / "config.json"
GATES = [sys.executable, "-m", "gates"]
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@gates.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@gates.invalid",
}


def _run(args: list[str], cwd: Path, *, ok: tuple[int, ...] = (0,)) -> None:
    done = subprocess.run(args, cwd=cwd, env=GIT_ENV, capture_output=True, check=False)
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(args)}: exit {done.returncode}: {done.stderr.decode()}")


def workspace(root: Path) -> None:
    (root / "model" / "glm52").mkdir(parents=True)
    shutil.copyfile(OFFICIAL, root / "model" / "glm52" / "config.json")
    _run(["git", "init", "-q"], root)
    _run(["git", "add", "-A"], root)
    _run(["git", "commit", "-qm", "official config"], root)
    _run([*GATES, "init", "--pin", "HEAD"], root)


def static_reads() -> None:
    params = tomllib.loads((REPO / "contracts" / "config-semantics.toml").read_text())["params"]
    table = parse_table(params, source="config-semantics.toml")
    found = installed_root(MODULE)
    assert found is not None, "paddleformers is not installed"
    base, relpath = found
    names = {part for attribute in table.attributes() for part in attribute.split(".")}
    index = SourceIndex.load(base / "paddleformers")
    index.find(names, exclude=relpath.removeprefix("paddleformers/"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gates-bench-config-") as tmp:
        root = Path(tmp)
        workspace(root)
        bare = [sys.executable, "-c", f"import {MODULE}"]
        check = [*GATES, "check", "config", "model/glm52/config.json", "--class", CLASS]
        _run(bare, root)  # warm the file cache for both
        import_s = median_seconds(lambda: _run(bare, root), args.repeats)
        check_s = median_seconds(lambda: _run(check, root, ok=(0, 1)), args.repeats)
        reads_s = median_seconds(static_reads, args.repeats)
    report(
        {
            "import_seconds": round(import_s, 3),
            "check_seconds": round(check_s, 3),
            "static_reads_seconds": round(reads_s, 3),
            "check_over_import": round(check_s / import_s, 2),
            "static_reads_over_import": round(reads_s / import_s, 2),
            "target_check_over_import": 1.5,
        },
        OUT / "config.json",
    )


if __name__ == "__main__":
    main()
