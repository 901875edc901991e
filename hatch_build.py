"""The build hook that compiles gates' modules in C: gates/_walk.c, the warm `gates
audit`'s walk, and gates/outputs/_fit.c, the quick check of a survey's differences.

An editable install gets each module beside its source (gates/ is imported from the
checkout); a wheel gets them inside, tagged for this interpreter and platform, compiled in
a folder of their own (the checkout is left as it was). Without a C compiler or Python's
headers the build says so and goes on: gates then does the same work in Python, with the
same answers, more slowly (docs/performance.md, "Round 8: the walk in C" and "Round 9: the
survey's tally and the check in C").
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: each module's source, and what gates does without it
SOURCES = {
    "gates/_walk.c": "the warm audit walks the tree in Python",
    "gates/outputs/_fit.c": "the inventory diff checks its output in Python",
}


def compile_module(root: Path, source: str, into: Path) -> Path:
    """Compile ``source`` (a path under ``root``) into the folder ``into`` with the
    interpreter's own compiler and flags; an OSError or a SubprocessError when it cannot."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    stem = Path(source).stem
    target = into / f"{stem}{suffix}"
    linker = shlex.split(sysconfig.get_config_var("LDSHARED") or "cc -shared")
    flags = shlex.split(sysconfig.get_config_var("CCSHARED") or "-fPIC")
    include = sysconfig.get_paths()["include"]
    partial = target.with_name(f"{stem}.partial{suffix}")
    # a module left by an earlier build would be imported beside a source it was not built
    # from, had this build failed
    target.unlink(missing_ok=True)
    source = str(root / source)
    command = [*linker, *flags, "-O2", "-Wall", "-I", include, source, "-o", str(partial)]
    subprocess.run(
        command, check=True, capture_output=True, text=True, errors="replace", timeout=300
    )
    partial.replace(target)  # an import never sees a half-written module
    return target


def first_error(output: str) -> str:
    """The compiler's line that says what went wrong (its first error), else its last."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    if errors:
        return errors[0]
    return lines[-1] if lines else "no output"


class NativeBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"
    #: where a wheel's modules are compiled, removed once the wheel is written
    scratch: Path | None = None

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or os.name != "posix":
            return
        root = Path(self.root)
        # hatchling keeps one hook for all the versions of a run (`-t wheel:standard,editable`)
        scratch = None if version == "editable" else Path(tempfile.mkdtemp(prefix="gates-native-"))
        self.scratch = scratch
        for source, without in SOURCES.items():
            package = Path(source).parent
            into = (root if scratch is None else scratch) / package
            into.mkdir(parents=True, exist_ok=True)
            try:
                built = compile_module(root, source, into)
            except (OSError, subprocess.SubprocessError) as exc:
                detail = first_error(getattr(exc, "stderr", None) or str(exc))
                self.app.display_warning(
                    f"gates: {source} not compiled ({detail}); {without} (install a C "
                    "compiler and Python's headers, then reinstall, for the faster one)"
                )
                continue
            if scratch is None:
                continue
            build_data["force_include"][str(built)] = f"{package.as_posix()}/{built.name}"
            build_data["pure_python"] = False
            build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None
