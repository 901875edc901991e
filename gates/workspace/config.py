"""gates.toml: the workspace configuration, validated at load time."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StrictBool,
    StringConstraints,
    ValidationError,
)

from gates.core.errors import ConfigError, UnsafePathError
from gates.core.paths import check_relpath
from gates.core.validation import first_error
from gates.workspace.external import check_root_spelling
from gates.workspace.root import CONFIG_NAME

DEFAULT_EVIDENCE_LOCATIONS = ("results", "experiments", "outputs", ".gates")

RelPath = Annotated[str, StringConstraints(min_length=1)]


class _Strict(BaseModel):
    # Lax mode only so TOML arrays become tuples; scalars use Strict* types, and
    # pydantic v2 never turns numbers into strings.
    model_config = ConfigDict(extra="forbid", frozen=True)


class FreezeConfig(_Strict):
    """``[freeze]``: the pin and what counts as the source tree."""

    pin: Annotated[str, StringConstraints(pattern=r"^[^\s]*$")] = Field(
        default="", description="the source-freeze commit (full sha or any revision)"
    )
    strict: StrictBool = Field(
        default=False, description="require HEAD == pin, not only equal trees"
    )
    paths: tuple[RelPath, ...] = Field(
        default=(), description="narrow the source tree to these folders or files"
    )
    exclude: tuple[RelPath, ...] = Field(
        default=(), description="more governance paths, left out of the source tree"
    )


RootName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]*$")]


class ExternalRootsConfig(
    RootModel[dict[RootName, Annotated[str, StringConstraints(strict=True)]]]
):
    """``[evidence.external]``: read-only roots outside the workspace, by name.

    Values are absolute paths or environment variable references
    (``"${GLM52_DIR}"``), resolved where they are used (gates/workspace/external.py).
    """

    model_config = ConfigDict(frozen=True)
    root: dict[RootName, Annotated[str, StringConstraints(strict=True)]] = Field(
        default_factory=dict
    )


class EvidenceConfig(_Strict):
    """``[evidence]``: where receipts and results live (all governance paths)."""

    locations: tuple[RelPath, ...] = DEFAULT_EVIDENCE_LOCATIONS
    external: ExternalRootsConfig = ExternalRootsConfig()


class ContractsConfig(_Strict):
    """``[contracts]``: the folder of contract files."""

    dir: RelPath = "contracts"


# A branch, tag or commit name; never an option (leading '-') nor a revision expression.
GitRef = Annotated[str, StringConstraints(pattern=r"^([^-\s:~^?*\[\\][^\s:~^?*\[\\]*)?$")]


class TrustConfig(_Strict):
    """``[trust]``: the trust file as committed at a protected git ref (docs/trust.md)."""

    ref: GitRef = Field(default="", description="git ref whose tree holds the trust file")
    path: str = Field(default="", description="path of the trust file inside that tree")


class PolicyConfig(_Strict):
    """``[policy]``: the protected git ref whose contracts, waivers and settings judge a PR."""

    ref: GitRef = Field(default="", description="e.g. origin/main, the branch a PR merges into")


EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


class SandboxConfig(_Strict):
    """``[sandbox]``: the isolation a formal run needs, and what the sandbox may see
    (docs/sandbox.md)."""

    required: StrictBool = Field(
        default=True, description="runs without the sandbox count as probe"
    )
    network: StrictBool = Field(default=False, description="share the host's network")
    env: tuple[EnvName, ...] = Field(
        default=(), description="more environment variables passed in (never GATES_*)"
    )
    inputs: tuple[RelPath, ...] = Field(
        default=(), description="data and weights shown read-only (digests recorded)"
    )
    writable_copies: tuple[RelPath, ...] = Field(
        default=(),
        description="folders of the commit or of `inputs` shown as a private writable copy, "
        "for frameworks that write beside their weights (digests recorded before; "
        "what is written there is discarded)",
    )
    recorded: tuple[Literal["torch", "paddle"], ...] = Field(
        default=(),
        description="sides whose runs may be recorded after the fact instead (no sandbox)",
    )


class SidesConfig(_Strict):
    """``[sides]``: which paths of the source tree are each side's code (paths or globs);
    the rest of the source tree is shared. Reference evidence counts formal only while
    its side's code and the shared code equal the policy ref's (docs/trust.md)."""

    reference: tuple[RelPath, ...] = Field(
        default=(), description="the reference's code, e.g. model/train_torch.py"
    )
    candidate: tuple[RelPath, ...] = Field(
        default=(), description="the candidate's code, e.g. model/train_paddle.py"
    )


class GatesConfig(_Strict):
    """The whole of gates.toml."""

    freeze: FreezeConfig = FreezeConfig()
    evidence: EvidenceConfig = EvidenceConfig()
    contracts: ContractsConfig = ContractsConfig()
    trust: TrustConfig = TrustConfig()
    policy: PolicyConfig = PolicyConfig()
    sandbox: SandboxConfig = SandboxConfig()
    sides: SidesConfig = SidesConfig()

    def governance_paths(self) -> tuple[str, ...]:
        """Paths that are never part of the source tree."""
        return (
            CONFIG_NAME,
            self.contracts.dir,
            *self.evidence.locations,
            *self.freeze.exclude,
        )


def parse_config(text: str, *, source: Path) -> GatesConfig:
    """Parse and validate gates.toml text; errors name the file and the key."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", file=source) from None
    try:
        config = GatesConfig.model_validate(raw)
    except ValidationError as exc:
        first = first_error(exc)
        if first.unknown_key:
            message = f"unknown key '{first.key}'"
        else:
            message = f"key '{first.key}': {first.message} (found {first.found!r})"
        raise ConfigError(message, file=source, hint="see docs/gates-toml.md") from None
    for name, spec in config.evidence.external.root.items():
        try:
            check_root_spelling(name, spec)
        except UnsafePathError as exc:
            raise ConfigError(exc.message, file=source, hint=exc.hint) from None
    for key, value in _declared_paths(config):
        try:
            check_relpath(value, what=key)
        except UnsafePathError as exc:
            raise ConfigError(exc.message, file=source, hint=exc.hint) from None
    return config


def _declared_paths(config: GatesConfig) -> list[tuple[str, str]]:
    pairs = [("contracts.dir", config.contracts.dir)]
    pairs += [("evidence.locations", p) for p in config.evidence.locations]
    pairs += [("freeze.paths", p) for p in config.freeze.paths]
    pairs += [("freeze.exclude", p) for p in config.freeze.exclude]
    if config.trust.path:
        pairs.append(("trust.path", config.trust.path))
    pairs += [("sandbox.inputs", p) for p in config.sandbox.inputs if not p.startswith("/")]
    pairs += [("sides.reference", p.rstrip("/")) for p in config.sides.reference]
    pairs += [("sides.candidate", p.rstrip("/")) for p in config.sides.candidate]
    return pairs


def load_config(path: Path) -> GatesConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("not found", file=path, hint="run `gates init`") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", file=path) from None
    return parse_config(text, source=path)
