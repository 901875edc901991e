"""`gates run`'s pre-flight: before anything is launched, what would make the run's outputs
count 0 under the policy in force, each with its fix.

The checks are the audit's own rules, asked early: the argv against the side's declared
entrypoint (`gates.receipts.binding.argv_matches`), the profile against every contract's required
profile (`gates.engine.audit.profile_mismatch`) and against what this machine captures
(`gates.receipts.binding.environment_problems`: device, world size), a signing key that the trust
anchors in force accept for the side, a framework for the recorder, and the sandbox where
the policy requires one. On GLM-5.2 a run found wanting at audit is days of GPU time lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gates.engine.audit import profile_difference
from gates.engine.inputs import AuditInputs
from gates.policy.contract_files import ContractSpec
from gates.receipts.binding import argv_matches, environment_problems
from gates.receipts.kinds import RUN_OUTPUT_KINDS, Framework
from gates.trust.anchors import Anchors
from gates.trust.keys import SigningKey


@dataclass(frozen=True)
class Problem:
    """One reason the run's outputs would count 0, and what to do about it."""

    cause: str  # entrypoint, profile, device, key, trust, framework, model_config, sandbox
    message: str
    fix: str


@dataclass(frozen=True)
class Preflight:
    problems: tuple[Problem, ...]
    profile: dict[str, str]  # the profile to run with: given, else the contract's
    filled_from: str | None  # the contract whose required profile filled it


@dataclass(frozen=True)
class Launch:
    """What `gates run` is about to do, as the pre-flight needs it."""

    command: tuple[str, ...]
    cwd: str  # workspace-relative folder the command runs from
    framework: Framework | None
    profile: dict[str, str]  # as given on the command line (may be empty)
    model_config: Path | None
    sandboxed: bool = True  # False: --no-sandbox


def full_profile(given: dict[str, str], device: str, world: str | None) -> dict[str, str]:
    """The manifest's ten profile fields: given ones win, the rest get stated defaults (the
    world size from ``world``, the launcher's PADDLE_TRAINERS_NUM, else 1)."""
    defaults = {
        "name": "default",
        "mode": "train",
        "device": device,
        "dtype": "float32",
        "tp": "1",
        "pp": "1",
        "ep": "1",
        "etp": "1",
        "sp": "false",
        "world": world if world is not None and world.isdigit() else "1",
    }
    return {**defaults, **given}


def _normalized(profile: Mapping[str, str | int | bool]) -> dict[str, str]:
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in profile.items()}


def run_contracts(loaded: list[tuple[Path, ContractSpec]]) -> list[ContractSpec]:
    """The contracts in force that look at what a training run writes."""
    return [spec for _, spec in loaded if set(spec.evidence_kinds) & RUN_OUTPUT_KINDS]


def chosen_profile(
    given: dict[str, str], contracts: list[ContractSpec], results: ContractSpec | None
) -> tuple[dict[str, str], str | None]:
    """The profile given, or (none given) the results contract's required one."""
    if given:
        return dict(given), None
    source = results or next((spec for spec in contracts if spec.profile), None)
    if source is None or not source.profile:
        return {}, None
    return _normalized(source.profile), source.id


def _entrypoint_problems(inputs: AuditInputs, launch: Launch) -> list[Problem]:
    if launch.framework is None:
        return []  # said once, by the framework check
    results = inputs.results_spec
    declared_by_side, voided = inputs.entrypoints, inputs.voided_entrypoints
    contract = results.id if results else "the results contract"
    problems = [
        Problem("entrypoint", message, f"fix the entrypoint in {contract} on the policy ref")
        for message in voided
    ]
    declared = declared_by_side.get(launch.framework.value)
    if declared is None:
        if not voided:
            side = "reference" if launch.framework is Framework.TORCH else "candidate"
            problems.append(
                Problem(
                    "entrypoint",
                    f"{contract} declares no {launch.framework.value} entrypoint, so no "
                    f"{launch.framework.value} run can be formal",
                    f'declare params.{side}_entrypoint (e.g. ["python", "train.py"]) in '
                    "the contract on the policy ref",
                )
            )
    elif not argv_matches(launch.command, launch.cwd, declared):
        problems.append(
            Problem(
                "entrypoint",
                f"command {' '.join(launch.command)!r} is not the declared "
                f"{launch.framework.value} entrypoint {' '.join(declared)!r}",
                f"gates run --framework {launch.framework.value} -- {' '.join(declared)} ...",
            )
        )
    return problems


def _profile_problems(
    contracts: list[ContractSpec], profile: dict[str, str], environment: Mapping[str, str]
) -> list[Problem]:
    problems = []
    for spec in contracts:
        if not spec.profile:
            continue
        mismatch = profile_difference(_normalized(spec.profile), profile)
        if mismatch:
            wanted = " ".join(f"--profile {k}={v}" for k, v in _normalized(spec.profile).items())
            problems.append(
                Problem(
                    "profile",
                    f"{spec.id} requires another profile: {mismatch}",
                    f"run with {wanted} (or no --profile: gates fills the contract's)",
                )
            )
    for message in environment_problems(profile, environment, None):
        if "world=" in message:
            fix = (
                "declare the world size gates run sees (--profile world=N), or set "
                "PADDLE_TRAINERS_NUM for gates run itself"
            )
        else:
            fix = (
                "run it on a machine with a CUDA build of the framework, or declare "
                "--profile device=cpu (and a contract that requires it)"
            )
        problems.append(Problem("device", message, fix))
    return problems


def _key_problems(
    key: SigningKey | None, anchors: Anchors, framework: Framework | None
) -> list[Problem]:
    if key is None:
        return [
            Problem(
                "key",
                "no signing key (GATES_SIGNING_KEY is not set): every output would be "
                "unsigned, probe at most",
                "gates key new ~/.config/gates/ci.key && export "
                "GATES_SIGNING_KEY=~/.config/gates/ci.key, and add `gates key pub` of it to "
                "the trust file",
            )
        ]
    signer = anchors.by_keyid(key.keyid)
    side = framework.value if framework else None
    add = f"add `gates key pub {key.path}` to the trust file ({anchors.source})"
    if signer is None:
        return [
            Problem(
                "trust",
                f"signing key {key.keyid[:16]}... ({key.path}) is not among the trust anchors "
                f"in force ({anchors.summary()})",
                add,
            )
        ]
    if signer.revoked:
        return [Problem("trust", f"signer {signer.name} is revoked", "sign with another key")]
    if not signer.may_attest(side):
        return [
            Problem(
                "trust",
                f"signer {signer.name} may attest {', '.join(signer.frameworks)}, not {side}",
                f'add "{side}" to its frameworks in the trust file ({anchors.source})',
            )
        ]
    return []


def _sandbox_problem(launch: Launch, required: bool) -> Problem | None:
    """A run outside the sandbox where the policy in force requires one. (A sandbox that
    cannot start stops `gates run` before the pre-flight, with its own reason.)"""
    if launch.sandboxed or not required:
        return None
    return Problem(
        "sandbox",
        "--no-sandbox: the policy in force requires the sandbox, so the outputs count probe",
        "drop --no-sandbox (docs/sandbox.md says what the sandbox needs)",
    )


def _framework_problems(launch: Launch) -> list[Problem]:
    problems = []
    if launch.framework is None:
        problems.append(
            Problem(
                "framework",
                "no --framework: the run's receipts and the recorder's env.json need the side",
                "gates run --framework torch|paddle -- ...",
            )
        )
    if launch.model_config is not None and not launch.model_config.is_file():
        problems.append(
            Problem(
                "model_config",
                f"--model-config {launch.model_config} is not a file: env.json would have no "
                "model_config_sha256",
                "give the model's config.json",
            )
        )
    return problems


def check_launch(
    inputs: AuditInputs,
    launch: Launch,
    *,
    environment: Mapping[str, str],
    device: str,
    signing_key: SigningKey | None,
) -> Preflight:
    """Every reason the launch's outputs would count 0 under the policy in force."""
    policy = inputs.policy
    loaded = inputs.contracts
    results = inputs.results_spec
    contracts = run_contracts(loaded)
    profile, filled_from = chosen_profile(launch.profile, contracts, results)
    full = full_profile(profile, device, inputs.invocation.launcher.world)
    problems = _framework_problems(launch)
    problems += _entrypoint_problems(inputs, launch)
    problems += _profile_problems(contracts, full, environment)
    problems += _key_problems(signing_key, policy.anchors, launch.framework)
    sandbox = _sandbox_problem(launch, policy.config.sandbox.required)
    if sandbox is not None:
        problems.append(sandbox)
    return Preflight(tuple(problems), profile, filled_from)


def render(preflight: Preflight, *, forced: bool, probe: bool) -> str:
    """The problems with their fixes, and what happens now."""
    lines = ["gates run: pre-flight: these would make the run's outputs count 0:"]
    for problem in preflight.problems:
        lines.append(f"  {problem.cause}: {problem.message}")
        lines.append(f"    fix: {problem.fix}")
    if forced or probe:
        why = "--force" if forced else "--probe"
        lines.append(f"running anyway ({why}): its outputs will count 0 until these are fixed")
    else:
        lines.append("nothing launched; fix these, or pass --force to run anyway")
    return "\n".join(lines)
