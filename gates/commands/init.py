"""`gates init`: write gates.toml and copy the default GLM-5.2 contract set."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from gates.commands.freeze import resolve_commit
from gates.core import exitcodes
from gates.core.atomic import write_text_atomic
from gates.core.echo import Echo
from gates.core.errors import ConfigError
from gates.core.resources import contracts_dir
from gates.workspace.config import DEFAULT_EVIDENCE_LOCATIONS, parse_config
from gates.workspace.root import CONFIG_NAME

TEMPLATE = """\
# gates.toml: the workspace configuration of `gates` (docs/gates-toml.md).

[freeze]
# The source-freeze commit. `gates freeze pin REV` rewrites only this value.
pin = "{pin}"
# true: HEAD must be the pin itself, not only a commit with the same source tree.
strict = false
# Narrow the source tree to these paths (empty: the whole repository).
paths = []
# More governance paths, left out of the source tree besides the ones below.
exclude = []

[evidence]
# Where runs leave artifacts and receipts. Governance paths: writing evidence
# here never dirties the source tree.
locations = [{locations}]

[contracts]
dir = "contracts"

[sides]
# Each side's own code (paths or globs of the source tree), e.g. for GLM-5.2
# reference = ["model/train_torch.py", "model/torch_*/"], candidate = ["model/train_paddle.py"].
# The rest of the source tree is shared. Reference evidence counts formal only while its
# code and the shared code equal the policy ref's; empty: all code is shared.
reference = []
candidate = []
# Once this policy is on the branch PRs merge into, name it here (uncomment), so
# that the PR under audit cannot edit the rules that judge it (docs/trust.md).
# Unset: the worktree's own policy judges, and every report says UNPROTECTED.
# [policy]
# ref = "origin/main"

# The trust anchors (signers and the frameworks each may sign), read from a
# protected ref; or GATES_TRUST / --trust naming a file outside the repository.
# [trust]
# ref = "origin/main"
# path = "governance/trust.toml"
"""

#: gates' caches and local state; `gates init` has git ignore it.
LOCAL_STATE = ".gates"


def render_config(pin: str) -> str:
    locations = ", ".join(f'"{location}"' for location in DEFAULT_EVIDENCE_LOCATIONS)
    return TEMPLATE.format(pin=pin, locations=locations)


@dataclass(frozen=True)
class Initialized:
    """What `gates init` wrote: the pin (empty: unset), how many contract files it copied,
    and whether it wrote the local state's .gitignore."""

    pin: str
    copied: int
    ignored: bool


def render_text(done: Initialized) -> str:
    pin = done.pin or "unset"
    lines = [f"wrote {CONFIG_NAME} (pin={pin}) and {done.copied} contract(s) in contracts/"]
    if done.ignored:
        lines.append(f"wrote {LOCAL_STATE}/.gitignore: git ignores gates' caches and local state")
    if not done.pin:
        lines.append("next: `gates freeze pin <commit>` to set the source freeze")
    lines.append("next: once the policy is on main, uncomment [policy] (and [trust]) in gates.toml")
    return "\n".join(lines)


def init(root: Path, *, pin: str | None, force: bool, echo: Echo) -> int:
    """Write gates.toml and the contract set (exit 0)."""
    echo(render_text(initialize(root, pin=pin, force=force)))
    return exitcodes.OK


def initialize(root: Path, *, pin: str | None, force: bool) -> Initialized:
    """gates.toml (pinned at ``pin``'s commit, if given), the contract set and .gates/."""
    root = root.resolve()
    if not (root / ".git").exists():
        raise ConfigError(
            "not the root of a git repository", file=root, hint="run `git init` or cd to the root"
        )
    config_path = root / CONFIG_NAME
    if config_path.exists() and not force:
        raise ConfigError("already exists", file=config_path, hint="pass --force to overwrite")
    sha = resolve_commit(root, pin) if pin else ""
    text = render_config(sha)
    parse_config(text, source=config_path)
    target = root / "contracts"
    copied = _copy_contracts(target, force=force)
    write_text_atomic(config_path, text)
    return Initialized(sha, copied, _ignore_local_state(root))


def _ignore_local_state(root: Path) -> bool:
    """`.gates/.gitignore` holding `*`: git ignores gates' caches and local state without an
    edit to the repository's own .gitignore (which is source, under the freeze)."""
    path = root / LOCAL_STATE / ".gitignore"
    if path.is_file():
        return False
    path.parent.mkdir(exist_ok=True)
    write_text_atomic(path, "# gates' caches and local state (written by `gates init`)\n*\n")
    return True


def _copy_contracts(target: Path, *, force: bool) -> int:
    sources = sorted(contracts_dir().glob("*.toml"))
    clashes = [s.name for s in sources if (target / s.name).exists()]
    if clashes and not force:
        raise ConfigError(
            f"contract files already exist: {', '.join(clashes)}",
            file=target,
            hint="pass --force to overwrite them",
        )
    target.mkdir(parents=True, exist_ok=True)
    for source in sources:
        shutil.copyfile(source, target / source.name)
    return len(sources)
