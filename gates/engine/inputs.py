"""The inputs of one command: the workspace, the policy in force and what is read from it
once (its contracts, the results contract's params, the declared entrypoints, the naming
rules), the caches every reader of the command shares (opened once), and the command's
`Invocation` (key, trust file, policy ref, checker mode, progress, launcher, sandbox).

Built once per command (`audit_inputs` with an explicit policy, or `load_inputs`, which
resolves the policy the invocation names) and passed down; nothing below rebuilds it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from gates.contracts import results_schema_and_provenance as results_contract
from gates.contracts.model import EvaluationError, ParsedParams
from gates.core.hashing import Caches, StatCache
from gates.core.invocation import Invocation
from gates.freeze.check import FreezeInputs, FreezeReport, evaluate_freeze
from gates.naming.rules import RuleSet
from gates.policy.contract_files import ContractFileError, ContractSpec
from gates.policy.in_force import Policy, governed, load_policy
from gates.receipts.binding import DeclaredEntrypoint, Entrypoints, entrypoints_in_force
from gates.sandbox import SandboxHost
from gates.workspace.repository import Workspace, open_workspace

RESULTS_CHECK = results_contract.CHECK


@dataclass(frozen=True)
class AuditInputs:
    """Everything a command judges with, read once. ``workspace`` carries the settings of
    the policy in force (with the worktree's pin)."""

    workspace: Workspace
    policy: Policy
    caches: Caches
    invocation: Invocation = field(default_factory=Invocation)

    @property
    def root(self) -> Path:
        return self.workspace.root

    @property
    def cache(self) -> StatCache:
        """The command's one stat cache."""
        return self.caches.files

    @property
    def freeze_inputs(self) -> FreezeInputs:
        """What judging the freeze reads besides the repository, for this command."""
        return FreezeInputs(self.caches.blobs, self.invocation.pre_commit_store)

    @property
    def sandbox_host(self) -> SandboxHost:
        """What a sandbox of this command is made from (its invocation, its stat cache)."""
        return SandboxHost.of(self.invocation, self.cache)

    def judge_freeze(self) -> FreezeReport:
        """The source freeze of the workspace now."""
        return evaluate_freeze(self.root, self.workspace.config, self.freeze_inputs)

    @property
    def contracts(self) -> list[tuple[Path, ContractSpec]]:
        return self.policy.contracts()[0]

    @property
    def file_errors(self) -> list[ContractFileError]:
        return self.policy.contracts()[1]

    @property
    def results_spec(self) -> ContractSpec | None:
        found = self.policy.contract(RESULTS_CHECK)
        return found[1] if found else None

    @functools.cached_property
    def _results(self) -> tuple[results_contract.Params | None, str | None]:
        spec = self.results_spec
        if spec is None:
            return None, None
        try:
            return results_contract.parse_params(spec.params), None
        except EvaluationError as exc:
            return None, f"{spec.id}: {exc}"

    @property
    def results_params(self) -> results_contract.Params | None:
        """The results contract's params (None without one, or when they do not parse)."""
        return self._results[0]

    @property
    def parsed_results(self) -> ParsedParams | None:
        """The results contract's params with the table they were parsed from, for its
        evaluator (None without one, or when they do not parse)."""
        spec, params = self.results_spec, self.results_params
        if spec is None or params is None:
            return None
        return ParsedParams(spec.params, params)

    @property
    def results_error(self) -> str | None:
        """Why the results contract's params do not parse (`<id>: <problem>`), or None."""
        return self._results[1]

    @functools.cached_property
    def declared_entrypoints(self) -> tuple[DeclaredEntrypoint, ...]:
        """Each side's declared entrypoint with its scripts outside the pinned tree (none
        without a results contract whose params parse)."""
        params = self.results_params
        if params is None:
            return ()
        return results_contract.declared_entrypoints(self.workspace, params)

    @functools.cached_property
    def _entrypoints(self) -> tuple[Entrypoints, list[str]]:
        return entrypoints_in_force(self.declared_entrypoints)

    @property
    def entrypoints(self) -> Entrypoints:
        """framework -> the declared entrypoint whose signed runs alone count."""
        return self._entrypoints[0]

    @property
    def voided_entrypoints(self) -> list[str]:
        """Why a side's entrypoint binds nothing (a script outside the pinned tree)."""
        return list(self._entrypoints[1])

    def ruleset(self) -> tuple[RuleSet, str | None]:
        """The naming rules of the policy in force and the contract file they come from."""
        return self.policy.ruleset()


def audit_inputs(
    workspace: Workspace, policy: Policy, invocation: Invocation | None = None
) -> AuditInputs:
    """The inputs of one command under an explicit ``policy``, with the caches the
    ``invocation`` allows opened once."""
    invocation = invocation or Invocation()
    caches = Caches.open(invocation.caching, workspace.root)
    return AuditInputs(governed(workspace, policy), policy, caches, invocation)


def load_inputs(
    workspace: Workspace,
    invocation: Invocation | None = None,
    *,
    with_anchors: bool = True,
) -> AuditInputs:
    """The inputs under the policy the ``invocation`` names: its policy ref (--policy-ref,
    else GATES_POLICY_REF), else gates.toml's [policy] ref; its trust file (--trust, else
    GATES_TRUST). With no ref at all the policy is the worktree's own, which
    ``inputs.policy.protected`` is False for and ``describe()`` calls UNPROTECTED.
    `Invocation()` names none of them: the worktree's policy, no trust file."""
    invocation = invocation or Invocation()
    policy = load_policy(
        workspace.root,
        workspace.config,
        ref=invocation.policy_ref,
        trust=invocation.trust,
        with_anchors=with_anchors,
    )
    return audit_inputs(workspace, policy, invocation)


def reopened(inputs: AuditInputs) -> AuditInputs:
    """The inputs of a next command on the same workspace under the same invocation: its
    gates.toml and policy read again, its caches opened again (the demo runs one command
    after another)."""
    workspace = open_workspace(inputs.root, inputs.invocation.environment)
    return load_inputs(workspace, inputs.invocation)
