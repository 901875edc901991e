"""One sandbox, from the commit's files to the argv that starts it, and its cleanup."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from gates.core.errors import GatesError
from gates.core.hashing import StatCache
from gates.core.invocation import Invocation
from gates.core.paths import is_under
from gates.receipts.model import RunIsolation
from gates.sandbox.backends import sandbox_argv
from gates.sandbox.materialize import materialize
from gates.sandbox.support import SandboxSupport, support
from gates.sandbox.view import build_view, never_visible, passed_environment

Isolation = RunIsolation


@dataclass(frozen=True)
class SandboxHost:
    """What a sandbox is made from on this host, from the command's invocation: the
    mechanism asked for (``mechanism``: GATES_SANDBOX), the environment gates was started
    with (``environment``: the sandbox passes only its allowlist of it), what must stay out
    of the sandbox's reach beyond HOME and `.git` (``hidden``: the signing key, the trust
    file, gates' cache folder), and the command's stat cache (the declared inputs' digests)."""

    mechanism: str = "auto"
    environment: Mapping[str, str] = field(default_factory=dict)
    hidden: Mapping[str, Path] = field(default_factory=dict)
    cache: StatCache = field(default_factory=lambda: StatCache(None))

    @classmethod
    def of(cls, invocation: Invocation, cache: StatCache) -> SandboxHost:
        hidden: dict[str, Path] = {}
        if invocation.signing_key is not None:
            hidden["the signing key"] = invocation.signing_key
        if invocation.trust is not None:
            hidden["the trust file"] = invocation.trust.value.expanduser()
        if invocation.cache_folder is not None:
            hidden["gates' cache folder"] = invocation.cache_folder
        return cls(invocation.sandbox, invocation.environment, hidden, cache)

    def support(self) -> SandboxSupport:
        """The sandbox this host can start now (`gates.sandbox.support.support`)."""
        return support(self.mechanism, self.environment.get("PATH", os.defpath))


@dataclass(frozen=True)
class Request:
    """What to run and what it may see (``output_at``: the writable folder as seen inside)."""

    root: Path
    commit: str
    excluded: tuple[str, ...]
    command: list[str]
    cwd: Path
    output_at: Path
    protocol: Mapping[str, str]
    network: bool = False
    env_names: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()
    extra_binds: Mapping[Path, Path] | None = None  # more read-only folders: host -> inside
    output: Path | None = None  # the writable folder on the host (default: a new empty one)
    fixed_env: Mapping[str, str] | None = None  # values gates sets itself (never the host's)
    host: SandboxHost = field(default_factory=SandboxHost)
    # workspace paths (of the commit, or of ``inputs``) shown as private writable copies
    writable_copies: tuple[str, ...] = ()


@dataclass(frozen=True)
class Prepared:
    argv: list[str]
    env: dict[str, str]
    output: Path  # the writable folder, on the host
    isolation: Isolation


def _digests(declared: str, host: Path, cache: StatCache) -> dict[str, str]:
    """sha256 of every file of an input; unchanged files (same stat) come from gates' own
    stat cache, so large weights are not read again on every run."""
    files = [host] if host.is_file() else sorted(p for p in host.rglob("*") if p.is_file())
    found = {}
    for path in files:
        digest = cache.digest(f"sandbox-input:{path.resolve()}", path, path.stat())
        name = declared if path == host else f"{declared.rstrip('/')}/{path.relative_to(host)}"
        found[name] = f"sha256:{digest.sha256}"
    return found


def _inputs(request: Request) -> tuple[dict[Path, Path], dict[str, str]]:
    binds: dict[Path, Path] = {}
    digests: dict[str, str] = {}
    cache = request.host.cache
    for declared in request.inputs:
        absolute = Path(declared).is_absolute()
        host = Path(declared) if absolute else request.root / declared
        if not absolute and is_under(declared.strip("/"), request.excluded):
            raise GatesError(
                f"sandbox input {declared} lies in an evidence location",
                hint="the sandbox never sees evidence; declare data and weights kept elsewhere",
            )
        if not absolute and not host.resolve().is_relative_to(request.root.resolve()):
            raise GatesError(
                f"sandbox input {declared} leaves the workspace through a symbolic link",
                hint="declare the real folder by its absolute path in [sandbox] inputs",
            )
        if not host.exists():
            raise GatesError(
                f"sandbox input {declared} does not exist ({host})",
                file=request.root / "gates.toml",
                hint="fix [sandbox] inputs in gates.toml",
            )
        binds[host.resolve()] = host if host.is_absolute() else request.root / declared
        digests |= _digests(declared, host, cache)
    cache.save()
    return binds, digests


def _writable_copies(
    request: Request, source: Path, scratch: Path, inputs: Mapping[Path, Path]
) -> tuple[dict[Path, Path], dict[str, str]]:
    """Private writable copies (host copy -> path inside) of the commit's or the declared
    inputs' folders a framework writes beside (PaddleFormers' conversion writes a metadata
    file and a lock next to the weights it reads). Each is copied before the command
    starts, its files' digests recorded then; what the command writes there is discarded
    with the scratch folder."""
    copies: dict[Path, Path] = {}
    digests: dict[str, str] = {}
    shown = {inside: host for host, inside in inputs.items()}
    cache = StatCache(None)
    for index, declared in enumerate(request.writable_copies):
        relpath = declared.strip("/")
        inside = request.root / relpath
        if Path(declared).is_absolute() or ".." in Path(relpath).parts:
            raise GatesError(
                f"writable copy {declared}: give a workspace-relative path",
                file=request.root / "gates.toml",
                hint="fix [sandbox] writable_copies in gates.toml",
            )
        if is_under(relpath, request.excluded):
            raise GatesError(
                f"writable copy {declared} lies in an evidence location",
                hint="the sandbox never sees evidence; copy the weights' folder of the commit",
            )
        original = shown.get(inside, source / relpath)
        if original.is_symlink() or not original.exists():
            raise GatesError(
                f"writable copy {declared} is neither in the commit under audit nor a "
                "declared input",
                file=request.root / "gates.toml",
                hint="commit the folder, or declare it in [sandbox] inputs too",
            )
        copy = scratch / "copies" / str(index)
        copy.parent.mkdir(parents=True, exist_ok=True)
        if original.is_dir():
            shutil.copytree(original, copy, symlinks=True)
        else:
            shutil.copy2(original, copy)
        digests |= _digests(relpath, copy, cache)
        copies[copy] = inside
    return copies, digests


def _git_dir(root: Path) -> Path | None:
    git = root / ".git"
    if git.is_file():  # a linked worktree: "gitdir: ..."; hide the whole common folder too
        text = git.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            linked = (root / text[len("gitdir:") :].strip()).resolve()
            return linked.parent.parent if linked.parent.name == "worktrees" else linked
    return None


def killed_by(code: int) -> int | None:
    """The signal that ended a sandboxed command: its launcher exits 128 + the signal (a
    command that exits with such a status itself reads the same)."""
    if code < 0:
        return -code
    if 128 < code < 128 + 65:
        return code - 128
    return None


@contextmanager
def prepared(found: SandboxSupport, request: Request) -> Iterator[Prepared]:
    """Materialize the commit, make the empty output folder, and give the argv; everything
    is removed afterwards."""
    if found.mechanism is None:
        raise GatesError(f"cannot start a sandbox: {found.reason}")
    scratch = Path(tempfile.mkdtemp(prefix="gates-sandbox-"))
    try:
        source = scratch / "source"
        output = request.output or scratch / "output"
        output.mkdir(exist_ok=True)
        made = materialize(request.root, request.commit, request.excluded, source)
        binds, digests = _inputs(request)
        copies, copied = _writable_copies(request, source, scratch, binds)
        binds = {host: inside for host, inside in binds.items() if inside not in copies.values()}
        binds |= dict(request.extra_binds or {})
        env = passed_environment(request.host.environment, request.env_names, request.protocol)
        env |= dict(request.fixed_env or {})
        seen = (request.root, request.output_at)
        inside_cwd = (
            request.cwd if any(request.cwd.is_relative_to(p) for p in seen) else request.root
        )
        view = build_view(
            source=source,
            mount_at=request.root,
            output=output,
            output_at=request.output_at,
            inputs=binds,
            writable=copies,
            env=env,
            cwd=inside_cwd,
            network=request.network,
            hidden=never_visible(request.root, _git_dir(request.root), request.host.hidden),
        )
        (scratch / "root").mkdir()
        isolation = Isolation(
            mechanism=found.mechanism,
            version=found.version,
            network=request.network,
            commit=made.commit,
            tree=made.tree,
            environment=tuple(sorted(env)),
            inputs=digests | copied,
            writable_copies=tuple(request.writable_copies),
        )
        argv = sandbox_argv(found, view, request.command, scratch / "root")
        yield Prepared(argv, env, output, isolation)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
