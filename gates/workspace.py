"""The workspace: a git repository with a gates.toml at its root."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gates.config import CONFIG_NAME, GatesConfig, load_config
from gates.freeze_settings import find_root

if TYPE_CHECKING:
    from gates.policy import Policy


@dataclass(frozen=True)
class Workspace:
    """The repository root and the settings in force. ``policy`` says where those came
    from (None: not resolved yet; the engine resolves it from the environment)."""

    root: Path
    config: GatesConfig
    policy: Policy | None = None

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_NAME

    @property
    def contracts_dir(self) -> Path:
        return self.root / self.config.contracts.dir


def open_workspace(start: Path) -> Workspace:
    """Open the workspace at or above ``start`` (the current folder, or -C DIR)."""
    root = find_root(start)
    return Workspace(root=root, config=load_config(root / CONFIG_NAME))
