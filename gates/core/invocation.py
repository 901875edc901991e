"""What the person who started gates asked for and configured, resolved once at the edge.

The command line (gates/cli/) builds one `Invocation` from its options and the environment
(`read_invocation`, handed ``os.environ``) and each command passes it, or the part a stage
needs, down. Nothing below the command layer reads the environment
(tests/test_edge.py): the signing key, the trust file, the policy ref, the cache folder,
the checker's mode, progress, the launcher's rank and world and the sandbox are parameters.
A Python caller builds its own (`Invocation()` asks for nothing: no key, no trust file, no
policy ref, no cache), or reads the environment as the command line does.

The training process (code users import into their training scripts) reads the run
protocol's variables through `gates.core.run_protocol` alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Generic, TypeVar

from gates.core.progress import Progress

T = TypeVar("T")

SIGNING_KEY_VARIABLE = "GATES_SIGNING_KEY"
TRUST_VARIABLE = "GATES_TRUST"
POLICY_VARIABLE = "GATES_POLICY_REF"
CACHE_VARIABLE = "GATES_CACHE_DIR"
SANDBOX_VARIABLE = "GATES_SANDBOX"
PROGRESS_VARIABLE = "GATES_PROGRESS"
PROGRESS_DELAY_VARIABLE = "GATES_PROGRESS_DELAY"


@dataclass(frozen=True)
class Given(Generic[T]):
    """A value and what named it (an option such as ``--trust``, or a variable such as
    ``GATES_TRUST``): reports say where a setting came from."""

    value: T
    origin: str


@dataclass(frozen=True)
class CheckerMode:
    """How a checker writes its output: ``no_receipt`` is a throwaway check (`--no-receipt`:
    nothing written), ``force`` replaces even by a downgrade (`--force`), ``command`` is the
    checker's own argv from the workspace root (recorded for `gates refresh`; None for the
    Python API and the demo, which also keep the checker's counting lines quiet)."""

    no_receipt: bool = False
    force: bool = False
    command: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Launcher:
    """The distributed launcher's variables as this process got them (`paddle.distributed
    .launch`): rank, world size and local size, unparsed (None: not set). A check that
    shares work between ranks parses them (`gates.checkpoints.ranks.launcher_world`) and
    says what is wrong with them."""

    rank: str | None = None  # PADDLE_TRAINER_ID
    world: str | None = None  # PADDLE_TRAINERS_NUM
    local_size: str | None = None  # PADDLE_LOCAL_SIZE, else PADDLE_NPROC_PER_NODE

    @property
    def world_size(self) -> int:
        """The world size where it is a whole number, else 1 (a profile's default)."""
        return int(self.world) if self.world is not None and self.world.isdigit() else 1


@dataclass(frozen=True)
class Invocation:
    """Everything a command takes from outside its arguments, resolved once.

    ``environment`` is a read-only copy of the environment gates was started with: what it
    hands on to the processes it starts (git; the sandbox passes only its allowlist) and the
    values of ``${NAME}`` in `[evidence.external]` roots; gates' own settings are read from
    it here, once, never again below the command layer.
    """

    signing_key: Path | None = None  # GATES_SIGNING_KEY: the key file that signs
    trust: Given[Path] | None = None  # --trust / GATES_TRUST: who may sign formal evidence
    policy_ref: Given[str] | None = None  # --policy-ref / GATES_POLICY_REF
    cache_folder: Path | None = None  # GATES_CACHE_DIR (None: no cache, GATES_CACHE_DIR=off)
    verify_all: bool = False  # --verify-all: no cache is read or written, every file hashed
    checker: CheckerMode = field(default_factory=CheckerMode)
    progress: Progress = field(default_factory=Progress)
    launcher: Launcher = field(default_factory=Launcher)
    sandbox: str = "auto"  # GATES_SANDBOX: auto, bwrap or unshare
    pre_commit_store: Path | None = None  # pre-commit's store while under pre-commit (PRE_COMMIT=1)
    environment: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def caching(self) -> Path | None:
        """The cache folder this command may read and write (None: none at all)."""
        return None if self.verify_all else self.cache_folder

    def with_checker(self, checker: CheckerMode) -> Invocation:
        return dataclasses.replace(self, checker=checker)


def default_cache_folder(variables: Mapping[str, str]) -> Path | None:
    """$GATES_CACHE_DIR (`off`: none), else $XDG_CACHE_HOME/gates, else ~/.cache/gates."""
    configured = variables.get(CACHE_VARIABLE)
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    return _user_cache(variables) / "gates"


def _user_cache(variables: Mapping[str, str]) -> Path:
    xdg = variables.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg)
    home = variables.get("HOME")
    return (Path(home) if home else Path.home()) / ".cache"


def pre_commit_store(variables: Mapping[str, str]) -> Path | None:
    """Where pre-commit keeps its stash while its hooks run (PRE_COMMIT=1), else None."""
    if variables.get("PRE_COMMIT") != "1":
        return None
    configured = variables.get("PRE_COMMIT_HOME")
    return Path(configured) if configured else _user_cache(variables) / "pre-commit"


def progress_from(
    variables: Mapping[str, str], *, terminal: bool, machine_output: bool
) -> Progress:
    """Bars on a terminal only, never beside machine output (`--format json`), never with
    GATES_PROGRESS=0; after GATES_PROGRESS_DELAY seconds (default 2)."""
    shown = terminal and not machine_output and variables.get(PROGRESS_VARIABLE, "1") != "0"
    try:
        delay = max(0.0, float(variables.get(PROGRESS_DELAY_VARIABLE, "2")))
    except ValueError:
        delay = 2.0
    return Progress(shown, delay)


def read_invocation(
    variables: Mapping[str, str],
    *,
    policy_ref: str | None = None,
    trust: Path | None = None,
    verify_all: bool = False,
    checker: CheckerMode | None = None,
    terminal: bool = False,
    machine_output: bool = False,
) -> Invocation:
    """The invocation the options and ``variables`` (the environment) ask for: an option
    wins over its variable (``--policy-ref`` over GATES_POLICY_REF, ``--trust`` over
    GATES_TRUST); ``terminal`` is whether stderr is one, ``machine_output`` whether stdout
    carries a JSON document (both only decide progress)."""
    key = variables.get(SIGNING_KEY_VARIABLE, "")
    local = variables.get("PADDLE_LOCAL_SIZE") or variables.get("PADDLE_NPROC_PER_NODE")
    return Invocation(
        signing_key=Path(key).expanduser() if key else None,
        trust=_given(trust, "--trust", variables.get(TRUST_VARIABLE), TRUST_VARIABLE, Path),
        policy_ref=_given(
            policy_ref, "--policy-ref", variables.get(POLICY_VARIABLE), POLICY_VARIABLE, str
        ),
        cache_folder=default_cache_folder(variables),
        verify_all=verify_all,
        checker=checker or CheckerMode(),
        progress=progress_from(variables, terminal=terminal, machine_output=machine_output),
        launcher=Launcher(
            variables.get("PADDLE_TRAINER_ID"), variables.get("PADDLE_TRAINERS_NUM"), local
        ),
        sandbox=variables.get(SANDBOX_VARIABLE, "auto"),
        pre_commit_store=pre_commit_store(variables),
        environment=MappingProxyType(dict(variables)),
    )


def _given(
    option: T | None, option_name: str, value: str | None, variable: str, kind: type[T]
) -> Given[T] | None:
    if option is not None and option != "":
        return Given(option, option_name)
    if value:
        return Given(kind(value), variable)  # type: ignore[call-arg]
    return None
