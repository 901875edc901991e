"""The policy in force: contracts, waivers, trust anchors and gates.toml settings read from a
protected git ref, never from the worktree or the commit under audit.

Only the pin comes from the worktree's gates.toml. The PR's own contracts,
waivers and settings are still read, and every difference from the policy in
force is reported as a proposed policy change: shown, never applied. Without a
policy ref the worktree's policy is used and said to be unprotected.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from gates.core import git
from gates.core.errors import ConfigError, GatesError
from gates.core.invocation import Given
from gates.naming.rulefile import (
    INVENTORY_CHECK,
    ContractRules,
    has_rules,
    rules_or,
    ruleset_from_params,
)
from gates.naming.rules import RuleSet
from gates.policy.contract_files import (
    ContractFileError,
    ContractSpec,
    is_contract_name,
    parse_contract,
    parse_contracts,
    read_folder,
)
from gates.policy.waivers import WAIVER_SUFFIX, LoadedWaiver, parse_waivers
from gates.trust.anchors import (
    NO_ANCHORS,
    Anchors,
    TrustError,
    load_trust_file,
    parse_trust,
)
from gates.workspace.config import GatesConfig, parse_config
from gates.workspace.repository import Workspace
from gates.workspace.root import CONFIG_NAME

PROPOSED = "proposed policy change (not in force until merged)"
INVALID = "invalid proposed policy change (fix it before merging)"


class PolicyError(GatesError):
    """The policy ref does not resolve or its policy cannot be read."""


@dataclass(frozen=True)
class Policy:
    """Where the rules that judge this audit come from, and what the PR proposes to change."""

    protected: bool
    ref: str | None
    commit: str | None
    origin: str
    config: GatesConfig
    contract_files: tuple[tuple[Path, bytes | None], ...]
    waiver_files: tuple[tuple[str, bytes | None], ...]
    proposed_changes: tuple[str, ...] = ()
    anchors: Anchors = NO_ANCHORS
    #: proposed changes that would not load once merged (each blocks: fix before merging)
    invalid_changes: tuple[str, ...] = ()
    contracts_found: bool = True

    def describe(self) -> str:
        if not self.protected:
            return (
                "UNPROTECTED: contracts, waivers and settings come from the worktree, which the "
                "PR under audit can edit (set [policy] ref, --policy-ref or GATES_POLICY_REF)"
            )
        return f"protected: {self.ref} at {self.commit} ({self.origin})"

    def contracts(self) -> tuple[list[tuple[Path, ContractSpec]], list[ContractFileError]]:
        """Every contract in force and every file that failed to load (parsed once)."""
        loaded, errors = self._parsed
        return list(loaded), list(errors)

    @functools.cached_property
    def _parsed(
        self,
    ) -> tuple[tuple[tuple[Path, ContractSpec], ...], tuple[ContractFileError, ...]]:
        if not self.contracts_found:
            folder = self.contract_files_folder
            return (), (ContractFileError(folder, "contracts folder not found; run `gates init`"),)
        loaded, errors = parse_contracts(list(self.contract_files))
        return tuple(loaded), tuple(errors)

    def contract(self, check: str) -> tuple[Path, ContractSpec] | None:
        """The first contract in force whose check is ``check`` (and its file), or None."""
        return next(((p, s) for p, s in self._parsed[0] if s.check == check), None)

    def ruleset(self) -> tuple[RuleSet, str | None]:
        """The naming rules of the tensor-inventory contract in force, and its file (empty
        rules and None without one): a PR cannot loosen the naming rules."""
        found = self.rules(INVENTORY_CHECK)
        return found.ruleset, found.source

    def rules(self, check: str) -> ContractRules:
        """The naming rules the contract of ``check`` in force compares through: its own,
        else (a contract that declares none) the tensor-inventory contract's; with that
        contract's own params. ConfigError when the rules do not parse."""
        found = self.contract(check)
        params = dict(found[1].params) if found is not None else {}
        if found is not None and has_rules(params):
            ruleset = ruleset_from_params(params, str(found[0]))
            return ContractRules(ruleset, str(found[0]), params, check)
        inventory = self._inventory_rules
        if isinstance(inventory, ConfigError):
            raise inventory
        if check == INVENTORY_CHECK:
            return inventory
        source = str(found[0]) if found is not None else "the contract"
        ruleset = rules_or(params, source, inventory.ruleset)
        return ContractRules(ruleset, inventory.source, params, check)

    @functools.cached_property
    def _inventory_rules(self) -> ContractRules | ConfigError:
        inventory = self.contract(INVENTORY_CHECK)
        if inventory is None:
            return ContractRules()
        path, spec = inventory
        try:
            ruleset = ruleset_from_params(spec.params, str(path))
            return ContractRules(ruleset, str(path), dict(spec.params), INVENTORY_CHECK)
        except ConfigError as error:
            return error

    def waivers(self) -> tuple[list[LoadedWaiver], list[str]]:
        return parse_waivers(list(self.waiver_files))

    @property
    def contract_files_folder(self) -> Path:
        return Path(self.config.contracts.dir)

    @property
    def digest(self) -> str:
        """sha256 over every contract and waiver in force (the VSA's policy digest)."""
        digest = hashlib.sha256()
        for path, data in sorted(self.contract_files, key=lambda item: str(item[0])):
            digest.update(f"{path.name}\0".encode() + (data or b"") + b"\0")
        for source, raw in sorted(self.waiver_files, key=lambda item: item[0]):
            digest.update(f"{source}\0".encode() + (raw or b"") + b"\0")
        return digest.hexdigest()


def policy_ref(given: Given[str] | None, worktree: GatesConfig) -> tuple[str | None, str]:
    """The ref and who named it: the invocation's (--policy-ref, then GATES_POLICY_REF), then
    gates.toml."""
    if given is not None:
        return given.value, given.origin
    if worktree.policy.ref:
        return worktree.policy.ref, "gates.toml [policy] ref"
    return None, ""


def _worktree_files(
    root: Path, config: GatesConfig
) -> tuple[list[tuple[Path, bytes | None]], list[tuple[str, bytes | None]]]:
    folder = root / config.contracts.dir
    if not folder.is_dir():
        return [], []
    contracts = read_folder(folder)
    waivers: list[tuple[str, bytes | None]] = []
    for path in sorted(folder.glob(f"*{WAIVER_SUFFIX}")):
        relpath = path.relative_to(root).as_posix()
        try:
            waivers.append((relpath, None if path.is_symlink() else path.read_bytes()))
        except OSError:
            waivers.append((relpath, None))  # parse_waivers: "cannot read"
    return contracts, waivers


def _ref_files(
    root: Path, commit: str, config: GatesConfig
) -> tuple[list[tuple[Path, bytes | None]], list[tuple[str, bytes | None]]]:
    folder = config.contracts.dir.rstrip("/")
    names = git.list_folder(root, commit, folder)
    blobs = git.read_blobs(root, commit, [f"{folder}/{name}" for name in names])
    contracts = [
        (root / folder / name, blobs[f"{folder}/{name}"])
        for name in names
        if is_contract_name(name)
    ]
    waivers = [
        (f"{folder}/{name}", blobs[f"{folder}/{name}"])
        for name in names
        if name.endswith(WAIVER_SUFFIX)
    ]
    return contracts, waivers


def _settings_changes(policy: GatesConfig, worktree: GatesConfig) -> list[str]:
    """Every gates.toml setting (the pin aside) the worktree sets differently."""
    changes = []
    ours = policy.model_dump()
    theirs = worktree.model_dump()
    for section in sorted(set(ours) | set(theirs)):
        for key in sorted(set(ours.get(section, {})) | set(theirs.get(section, {}))):
            if (section, key) == ("freeze", "pin"):
                continue
            before, after = ours[section].get(key), theirs[section].get(key)
            if before != after:
                changes.append(
                    f"{CONFIG_NAME}: [{section}] {key} = {after!r} in the worktree, "
                    f"{before!r} in force: {PROPOSED}"
                )
    return changes


def load_problem(name: str, data: bytes | None) -> str | None:
    """Why a proposed contract or waiver file would not load once in force, or None."""
    if data is None:
        return "cannot be read (a symlink, or unreadable)"
    if name.endswith(WAIVER_SUFFIX):
        _, errors = parse_waivers([(name, data)])
        return errors[0].removeprefix(f"{name}: ") if errors else None
    try:
        parse_contract(data)
    except ValueError as exc:
        return str(exc)
    return None


def _file_changes(
    in_force: dict[str, bytes | None], proposed: dict[str, bytes | None], folder: str
) -> tuple[list[str], list[str]]:
    """Every proposed file change, and those among them that would not load once merged."""
    changes, invalid = [], []
    for name in sorted(set(in_force) | set(proposed)):
        if name not in in_force:
            what = "added"
        elif name not in proposed:
            what = "deleted"
        elif in_force[name] != proposed[name]:
            what = "changed"
        else:
            continue
        problem = load_problem(name, proposed[name]) if name in proposed else None
        if problem is None:
            changes.append(f"{folder}/{name}: {what} in the worktree: {PROPOSED}")
        else:
            line = f"{folder}/{name}: {what} in the worktree and does not load: {problem}"
            changes.append(f"{line}: {INVALID}")
            invalid.append(line)
    return changes, invalid


def load_policy(
    root: Path,
    worktree: GatesConfig,
    *,
    ref: Given[str] | None = None,
    trust: Given[Path] | None = None,
    with_anchors: bool = True,
) -> Policy:
    """The policy in force for the workspace at ``root`` under the policy ref the command
    was given (``ref``: --policy-ref or GATES_POLICY_REF; else gates.toml's), with its trust
    anchors (from ``trust``, else [trust] ref; none when ``with_anchors`` is False: the
    freeze check alone needs none)."""
    ref_name, origin = policy_ref(ref, worktree)
    contracts, waivers = _worktree_files(root, worktree)
    if ref_name is None:
        policy = Policy(False, None, None, "", worktree, tuple(contracts), tuple(waivers))
        if not (root / worktree.contracts.dir).is_dir():
            policy = dataclasses.replace(policy, contracts_found=False)
        return _with_anchors(root, policy, trust) if with_anchors else policy
    try:
        resolved = git.resolve_ref(root, ref_name, what=f"policy ref ({origin})")
    except git.RefError as error:
        raise PolicyError(error.message, file=root, hint=error.hint) from None
    ref_name, commit = resolved.refname, resolved.commit
    text = git.read_blobs(root, commit, [CONFIG_NAME])[CONFIG_NAME]
    if text is None:
        raise PolicyError(f"policy ref {ref_name} has no {CONFIG_NAME}", file=root)
    try:
        config = parse_config(text.decode("utf-8"), source=Path(f"{ref_name}:{CONFIG_NAME}"))
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8", file=f"{ref_name}:{CONFIG_NAME}") from None
    config = config.model_copy(
        update={"freeze": config.freeze.model_copy(update={"pin": worktree.freeze.pin})}
    )
    in_force_contracts, in_force_waivers = _ref_files(root, commit, config)
    changes = _settings_changes(config, worktree)
    folder = config.contracts.dir.rstrip("/")
    proposed_contracts, proposed_waivers = _worktree_files(root, config)
    file_changes, invalid = _file_changes(
        {p.name: d for p, d in in_force_contracts}
        | {s.rsplit("/", 1)[-1]: d for s, d in in_force_waivers},
        {p.name: d for p, d in proposed_contracts}
        | {s.rsplit("/", 1)[-1]: d for s, d in proposed_waivers},
        folder,
    )
    changes += file_changes
    policy = Policy(
        True,
        ref_name,
        commit,
        origin,
        config,
        tuple(in_force_contracts),
        tuple(in_force_waivers),
        tuple(changes),
        invalid_changes=tuple(invalid),
    )
    return _with_anchors(root, policy, trust) if with_anchors else policy


def _with_anchors(root: Path, policy: Policy, trust: Given[Path] | None) -> Policy:
    return dataclasses.replace(policy, anchors=_anchors(root, policy, trust))


def _anchors(root: Path, policy: Policy, trust_file: Given[Path] | None) -> Anchors:
    if trust_file is not None:
        path, via = trust_file.value, trust_file.origin
        resolved = path.expanduser().resolve()
        if resolved.is_relative_to(root.resolve()):
            raise TrustError(
                "trust file is inside the workspace, where the PR under audit can edit it",
                file=path,
                hint="provision it outside the repository, or use [trust] ref + path",
            )
        anchors = load_trust_file(path)
        return dataclasses.replace(anchors, source=f"trust file {path} ({via})", origin=via)
    trust = policy.config.trust
    if not trust.ref or not trust.path:
        return NO_ANCHORS
    if not policy.protected:
        return Anchors(
            source="none: [trust] ref is ignored while the policy is unprotected "
            "(an unprotected gates.toml could name any ref)"
        )
    return _anchors_at_ref(root, trust.ref, trust.path)


def _anchors_at_ref(root: Path, ref: str, path: str) -> Anchors:
    try:
        resolved = git.resolve_ref(root, ref, what="[trust] ref")
    except git.RefError as error:
        raise TrustError(error.message, file=root, hint=error.hint) from None
    commit = resolved.commit
    source = f"{resolved.refname}:{path}"
    text = git.read_blobs(root, commit, [path])[path]
    if text is None:
        raise TrustError("trust file not found at that ref", file=source)
    folder = path.rsplit("/", 1)[0] + "/" if "/" in path else ""

    def read_key(relpath: str) -> bytes | None:
        return git.read_blobs(root, commit, [f"{folder}{relpath}"])[f"{folder}{relpath}"]

    anchors = parse_trust(text, source, read_key)
    changes, invalid = [], []
    worktree_copy = root / path
    try:
        proposed = worktree_copy.read_bytes() if worktree_copy.is_file() else text
    except OSError as exc:
        proposed = None
        invalid.append(f"{path}: cannot be read in the worktree: {exc.strerror}")
    if proposed is not None and proposed != text:
        problem = _trust_problem(root, proposed, path)
        if problem is None:
            changes.append(f"{path}: changed in the worktree: {PROPOSED}")
        else:
            invalid.append(f"{path}: changed in the worktree and does not load: {problem}")
    changes += [f"{line}: {INVALID}" for line in invalid]
    return dataclasses.replace(
        anchors,
        source=f"{source} at {commit}",
        proposed_changes=tuple(changes),
        invalid_changes=tuple(invalid),
        origin=f"`{source}`",
    )


def _trust_problem(root: Path, text: bytes, path: str) -> str | None:
    """Why the worktree's copy of the trust file would not load once merged, or None."""
    folder = (root / path).parent

    def read_key(relpath: str) -> bytes | None:
        key = folder / relpath
        try:
            return key.read_bytes() if key.resolve().is_relative_to(root.resolve()) else None
        except OSError:
            return None

    try:
        parse_trust(text, path, read_key)
    except TrustError as exc:
        return exc.message
    return None


def governed(workspace: Workspace, policy: Policy) -> Workspace:
    """The workspace as the policy in force sees it: its settings, with the worktree's pin."""
    return Workspace(workspace.root, policy.config, workspace.variables)
