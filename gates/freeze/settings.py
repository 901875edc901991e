"""The freeze check's settings from gates.toml, without loading the config models when the
file is unchanged since it last passed validation.

`audit_source_freeze.py` runs in every pre-push hook; importing pydantic to
validate gates.toml would be most of its time. The first run validates with
the full model (gates.workspace.config) and keeps the few values the freeze needs in a
small cache file beside the stat cache (outside the workspace), keyed on
gates.toml's stat key (device, inode, size, mtime, ctime) and the gates
version. Later runs read that file. A file still in the racy window is not
kept; a cache that does not match, or does not parse, is ignored.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from gates import __version__
from gates.core.atomic import write_text_atomic
from gates.core.hashing import RACY_WINDOW_NS, cache_file, stat_key
from gates.workspace.root import CONFIG_NAME

SETTINGS_KIND = "freeze-settings"


@dataclass(frozen=True)
class FreezeSection:
    pin: str
    strict: bool
    paths: tuple[str, ...]
    exclude: tuple[str, ...]


@dataclass(frozen=True)
class FreezeSettings:
    """What the freeze check reads of gates.toml (the same attributes as GatesConfig)."""

    freeze: FreezeSection
    governance: tuple[str, ...]

    def governance_paths(self) -> tuple[str, ...]:
        return self.governance


def _validated(path: Path) -> FreezeSettings:
    from gates.workspace.config import load_config  # noqa: PLC0415  (pydantic: only on a cache miss)

    config = load_config(path)
    freeze = config.freeze
    section = FreezeSection(freeze.pin, freeze.strict, tuple(freeze.paths), tuple(freeze.exclude))
    return FreezeSettings(section, tuple(config.governance_paths()))


def _from_cache(data: object, key: list[object]) -> FreezeSettings | None:
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    raw = data.get("settings")
    if not isinstance(raw, dict):
        return None
    try:
        section = FreezeSection(
            str(raw["pin"]),
            raw["strict"] is True,
            tuple(str(p) for p in raw["paths"]),
            tuple(str(p) for p in raw["exclude"]),
        )
        return FreezeSettings(section, tuple(str(p) for p in raw["governance"]))
    except (KeyError, TypeError):
        return None


def load_freeze_settings(root: Path) -> FreezeSettings:
    """The freeze settings of the workspace at ``root`` (validated now or before)."""
    path = root / CONFIG_NAME
    cache = cache_file(root, SETTINGS_KIND)
    try:
        info = path.stat()
    except OSError:
        return _validated(path)  # names the problem
    key: list[object] = [*stat_key(info), __version__]
    if cache is not None:
        with contextlib.suppress(OSError, ValueError):
            found = _from_cache(json.loads(cache.read_bytes()), key)
            if found is not None:
                return found
    settings = _validated(path)
    if cache is not None and time.time_ns() - info.st_mtime_ns > RACY_WINDOW_NS:
        section = settings.freeze
        record = {
            "key": key,
            "settings": {
                "pin": section.pin,
                "strict": section.strict,
                "paths": list(section.paths),
                "exclude": list(section.exclude),
                "governance": list(settings.governance),
            },
        }
        with contextlib.suppress(OSError):
            write_text_atomic(cache, json.dumps(record))
    return settings
