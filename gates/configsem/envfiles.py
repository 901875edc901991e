"""Reading the env.json of each side for the pins' agreement (revision, model_config_sha256)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gates.core.content_ids import strict_loads
from gates.core.errors import GatesError
from gates.core.paths import resolve_inside


def read_env_files(root: Path, paths: tuple[str, ...]) -> list[tuple[str, dict[str, Any] | str]]:
    """Each env.json as (path, its JSON object), or (path, the problem) when unusable."""
    found: list[tuple[str, dict[str, Any] | str]] = []
    for relpath in paths:
        try:
            path = resolve_inside(root, relpath, what="env.json")
            document = strict_loads(path.read_bytes())
        except GatesError as exc:
            found.append((relpath, exc.message))
            continue
        except FileNotFoundError:
            found.append((relpath, "not found"))
            continue
        except OSError as exc:
            found.append((relpath, f"cannot read: {exc.strerror}"))
            continue
        except (ValueError, UnicodeDecodeError) as exc:
            found.append((relpath, f"not valid JSON: {exc}"))
            continue
        found.append((relpath, document if isinstance(document, dict) else "not a JSON object"))
    return found
