"""External evidence roots: read-only folders outside the workspace, named in gates.toml.

A checkpoint of 1.5 TB lives on shared storage, never inside the repository.
``[evidence.external]`` names such roots (``official = "${GLM52_DIR}"``) and a
subject path ``external:<root>/<relpath>`` binds a file below one. Each root
is resolved on use, on the machine that uses it: an unset variable, a
relative path, a ``..`` or a root that overlaps the workspace is an error
naming the root, and a root that is not there makes every receipt binding it
unverifiable on that machine. Inside a root the same rules as inside the
workspace apply (no symlink on the way); nothing is ever written into a root.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gates.core.errors import UnsafePathError
from gates.core.paths import check_relpath, resolve_inside, to_workspace_relpath

EXTERNAL_PREFIX = "external:"
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ExternalRootError(UnsafePathError):
    """A root that cannot be used on this machine; the message names the root."""


def is_external(path: str) -> bool:
    return path.startswith(EXTERNAL_PREFIX)


def check_root_spelling(name: str, spec: str) -> None:
    """Refuse at load time what can never be a root: relative, ``..``, a bad variable."""
    text = spec.strip()
    if not text:
        raise UnsafePathError(f"evidence.external.{name} is empty")
    stripped = _VARIABLE.sub("", text)
    if "$" in stripped:
        raise UnsafePathError(
            f"evidence.external.{name} = {spec!r}: write variables as ${{NAME}}",
            hint='e.g. official = "${GLM52_DIR}"',
        )
    if not text.startswith(("/", "${")):
        raise UnsafePathError(
            f"evidence.external.{name} = {spec!r} is a relative path",
            hint="give an absolute path or a variable holding one",
        )
    if ".." in text.split("/"):
        raise UnsafePathError(f"evidence.external.{name} = {spec!r} contains '..'")


def expand_root(name: str, spec: str, variables: Mapping[str, str]) -> Path:
    """The absolute, normalized path a root's spelling names on this machine, its
    `${NAME}` from ``variables`` (the command's environment)."""

    def variable(match: re.Match[str]) -> str:
        value = variables.get(match.group(1))
        if not value:
            raise ExternalRootError(
                f"external root '{name}': environment variable {match.group(1)} is unset",
                hint=f"export {match.group(1)}=/path/to/the/copy on this machine",
            )
        return value

    text = _VARIABLE.sub(variable, spec.strip())
    if not text.startswith("/"):
        raise ExternalRootError(
            f"external root '{name}' = {text!r} is a relative path", hint="use an absolute path"
        )
    if ".." in text.split("/"):
        raise ExternalRootError(f"external root '{name}' = {text!r} contains '..'")
    return Path(os.path.normpath(text))


def _overlaps(one: Path, other: Path) -> bool:
    return one == other or one.is_relative_to(other) or other.is_relative_to(one)


@dataclass(frozen=True)
class ExternalRoots:
    """The roots of one workspace, resolved lazily on this machine."""

    workspace: Path
    specs: Mapping[str, str]
    variables: Mapping[str, str] = field(default_factory=dict)  # the `${NAME}` values here

    def root(self, name: str) -> Path:
        """The real folder of root ``name``; ExternalRootError when it cannot be used here."""
        spec = self.specs.get(name)
        if spec is None:
            known = ", ".join(sorted(self.specs)) or "none"
            raise ExternalRootError(
                f"no external root named '{name}' (configured: {known})",
                hint="add it under [evidence.external] in gates.toml",
            )
        path = expand_root(name, spec, self.variables)
        if not path.is_dir():
            raise ExternalRootError(
                f"external root '{name}' ({path}) is not available on this machine",
                hint="mount the copy, or point the root's variable at it",
            )
        real = Path(os.path.realpath(path))
        if _overlaps(real, Path(os.path.realpath(self.workspace))):
            link = f" (a symlink to {real})" if real != path else ""
            raise ExternalRootError(
                f"external root '{name}' ({path}){link} overlaps the workspace",
                hint="external roots hold evidence outside the workspace; use a workspace path",
            )
        return real

    def resolve(self, subject: str, *, what: str = "subject") -> Path:
        """``external:<root>/<relpath>`` -> the file, never through a symlink inside the root."""
        name, relpath = split_external(subject, what=what)
        base = self.root(name)
        return resolve_inside(base, relpath, what=what) if relpath else base

    def locate(self, absolute: Path) -> str | None:
        """``external:<root>/<relpath>`` for an absolute path below a usable root, else None."""
        for name in sorted(self.specs):
            try:
                base = expand_root(name, self.specs[name], self.variables)
            except ExternalRootError:
                continue
            for candidate in {base, Path(os.path.realpath(base))}:
                if absolute == candidate or absolute.is_relative_to(candidate):
                    relpath = absolute.relative_to(candidate).as_posix()
                    return f"{EXTERNAL_PREFIX}{name}" + ("" if relpath == "." else f"/{relpath}")
        return None


def split_external(subject: str, *, what: str = "subject") -> tuple[str, str]:
    """``external:official/a/b`` -> (``official``, ``a/b``); the relpath may be empty."""
    body = subject.removeprefix(EXTERNAL_PREFIX)
    name, _, relpath = body.partition("/")
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
        raise UnsafePathError(
            f"{what} {subject!r} does not name an external root",
            hint="write external:<root>/<path inside the root>",
        )
    if relpath:
        check_relpath(relpath, what=what)
    return name, relpath


@dataclass(frozen=True)
class Location:
    """A folder or file given by a user: inside the workspace or below an external root."""

    base: Path
    relpath: str
    label: str  # a workspace path, or external:<root>/<relpath>

    @property
    def path(self) -> Path:
        return self.base / self.relpath if self.relpath else self.base

    @property
    def external(self) -> bool:
        return is_external(self.label)


def locate(roots: ExternalRoots, given: str, cwd: Path) -> Location:
    """Where a path typed by a user lives: ``external:...``, below a root, or in the workspace."""
    if is_external(given):
        name, relpath = split_external(given, what="path")
        base = roots.root(name)
        if relpath:
            resolve_inside(base, relpath, what="path")
        return Location(base, relpath, given)
    candidate = Path(given) if Path(given).is_absolute() else cwd / given
    normalized = Path(os.path.normpath(candidate))
    label = roots.locate(normalized)
    if label is not None:
        return locate(roots, label, cwd)
    try:
        relpath = to_workspace_relpath(roots.workspace, given, cwd)
    except UnsafePathError as exc:
        unusable = []
        for name, spec in sorted(roots.specs.items()):
            try:
                expand_root(name, spec, roots.variables)
            except ExternalRootError as problem:
                unusable.append(problem.message)
        why = f"; not usable here: {'; '.join(unusable)}" if unusable else ""
        raise UnsafePathError(
            exc.message,
            hint="evidence must live inside the workspace, or below a root named in "
            f"[evidence.external] of gates.toml (then write external:<root>/<path>){why}",
        ) from None
    return Location(roots.workspace, relpath, relpath)


def subject_file(
    workspace: Path,
    roots: ExternalRoots | None,
    subject: str,
    *,
    checked_dirs: set[str] | None = None,
) -> Path:
    """The file a receipt subject names: a workspace path, or ``external:<root>/<relpath>``."""
    if not is_external(subject):
        return resolve_inside(workspace, subject, what="subject", checked_dirs=checked_dirs)
    if roots is None:
        raise ExternalRootError(f"subject {subject}: no external roots are configured")
    _, relpath = split_external(subject)
    if not relpath:
        raise UnsafePathError(f"subject {subject!r} names a root, not a file inside it")
    return roots.resolve(subject)
