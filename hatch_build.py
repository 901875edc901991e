"""The build hook that compiles gates/_walk.c, the warm `gates audit`'s walk in C.

An editable install gets the module beside the source (gates/ is imported from the
checkout); a wheel gets it inside, tagged for this interpreter and platform, compiled in a
folder of its own (the checkout is left as it was). Without a C compiler or Python's
headers the build says so and goes on: gates then walks the tree in Python, with the same
fingerprints, three times slower (docs/performance.md, "Round 8: the walk in C").
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

SOURCE = "gates/_walk.c"


def compile_walk(root: Path, into: Path) -> Path:
    """Compile ``SOURCE`` under ``root`` into the folder ``into`` with the interpreter's own
    compiler and flags; an OSError or a SubprocessError when it cannot."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = into / f"_walk{suffix}"
    linker = shlex.split(sysconfig.get_config_var("LDSHARED") or "cc -shared")
    flags = shlex.split(sysconfig.get_config_var("CCSHARED") or "-fPIC")
    include = sysconfig.get_paths()["include"]
    partial = target.with_name(f"_walk.partial{suffix}")
    # a module left by an earlier build would be imported beside a source it was not built
    # from, had this build failed
    target.unlink(missing_ok=True)
    source = str(root / SOURCE)
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


class WalkBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"
    #: where a wheel's module is compiled, removed once the wheel is written
    scratch: Path | None = None

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or os.name != "posix":
            return
        if version == "editable":
            into = Path(self.root) / "gates"
        else:
            into = self.scratch = Path(tempfile.mkdtemp(prefix="gates-walk-"))
        try:
            built = compile_walk(Path(self.root), into)
        except (OSError, subprocess.SubprocessError) as exc:
            detail = first_error(getattr(exc, "stderr", None) or str(exc))
            self.app.display_warning(
                f"gates: {SOURCE} not compiled ({detail}); the warm audit walks in Python "
                "(install a C compiler and Python's headers, then reinstall, for the faster "
                "walk)"
            )
            return
        if version == "editable":
            return
        build_data["force_include"][str(built)] = f"gates/{built.name}"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
