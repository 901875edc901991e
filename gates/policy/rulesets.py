"""Where naming rules come from: a contract file given with --rules, or the contract of the
check in force (each contract compares through its own rules)."""

from __future__ import annotations

from pathlib import Path

from gates.core.errors import ConfigError
from gates.naming.rulefile import ContractRules, ruleset_from_params
from gates.naming.rules import RuleSet
from gates.policy.contract_files import load_contract
from gates.policy.in_force import Policy


def load_ruleset(path: Path) -> RuleSet:
    """The naming rules of one contract file."""
    return load_rules(path, str(path)).ruleset


def load_rules(path: Path, shown: str) -> ContractRules:
    """The naming rules and params of one contract file (``shown`` names it in reports)."""
    try:
        spec = load_contract(path)
    except OSError as exc:
        raise ConfigError(
            f"cannot read the rules contract: {exc.strerror}",
            file=shown,
            hint="give --rules a contract file (TOML) holding params.rules or params.aoa",
        ) from None
    except ValueError as exc:
        raise ConfigError(str(exc), file=shown) from None
    ruleset = ruleset_from_params(spec.params, shown)
    return ContractRules(ruleset, shown, dict(spec.params), spec.check)


def rules_for(
    policy: Policy, check: str, given: str | None, cwd: Path, root: Path
) -> ContractRules:
    """The rules a command compares through: the contract file ``given`` with --rules (a
    path relative to ``cwd``, or absolute; inside the workspace or not, every command
    alike), else the contract of ``check`` in force. The source is named workspace-relative
    when the file lies in the workspace ``root``."""
    if given is None:
        found = policy.rules(check)
        if found.source is None:
            return found
        shown = _shown(Path(found.source), root, found.source)
        return ContractRules(found.ruleset, shown, found.params, found.check)
    path = Path(given) if Path(given).is_absolute() else cwd / given
    return load_rules(path, _shown(path, root, given))


def _shown(path: Path, root: Path, given: str) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except (OSError, ValueError):
        return given if Path(given).is_absolute() else str(path)
