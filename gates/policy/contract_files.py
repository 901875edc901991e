"""Reading contract files from the workspace's contracts folder."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints, ValidationError

from gates.core.validation import first_error
from gates.policy.waivers import WAIVER_SUFFIX
from gates.receipts.model import ArtifactKind

ContractId = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*\.[a-z0-9][a-z0-9.-]*$")]


class ContractSpec(BaseModel):
    """One contract file: what is checked, whether it blocks, and how to discharge it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: ContractId
    title: Annotated[str, StringConstraints(min_length=1)]
    check: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
    blocking: StrictBool = True
    discharge: Annotated[str, StringConstraints(min_length=1)]
    remediation: tuple[str, ...] = Field(
        default=(), description="commands or steps that would discharge the contract"
    )
    evidence_kinds: tuple[ArtifactKind, ...] = ()
    profile: dict[str, str | int | bool] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict)


CONTRACT_GLOB = "*.toml"


@dataclass(frozen=True)
class ContractFileError:
    """A contract file that could not be read; it blocks the verdict."""

    source: Path
    message: str


def load_contract(path: Path) -> ContractSpec:
    """Read and parse one contract file; raise ValueError with `key: problem` on bad content."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read: {exc}") from None
    return parse_contract(data)


def parse_contract(data: bytes) -> ContractSpec:
    """Parse one contract's TOML; raise ValueError with `key: problem` on bad content."""
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"not valid TOML: {exc}") from None
    try:
        return ContractSpec.model_validate(raw)
    except ValidationError as exc:
        first = first_error(exc, whole="(file)")
        raise ValueError(f"key '{first.key}': {first.problem}") from None


def is_contract_name(name: str) -> bool:
    return name.endswith(".toml") and not name.endswith(WAIVER_SUFFIX)


def read_folder(folder: Path) -> list[tuple[Path, bytes | None]]:
    """The contract files of a worktree folder with their bytes (None: a symlink, refused)."""
    found: list[tuple[Path, bytes | None]] = []
    if not os.access(folder, os.R_OK | os.X_OK):
        return [(folder, None)]  # parse_contracts: the folder cannot be read
    for path in sorted(folder.glob(CONTRACT_GLOB)):
        if not is_contract_name(path.name):
            continue
        found.append((path, None if path.is_symlink() else _read_or_none(path)))
    return found


def _read_or_none(path: Path) -> bytes | None:
    """The file's bytes; None when it cannot be read (parse_contracts says why)."""
    try:
        return path.read_bytes()
    except OSError:
        return None


def _unreadable_reason(path: Path) -> str:
    if path.is_dir():
        return f"contracts folder cannot be read (make it readable: chmod u+rx {path})"
    if path.is_symlink():
        return "contract file is a symlink"
    try:
        path.read_bytes()
    except OSError as exc:
        return f"contract file cannot be read: {exc.strerror} (make it readable)"
    return "contract file cannot be read"


def load_contracts(folder: Path) -> tuple[list[tuple[Path, ContractSpec]], list[ContractFileError]]:
    """Every contract in a worktree ``folder`` (sorted by file name), plus the files that failed."""
    if not folder.is_dir():
        return [], [ContractFileError(folder, "contracts folder not found; run `gates init`")]
    return parse_contracts(read_folder(folder))


def parse_contracts(
    files: list[tuple[Path, bytes | None]],
) -> tuple[list[tuple[Path, ContractSpec]], list[ContractFileError]]:
    """Contracts from (path, content) pairs, wherever they were read (worktree or a git ref)."""
    loaded: list[tuple[Path, ContractSpec]] = []
    errors: list[ContractFileError] = []
    seen: dict[str, Path] = {}
    for path, data in files:
        if data is None:
            errors.append(ContractFileError(path, _unreadable_reason(path)))
            continue
        try:
            spec = parse_contract(data)
        except ValueError as exc:
            errors.append(ContractFileError(path, str(exc)))
            continue
        if spec.id in seen:
            errors.append(
                ContractFileError(path, f"contract id {spec.id} is also in {seen[spec.id]}")
            )
            continue
        seen[spec.id] = path
        loaded.append((path, spec))
    return loaded, errors
