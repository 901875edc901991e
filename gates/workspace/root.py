"""Where the workspace is: the nearest folder holding a gates.toml (standard library only:
the freeze script finds it before it knows whether it must load the config models)."""

from __future__ import annotations

from pathlib import Path

from gates.core.errors import ConfigError

CONFIG_NAME = "gates.toml"


def find_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` that holds a gates.toml."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / CONFIG_NAME).is_file():
            return folder
    raise ConfigError(
        f"no {CONFIG_NAME} here or in any parent folder",
        file=start,
        hint="run `gates init` at the repository root, or pass -C WORKSPACE",
    )
