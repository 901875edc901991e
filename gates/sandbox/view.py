"""What the sandbox sees: an allowlist of folders and environment variables.

Nothing of the host is visible unless named here: the system folders, the Python
environment and gates' own package (read-only), the policy's declared inputs
(read-only), the materialized commit (read-only, at the workspace's path so that
paths and the cwd mirror the workspace), and one empty output folder (read-write,
at the run folder's path). HOME and /tmp are fresh and empty.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import gates
from gates.core.errors import GatesError
from gates.core.run_protocol import (
    FRAMEWORK,
    GIT_HEAD,
    MODEL_CONFIG,
    RANK_VARIABLES,
    RUN_DIR,
    RUN_ID,
    SAVE_EVERY,
)

# the model config's path is seen in the sandbox only where it is committed (the
# materialized tree sits at the workspace's path) or a declared `[sandbox] inputs` entry
PROTOCOL_VARIABLES = (RUN_DIR, RUN_ID, GIT_HEAD, FRAMEWORK, MODEL_CONFIG, SAVE_EVERY)
SANDBOX_HOME = "/home/sandbox"
SHM_BYTES = 8 * 1024**3  # the launcher's and NCCL's shared memory; tmpfs pages cost only when used
SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys")
ETC_ENTRIES = (
    "passwd", "group", "hosts", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
    "localtime", "ssl", "ca-certificates", "os-release", "alternatives", "protocols",
    "services", "hostname", "gai.conf", "host.conf",
)  # fmt: skip
PASSED_NAMES = frozenset(
    {
        "LANG", "LANGUAGE", "TZ", "TERM", "RANK", "WORLD_SIZE", "LOCAL_RANK",
        "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", *RANK_VARIABLES,
    }
)  # fmt: skip
PASSED_PREFIXES = ("LC_", "CUDA_", "NCCL_", "FLAGS_", "PADDLE_", "OMP_", "NVIDIA_")


@dataclass(frozen=True)
class Bind:
    source: Path  # on the host
    target: Path  # inside the sandbox
    writable: bool = False


@dataclass(frozen=True)
class View:
    """The folders, device nodes, symlinks and environment of one sandbox."""

    binds: tuple[Bind, ...]
    symlinks: tuple[tuple[str, str], ...]  # (link text, path inside)
    devices: tuple[str, ...]
    env: dict[str, str]
    cwd: Path
    network: bool
    tmpfs: tuple[str, ...] = ("/tmp", SANDBOX_HOME)  # noqa: S108  (a fresh tmpfs of its own)
    shm_bytes: int = SHM_BYTES
    notes: list[str] = field(default_factory=list)


def passed_environment(
    host: Mapping[str, str], policy_names: Iterable[str], protocol: Mapping[str, str]
) -> dict[str, str]:
    """The child's whole environment. No GATES_* variable of the host ever enters (the
    key, trust file, policy ref, cache folder...), even one the policy names; only the run
    protocol's own, set by gates."""
    extra = {name for name in policy_names if not name.startswith("GATES_")}
    env = {
        name: value
        for name, value in host.items()
        if not name.startswith("GATES_")
        and (name in PASSED_NAMES or name in extra or name.startswith(PASSED_PREFIXES))
    }
    interpreter = str(Path(os.path.normpath(sys.executable)).parent)  # no ".." left in it
    env |= {
        "PATH": f"{interpreter}:/usr/local/bin:/usr/bin:/bin",
        "HOME": SANDBOX_HOME,
        "TMPDIR": "/tmp",  # noqa: S108  (the sandbox's own tmpfs)
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
    }
    env |= {name: value for name, value in protocol.items() if name in PROTOCOL_VARIABLES}
    return dict(sorted(env.items()))


def _python_folders() -> list[Path]:
    folders: list[Path] = []
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        for path in (Path(prefix), Path(prefix).resolve()):
            if path not in folders:
                folders.append(path)
    return folders


def gates_package() -> Path:
    """gates' own package folder (an editable install: the package, never its repository)."""
    return Path(gates.__file__).resolve().parent


def _system(network: bool) -> tuple[list[Bind], list[tuple[str, str]], list[str]]:
    binds: list[Bind] = []
    links: list[tuple[str, str]] = []
    entries = [*SYSTEM_FOLDERS, *(f"/etc/{name}" for name in ETC_ENTRIES)]
    if network:
        entries.append("/etc/resolv.conf")
    for entry in entries:
        path = Path(entry)
        if path.is_symlink():
            links.append((str(path.readlink()), entry))
        elif path.exists():
            binds.append(Bind(path, path))
    devices = sorted(str(p) for p in Path("/dev").glob("nvidia*"))
    return binds, links, devices


def never_visible(
    root: Path, git_dir: Path | None, configured: Mapping[str, Path]
) -> dict[str, Path]:
    """What no sandbox may see, by what it is: HOME, the repository's git folders, and what
    gates is configured with (``configured``: the signing key, the trust file, gates'
    cache folder)."""
    hidden: dict[str, Path] = {"HOME": Path.home(), "the worktree's .git": root / ".git"}
    if git_dir is not None:
        hidden["the repository's git folder"] = git_dir
    hidden |= configured
    return {what: path.resolve() for what, path in hidden.items()}


def check_hidden(binds: Iterable[Bind], hidden: Mapping[str, Path]) -> None:
    """Refuse a view that would bind a folder holding something that must stay hidden."""
    for bind in binds:
        source = bind.source.resolve()
        for what, path in hidden.items():
            if path == source or source in path.parents:
                raise GatesError(
                    f"the sandbox would see {what} ({path}): it lies inside {source}, "
                    "which the sandbox binds",
                    hint="keep keys, trust files and caches outside the Python environment "
                    "and the declared inputs",
                )


def _mount_point(source: Path, relative: Path, is_dir: bool) -> None:
    """Make ``source/relative`` a real folder (or file) to mount on. A committed symlink on
    the way is removed from gates' copy, never followed: the mount takes its place."""
    current = source
    for index, part in enumerate(relative.parts):
        current = current / part
        last = index == len(relative.parts) - 1
        if current.is_symlink() or (current.exists() and not current.is_dir() and not last):
            current.unlink()
        if not current.exists():
            if last and not is_dir:
                current.touch()
            else:
                current.mkdir()


def build_view(
    *,
    source: Path,
    mount_at: Path,
    output: Path,
    output_at: Path,
    inputs: Mapping[Path, Path],
    env: dict[str, str],
    cwd: Path,
    network: bool,
    hidden: Mapping[str, Path],
    writable: Mapping[Path, Path] | None = None,
) -> View:
    """The sandbox's view. ``source`` (the materialized commit, a folder gates owns) is
    shown read-only at ``mount_at``; mount points below it are created in it first.
    ``writable`` maps gates' own private copies to the paths they are shown at."""
    binds, links, devices = _system(network)
    binds += [Bind(path, path) for path in _python_folders() if path.is_dir()]
    binds.append(Bind(gates_package(), gates_package()))
    check_hidden(binds + [Bind(host, host) for host in inputs], hidden)
    placed = [Bind(source, mount_at)]
    placed += [Bind(host, inside) for host, inside in inputs.items()]
    placed += [Bind(copy, inside, writable=True) for copy, inside in (writable or {}).items()]
    placed.append(Bind(output, output_at, writable=True))
    for bind in binds + placed[1:]:  # a Python environment in the workspace (.venv) too
        if mount_at in bind.target.parents:
            _mount_point(source, bind.target.relative_to(mount_at), bind.source.is_dir())
    ordered = sorted(binds + placed, key=lambda bind: len(bind.target.parts))
    return View(tuple(ordered), tuple(links), tuple(devices), env, cwd, network)
