"""`gates demo`: the seed PR's story on the glm52-minimal example, in a temporary repository.

The policy in force is `main` (the demo's invocation names it as GATES_POLICY_REF would);
the PR is a branch off it. A demo key, written outside the repository, signs and is
trusted for both sides (as GATES_SIGNING_KEY and GATES_TRUST would); the recorded
PyTorch run ships signed with it. Every act takes that invocation as an argument: the
demo never changes the environment.

(a) The PR as it was: no pin, a lint edit in flight, manifests without a
`format` key, nothing signed: every receipt probe/0, `formal_alignment_steps = 0 / 100`.
(b) The forgery: pinned and clean, the torch losses copied over the Paddle
ones, receipted by hand (even signed), checked, and a self-made waiver: the
copies stay probe, the waiver is a proposed policy change, the verdict blocked.
(c) The trusted path: re-run the Paddle entrypoint under `gates run`, signed;
the torch side's signed recorded run; the checkers; and audit again: which
contracts discharge, and why the rest do not.
(d) Config semantics: the official config.json through the example's config
class, as the PR's review found it, then fixed.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from gates.commands.check import check_determinism, check_loss
from gates.commands.checkpoint import check as check_checkpoint
from gates.commands.demo.config_act import config_step
from gates.commands.demo.profiles import PROFILE
from gates.commands.demo.real_act import real_port_step
from gates.commands.demo.resume_act import resume_guard_step
from gates.commands.demo.tensors_act import probe_step, tensor_step
from gates.commands.freeze import pin as pin_command
from gates.commands.replay import ReplayRequest
from gates.commands.replay import replay as replay_command
from gates.commands.run import RunRequest
from gates.commands.run import run as run_command
from gates.commands.steps import render_text as render_steps
from gates.core import exitcodes
from gates.core.echo import Echo, Output
from gates.core.invocation import Given, Invocation
from gates.core.resources import example_dir
from gates.engine.audit import run_audit
from gates.engine.inputs import AuditInputs, load_inputs
from gates.engine.inputs import reopened as _again
from gates.receipts.create import ReceiptRequest, create_receipt
from gates.receipts.model import ArtifactKind, EvidenceClass, Framework
from gates.replay.commitments import loss_bits
from gates.reporters import REPORTERS
from gates.training.env import cpu_kernels
from gates.trust.keys import configured_key
from gates.workspace.repository import open_workspace

_IDENTITY = {
    "GIT_AUTHOR_NAME": "gates demo",
    "GIT_AUTHOR_EMAIL": "demo@gates.invalid",
    "GIT_COMMITTER_NAME": "gates demo",
    "GIT_COMMITTER_EMAIL": "demo@gates.invalid",
    # fixed dates: the example's code commit has one id wherever it is laid out, so the
    # recorded torch run (signed at that commit by sign_recorded.py) finds it in the clone
    "GIT_AUTHOR_DATE": "2026-08-19T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2026-08-19T00:00:00+00:00",
}
TORCH_ENTRYPOINT = ("python", "model/train_torch.py")
DEMO_KEYS = "demo-keys"
POLICY_REF = "main"
PR_BRANCH = "glm52-bit-exact-alignment"
REPEATS = "experiments/e053-moe-determinism/runs/paddle_det"
STALE_MANIFEST = "experiments/e055-acceptance-oracle-20260819/manifest.json"
RECORDED = [
    ("manifest.json", ArtifactKind.MANIFEST),
    ("env.json", ArtifactKind.ENV),
    ("loss.json", ArtifactKind.LOSS),
    ("raw_loss.jsonl", ArtifactKind.RAW_LOSS),
]


_CLOSING = (
    "\nThe freeze contract discharges and every receipt is formal: each chains to a signed"
    " run of its side's declared entrypoint. The manifest contract discharges once every side"
    " has run under `gates run` (the recorded torch run keeps its old manifest without"
    " `format`). The acceptance oracle stays discharging: its schema half holds on both sides,"
    " but torch and paddle losses are bit-identical only for the first steps, and the tensor"
    " dumps locate the first differing tensor at step 1. The tensor inventory explains every"
    " naming and layout difference by a rule, and the five MTP indexer tensors the candidate"
    " leaves out by the consumption probe; every other tensor's content is equal through the"
    " rules, so it discharges. The verdict stays"
    " blocked: it never turns to pass on missing evidence, on copies, or on a waiver the PR"
    " wrote itself."
)


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(root), *args],
        check=True,
        capture_output=True,
        env={**os.environ, **_IDENTITY},
    )


def _receipt(
    inputs: AuditInputs,
    kind: ArtifactKind,
    subjects: tuple[str, ...],
    framework: Framework | None,
) -> str:
    request = ReceiptRequest(
        kind=kind,
        subjects=subjects,
        framework=framework,
        profile=PROFILE,
        requested_class=EvidenceClass.FORMAL,
        overwrite=True,
    )
    receipt, _ = create_receipt(
        inputs.workspace,
        request,
        signing_key=configured_key(inputs.invocation.signing_key),
        freeze_inputs=inputs.freeze_inputs,
    )
    return f"{receipt.evidence_class.value}/{receipt.formal_weight}"


def _receipt_recorded(inputs: AuditInputs, side: str, echo: Echo) -> None:
    stamps = [
        f"{name} {_receipt(inputs, kind, (f'results/{side}/{name}',), Framework(side))}"
        for name, kind in RECORDED
    ]
    echo(f"  results/{side} (recorded run, receipted by hand): " + ", ".join(stamps))


def _receipt_repeats(inputs: AuditInputs) -> None:
    for repeat in (1, 2, 3):
        path = f"{REPEATS}/repeat-{repeat}/raw_loss.jsonl"
        _receipt(inputs, ArtifactKind.RAW_LOSS, (path,), Framework.PADDLE)


#: The kernels (`cpu_kernels`) of the CPUs on which the example's recorded bytes were seen to
#: reproduce bit for bit: Intel with AVX-512 and VNNI (Cascade Lake, where they were
#: recorded), and an AMD EPYC that shows its guests AVX2 and FMA only. Elsewhere MKL and
#: torch may pick other kernels, and on two CPUs the recorded torch run's last bits were not
#: reproduced: a Sapphire Rapids (AMX, AVX512-FP16) and an Ice Lake (IFMA, VBMI); no cap
#: through MKL_CBWR, ONEDNN_MAX_CPU_ISA or ATEN_CPU_CAPABILITY restored them on the first.
REPRODUCING_KERNELS = (
    frozenset(
        {
            "vendor:GenuineIntel",
            *("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"),
        }
    ),
    frozenset({"vendor:AuthenticAMD", "avx", "avx2", "fma"}),
)


def kernels_unlike_recording(kernels: str | None) -> list[str] | None:
    """How ``kernels`` (`cpu_kernels`) differ from the nearest of `REPRODUCING_KERNELS`:
    ``+x`` for what they have beyond it (another vendor among it), ``-x`` for what they lack;
    None where the CPU's kernels are not known. Empty only on one of those sets itself."""
    if kernels is None:
        return None
    found = set(kernels.split())
    return min((_unlike(found, known) for known in REPRODUCING_KERNELS), key=len)


def kernels_note(unlike: list[str] | None) -> str | None:
    """What the demo says when the recorded torch run's replay fails here, given how this
    CPU's kernels differ from those its bytes reproduce on (`kernels_unlike_recording`):
    nothing on one of those (a failure there is not the kernels')."""
    if unlike == []:
        return None
    shown = "not known" if unlike is None else f"against those it reproduces on: {' '.join(unlike)}"
    return (
        f"note: the recorded torch run was made on another CPU (this one's kernels {shown});"
        " torch picks other kernels here whose last bits differ: bit-exact replay holds on"
        " the run's own build and hardware only"
    )


def _unlike(found: set[str], known: frozenset[str]) -> list[str]:
    beyond, lacking = sorted(found - known), sorted(known - found)
    return [f"+{name}" for name in beyond] + [f"-{name}" for name in lacking]


def _can_run(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _run(
    inputs: AuditInputs, side: str, out: str | None, echo: Echo, *, outputs: bool = True
) -> None:
    declared = [(ArtifactKind.CHECKPOINT, f"results/{side}/checkpoint")] if outputs else []
    request = RunRequest(
        command=[sys.executable, f"model/train_{side}.py"],
        framework=Framework(side),
        probe=False,
        out=out,
        outputs=declared,
        profile=PROFILE,
        clean=True,  # the recorded Paddle run the example ships is replaced, not added to
    )
    lines: list[str] = []
    code = run_command(_again(inputs), request, cwd=inputs.root, echo=lines.append)
    counted = [line for line in lines if ": counts" in line]
    counting = sum(1 for line in counted if ": counts (" in line)
    target = out or f"results/{side}"
    echo(
        f"  gates run {side} -> {target}: exit {code}, {counting} of {len(counted)} receipts count"
    )
    for line in counted:
        if ": counts 0" in line:
            echo(f"    {line}")


def _replay(inputs: AuditInputs, echo: Echo) -> None:
    """A verifier re-executes two windows of each side's signed run, drawn from its seed: the
    Paddle run made here and the recorded torch run, each by its own entrypoint."""
    power = ""
    for side in ("paddle", "torch"):
        if not _can_run(side):
            echo(f"  {side} is not installed here: results/{side} is not replayed")
            continue
        lines: list[str] = []
        request = ReplayRequest(f"results/{side}", seed="demo-ci-4711", windows=2, window_steps=1)
        code = replay_command(
            _again(inputs), request, cwd=inputs.root, out=Output("json", lines.append)
        )
        report = json.loads(lines[-1])
        windows = ", ".join(
            f"step {w['first']} (from the state after {w['resumed_from']}): {w['result']}"
            for w in report["windows"]
        )
        echo(f"  gates replay results/{side} --seed demo-ci-4711: exit {code}; {windows}")
        if side == "torch" and code != 0:
            note = kernels_note(kernels_unlike_recording(cpu_kernels()))
            if note:
                echo(f"  {note}")
        power = report["detection_power"]
    echo(f"  {power}")
    _forged_replay(inputs, echo)


FORGED = "experiments/forged-run"


def _forged_replay(inputs: AuditInputs, echo: Echo) -> None:
    """The red-team route with the stolen key: the Paddle run's loss at step 43 edited by
    one bit (in loss.json, raw_loss.jsonl and the commitments alike) and signed again as a
    run of the declared entrypoint. Every signature checks; a window over step 43 does not."""
    root = inputs.root
    shutil.copytree(root / "results/paddle", root / FORGED)
    for name in ("replay.json", "replay.receipt.json"):
        (root / FORGED / name).unlink(missing_ok=True)
    commitments = json.loads((root / FORGED / "commitments.json").read_text())
    forged = math.nextafter(commitments["steps"][43]["loss"], math.inf)
    commitments["steps"][43].update(loss=forged, loss_bits=loss_bits(forged))
    (root / FORGED / "commitments.json").write_text(json.dumps(commitments) + "\n")
    losses = json.loads((root / FORGED / "loss.json").read_text())["losses"]
    losses[42] = forged
    (root / FORGED / "loss.json").write_text(json.dumps({"losses": losses}) + "\n")
    (root / FORGED / "raw_loss.jsonl").write_text(
        "".join(json.dumps({"step": i, "loss": v}) + "\n" for i, v in enumerate(losses, 1))
    )
    run = json.loads((root / "results/paddle/run.receipt.json").read_text())
    outputs = tuple(FORGED + s["path"].removeprefix("results/paddle") for s in run["subjects"])
    create_receipt(
        inputs.workspace,
        ReceiptRequest(
            kind=ArtifactKind.RUN,
            subjects=outputs,
            framework=Framework.PADDLE,
            profile=PROFILE,
            command=tuple(run["provenance"]["command"]),
            output=f"{FORGED}/run.receipt.json",
            overwrite=True,
            run={
                k: run["provenance"]["run"][k]
                for k in ("cwd", "startedAt", "endedAt", "exitStatus", "signal")
            },
        ),
        signing_key=configured_key(inputs.invocation.signing_key),
        freeze_inputs=inputs.freeze_inputs,
    )
    lines: list[str] = []
    request = ReplayRequest(FORGED, seed="demo-ci-4711", windows=0, explicit=("42:44",))
    code = replay_command(_again(inputs), request, cwd=root, out=Output("json", lines.append))
    window = json.loads(lines[-1])["windows"][0]
    echo(
        f"  forged and signed with the stolen key: {FORGED} (step 43's loss one bit up); "
        f"gates replay --window 42:44: exit {code}, {window['result']} at step "
        f"{window['mismatch']['step']}: {window['mismatch']['what']}"
    )
    shutil.rmtree(root / FORGED)


def _audit(inputs: AuditInputs, echo: Echo) -> None:
    result = run_audit(_again(inputs))
    echo(REPORTERS["text"](result))
    echo("")
    echo(render_steps(result.alignment, 4))


def _state_of_the_pr(root: Path, invocation: Invocation, echo: Echo) -> AuditInputs:
    echo("\n== (a) the PR as it was: no pin, a lint edit in flight, manifests without `format`")
    with (root / "model/train_paddle.py").open("a", encoding="utf-8") as handle:
        handle.write("# style: apply GLM lint formatting\n")
    inputs = load_inputs(open_workspace(root, invocation.environment), invocation)
    echo("  results/torch: the recorded torch run, signed where it ran (sign_recorded.py)")
    unsigned = dataclasses.replace(invocation, signing_key=None)  # the PR's own: unsigned
    pr_own = dataclasses.replace(inputs, invocation=unsigned)
    _receipt_recorded(pr_own, "paddle", echo)
    _receipt_repeats(pr_own)
    _audit(inputs, echo)
    return inputs


def _forgery(inputs: AuditInputs, echo: Echo) -> None:
    root = inputs.root
    echo(
        "\n== (b) the forgery: torch losses copied over the Paddle run, receipted by hand "
        "(signed, even), and a self-made waiver"
    )
    for name in ("loss.json", "raw_loss.jsonl"):
        shutil.copy(root / "results/torch" / name, root / "results/paddle" / name)
    _receipt_recorded(inputs, "paddle", echo)
    (root / "contracts/mtp.waiver.toml").write_text(
        'contract = "contract_environment.tensor-inventory"\nowner = "anyone"\n'
        'reason = "MTP indexer later"\nexpires = 2099-12-31\n'
    )
    result = run_audit(_again(inputs))
    judged = {j.path: j for j in result.receipts}
    loss = judged["results/paddle/loss.receipt.json"]
    echo(f"  results/paddle/loss.receipt.json: {loss.status.value}: {loss.reason}")
    echo(f"  formal_alignment_steps = {result.formal_alignment_steps} / {result.required_steps}")
    echo(f"  waivers in force: {len(result.waivers)}")
    echo("".join(f"  proposed: {change}\n" for change in result.proposed_changes).rstrip())
    echo(f"  verdict={result.verdict}")
    (root / "contracts/mtp.waiver.toml").unlink()
    _git(root, "checkout", "--", "results/paddle")
    for stale in (root / "results/paddle").glob("*.receipt.json"):
        stale.unlink()


def _clean(inputs: AuditInputs, echo: Echo) -> AuditInputs:
    root = inputs.root
    pin_command(inputs.workspace, "HEAD", echo=echo)
    _git(root, "checkout", "--", "model")
    _git(root, "rm", "-q", STALE_MANIFEST)
    _git(root, "commit", "-q", "-m", "drop the e055 bench manifest: no format key, superseded")
    return _again(inputs)


def _rerun(inputs: AuditInputs, echo: Echo) -> None:
    root = inputs.root
    echo("\n== (c) the trusted path: signed runs of the declared entrypoints")
    # the reference side is the recorded torch run, signed where it ran, whether or not
    # torch is installed here (where it is, its windows are replayed below)
    judged = {j.path: j for j in run_audit(_again(inputs)).receipts}
    run = judged.get("results/torch/run.receipt.json")
    status = f"{run.status.value} ({run.reason})" if run else "missing"
    echo(f"  torch: its recorded run, signed where it ran: {status}")
    if _can_run("paddle"):
        _run(inputs, "paddle", None, echo)
    if _can_run("paddle"):
        _replay(inputs, echo)
        for repeat in (1, 2, 3):
            _run(inputs, "paddle", f"{REPEATS}/repeat-{repeat}", echo, outputs=False)
    else:
        _receipt_repeats(inputs)
    quiet: list[str] = []
    runs = tuple(f"{REPEATS}/repeat-{repeat}" for repeat in (1, 2, 3))
    check_determinism(
        _again(inputs),
        runs,
        output="outputs/determinism_check.receipt.json",
        cwd=root,
        out=Output("text", quiet.append),
    )
    check_loss(
        _again(inputs),
        "results/torch/loss.json",
        "results/paddle/loss.json",
        required_steps=100,
        bit_exact=True,
        output="experiments/e055-acceptance-oracle/checker_run.receipt.json",
        cwd=root,
        out=Output("text", quiet.append),
    )
    check_checkpoint(
        _again(inputs),
        "results/paddle/checkpoint",
        against="results/torch/checkpoint",
        rules=None,
        shard_range=None,
        threads=None,
        output="outputs/checkpoint_check.receipt.json",
        cwd=root,
        out=Output("text", quiet.append),
    )
    echo("  checkers: gates check determinism, gates check loss, gates check checkpoint --against")
    tensor_step(_again(inputs), echo, PROFILE)
    probe_step(_again(inputs), echo)
    _audit(inputs, echo)


def lay_out(root: Path, *, evidence: bool = True, example: Path | None = None) -> None:
    """The example (``example``, default glm52-minimal) as a git repository on `main`, the
    way the demo (and the signing of the recorded run) lays it out; its demo keys stay out
    of it. The code is one commit of its own (the same id on every machine, the one the
    recorded torch run was made at); the recorded evidence follows in a second commit, or
    stays uncommitted (``evidence=False``, for sign_recorded.py)."""
    shutil.copytree(
        example or example_dir(), root, ignore=shutil.ignore_patterns("__pycache__", DEMO_KEYS)
    )
    _git(root, "init", "-q", "-b", POLICY_REF)
    (root / ".gitignore").write_text(".gates/\n__pycache__/\n")
    locations = open_workspace(root).config.evidence.locations
    _git(root, "add", "-A", "--", ".", *(f":(exclude){path}" for path in locations))
    _git(root, "commit", "-q", "-m", "glm: map official RoPE semantics")
    if evidence:
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", "results: the recorded runs")


def _trust_demo_key(folder: Path, base: Invocation) -> Invocation:
    """The demo key, copied outside the repository (mode 0600), signing and trusted for
    both sides, under the policy ref `main`: ``base`` with the demo's key, trust file and
    policy ref."""
    keys = folder / "keys"
    keys.mkdir()
    for name in ("demo.key", "demo.pub"):
        shutil.copy(example_dir() / DEMO_KEYS / name, keys / name)
    (keys / "demo.key").chmod(0o600)
    trust = keys / "trust.toml"
    trust.write_text(
        '[[signers]]\nname = "demo"\npublic_key = "demo.pub"\n'
        'frameworks = ["torch", "paddle", "replay"]\n'
    )
    return dataclasses.replace(
        base,
        signing_key=keys / "demo.key",
        trust=Given(trust, "gates demo"),
        policy_ref=Given(POLICY_REF, "gates demo"),
    )


def demo(invocation: Invocation, *, keep: bool, echo: Echo) -> int:
    """The story, told under ``invocation`` (the command's: its caches, progress, sandbox)
    with the demo's own key, trust file and policy ref."""
    folder = Path(tempfile.mkdtemp(prefix="gates-demo-"))
    root = folder / "glm52-port"
    try:
        lay_out(root)
        _git(root, "checkout", "-q", "-b", PR_BRANCH)
        invocation = _trust_demo_key(folder, invocation)
        echo(f"== the glm52-minimal example, as a git repository in {root}")
        echo(
            f"   policy in force: {POLICY_REF}; demo key trusted for torch, paddle and replay "
            f"({json.dumps('keys/trust.toml')}, outside the repository)"
        )
        inputs = _state_of_the_pr(root, invocation, echo)
        inputs = _clean(inputs, echo)
        _forgery(inputs, echo)
        resume_guard_step(
            root,
            invocation,
            git=_git,
            profile=PROFILE,
            can_run_paddle=_can_run("paddle"),
            echo=echo,
        )
        _rerun(inputs, echo)
        config_step(root, invocation, echo=echo)
        echo(_CLOSING)
        real_port_step(folder, invocation, lay_out=lay_out, git=_git, branch=PR_BRANCH, echo=echo)
        return exitcodes.OK
    finally:
        if keep:
            echo(f"\n(workspace kept in {root})")
        else:
            shutil.rmtree(folder, ignore_errors=True)
