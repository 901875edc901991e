"""The workspace: a git repository with a gates.toml at its root."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gates.workspace.config import GatesConfig, load_config
from gates.workspace.external import ExternalRoots
from gates.workspace.root import CONFIG_NAME, find_root


@dataclass(frozen=True)
class Workspace:
    """The repository root and its settings (a command's inputs hold the workspace with the
    settings of the policy in force: gates.engine.inputs.AuditInputs). It carries no policy.
    ``variables`` give the `${NAME}` in `[evidence.external]` roots their values on this
    machine (the command's environment; none: every such root is unusable here)."""

    root: Path
    config: GatesConfig
    variables: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_NAME

    @property
    def contracts_dir(self) -> Path:
        return self.root / self.config.contracts.dir


def open_workspace(start: Path, variables: Mapping[str, str] | None = None) -> Workspace:
    """Open the workspace at or above ``start`` (the current folder, or -C DIR), its external
    roots' variables from ``variables`` (`Invocation.environment`)."""
    root = find_root(start)
    return Workspace(root, load_config(root / CONFIG_NAME), variables or {})


def roots_of(workspace: Workspace) -> ExternalRoots:
    """The external roots a workspace's gates.toml names."""
    return ExternalRoots(
        workspace.root, dict(workspace.config.evidence.external.root), workspace.variables
    )
