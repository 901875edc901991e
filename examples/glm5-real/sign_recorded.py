#!/usr/bin/env python3
"""Sign the recorded reference run of this example, as the machine that ran it would have.

    python examples/glm5-real/sign_recorded.py [--key KEYFILE]

The transformers side was recorded on a machine with torch and transformers (generate.py).
This writes its manifest, its run attestation and the receipts of its outputs into
results/torch/, signed with the demo key (examples/glm52-minimal/demo-keys/demo.key,
trusted by `gates demo` only), exactly as `gates run --framework torch -- python
model/train_torch.py` signs a run: the argv of the declared entrypoint, its exit status and
environment as recorded, the digest of every output, and the source tree of the example as
`gates demo` lays it out. Rerun it after any change of the example's source files; a test
fails until you do.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from gates.commands.demo import PROFILE, TORCH_ENTRYPOINT, lay_out  # noqa: E402
from gates.commands.freeze import pin  # noqa: E402
from gates.core.hashing import StatCache  # noqa: E402
from gates.receipts.create import ReceiptRequest, create_receipt  # noqa: E402
from gates.receipts.model import ArtifactKind, Framework  # noqa: E402
from gates.receipts.run_stamp import MANIFEST_FORMAT, manifest_profile  # noqa: E402
from gates.tensors.layout import TENSORS_FOLDER, dump_files  # noqa: E402
from gates.trust.keys import load_key  # noqa: E402
from gates.workspace.repository import open_workspace  # noqa: E402

KEY = HERE.parent / "glm52-minimal" / "demo-keys" / "demo.key"
SIDE = "results/torch"
OUTPUTS = {
    "manifest.json": ArtifactKind.MANIFEST,
    "env.json": ArtifactKind.ENV,
    "loss.json": ArtifactKind.LOSS,
    "raw_loss.jsonl": ArtifactKind.RAW_LOSS,
    "checkpoint/model.safetensors": ArtifactKind.CHECKPOINT,
}
COMMITMENTS = "commitments.json"
RECORDED_AT = ("2026-12-04T18:40:00Z", "2026-12-04T18:40:14Z")  # the recorded run's clock


def _environment(env: dict[str, object]) -> dict[str, str]:
    return {k: str(v) for k, v in env.items() if isinstance(v, str | int | bool)}


def _manifest(head: str) -> dict[str, object]:
    """What `gates run` writes as the manifest of such a run, for the recorded one."""
    return {
        "format": MANIFEST_FORMAT,
        "run_id": "recorded-torch",
        "entrypoint": " ".join(TORCH_ENTRYPOINT),
        "profile": manifest_profile(PROFILE),
        "command": list(TORCH_ENTRYPOINT),
        "exit_status": 0,
        "signal": None,
        "interrupted_by": [],
        "started_at": RECORDED_AT[0],
        "duration_s": 14.0,
        "host": "recorded",
        "rank_environment": {},
        "git_head": head,
        "freeze_before": "pass",
        "freeze_after": "pass",
        "probe_reasons": [],
        "framework": "torch",
    }


def _files(root: Path, folder: str, pattern: str) -> tuple[str, ...]:
    return tuple(p.relative_to(root).as_posix() for p in sorted((root / folder).glob(pattern)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--key", type=Path, default=KEY)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        key_copy = Path(folder) / "demo.key"
        shutil.copy(args.key, key_copy)
        key_copy.chmod(0o600)
        key = load_key(key_copy)
        root = Path(folder) / "glm5-port"
        lay_out(root, evidence=False, example=HERE)  # the run was made at the code commit
        pin(open_workspace(root), "HEAD", echo=lambda _: None)
        workspace = open_workspace(root)
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        manifest = json.dumps(_manifest(head), indent=2) + "\n"
        (root / SIDE / "manifest.json").write_text(manifest)
        env = json.loads((root / SIDE / "env.json").read_text())
        common = {"framework": Framework.TORCH, "profile": PROFILE, "overwrite": True}
        cache = StatCache(None)
        dump = tuple(p.relative_to(root).as_posix() for p in sorted(dump_files(root / SIDE)))
        states = _files(root, f"{SIDE}/states", "*.safetensors")
        checkpoint = _files(root, f"{SIDE}/checkpoint", "*")
        run, _ = create_receipt(
            workspace,
            ReceiptRequest(
                kind=ArtifactKind.RUN,
                subjects=tuple(
                    dict.fromkeys(
                        (
                            *(f"{SIDE}/{name}" for name in OUTPUTS),
                            *checkpoint,
                            f"{SIDE}/{COMMITMENTS}",
                            *dump,
                            *states,
                        )
                    )
                ),
                command=TORCH_ENTRYPOINT,
                environment=_environment(env),
                output=f"{SIDE}/run.receipt.json",
                run={
                    "cwd": ".",
                    "startedAt": RECORDED_AT[0],
                    "endedAt": RECORDED_AT[1],
                    "exitStatus": 0,
                    "signal": None,
                    # no sandbox vouched for this run: the example's policy accepts a
                    # recorded torch run by name ([sandbox] recorded in gates.toml)
                    "isolation": {"mechanism": "recorded", "network": True},
                },
                **common,  # type: ignore[arg-type]
            ),
            cache=cache,
            signing_key=key,
        )
        written = ["manifest.json", "run.receipt.json"]
        for name, kind in OUTPUTS.items():
            receipt_name = name.split("/")[0].split(".")[0] + ".receipt.json"
            subjects = checkpoint if kind is ArtifactKind.CHECKPOINT else (f"{SIDE}/{name}",)
            create_receipt(
                workspace,
                ReceiptRequest(
                    kind=kind,
                    subjects=subjects,
                    command=TORCH_ENTRYPOINT,
                    environment=_environment(env),
                    inputs=(run.id,),
                    output=f"{SIDE}/{receipt_name}",
                    **common,  # type: ignore[arg-type]
                ),
                cache=cache,
                signing_key=key,
            )
            written.append(receipt_name)
        create_receipt(
            workspace,
            ReceiptRequest(
                kind=ArtifactKind.TENSOR_DUMP,
                subjects=dump,
                command=TORCH_ENTRYPOINT,
                environment=_environment(env),
                inputs=(run.id,),
                output=f"{SIDE}/{TENSORS_FOLDER}.receipt.json",
                **common,  # type: ignore[arg-type]
            ),
            cache=cache,
            signing_key=key,
        )
        written.append(f"{TENSORS_FOLDER}.receipt.json")
        for name in written:
            shutil.copy(root / SIDE / name, HERE / SIDE / name)
    print(f"signed the recorded torch run: {', '.join(written)} (key {key.keyid[:16]}...)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
