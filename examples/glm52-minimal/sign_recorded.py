#!/usr/bin/env python3
"""Sign the recorded PyTorch run of this example, as the machine that ran it would have.

    python examples/glm52-minimal/sign_recorded.py [--key KEYFILE]

The torch side was recorded on a machine with PyTorch (generate.py
--torch-python). This writes its run attestation and the receipts of its
outputs into results/torch/, signed with the demo key (demo-keys/demo.key,
trusted by `gates demo` only), exactly as `gates run --framework torch --
python model/train_torch.py` signs a run: the argv of the declared entrypoint,
its exit status and environment as recorded, the digest of every output, and
the source tree of the example as `gates demo` lays it out. Rerun it after any
change of the example's source files; a test fails until you do.
"""

from __future__ import annotations

import argparse
import json
import shutil
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
from gates.tensors.layout import TENSORS_FOLDER, dump_files  # noqa: E402
from gates.trust.keys import load_key  # noqa: E402
from gates.workspace.repository import open_workspace  # noqa: E402

OUTPUTS = {
    "manifest.json": ArtifactKind.MANIFEST,
    "env.json": ArtifactKind.ENV,
    "loss.json": ArtifactKind.LOSS,
    "raw_loss.jsonl": ArtifactKind.RAW_LOSS,
    "checkpoint/model.safetensors": ArtifactKind.CHECKPOINT,
}
# the step commitments and the saved training states a replay resumes from
# (docs/replay.md): bound by the run attestation, which is what `gates replay` and the
# audit check them against; the recorded run gives them no receipts of their own
COMMITMENTS = "commitments.json"
RECORDED_AT = ("2026-12-01T20:27:02Z", "2026-12-01T20:27:22Z")  # the recorded run's clock


def _environment(env: dict[str, object]) -> dict[str, str]:
    return {k: str(v) for k, v in env.items() if isinstance(v, str | int | bool)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--key", type=Path, default=HERE / "demo-keys/demo.key")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        key_copy = Path(folder) / "demo.key"
        shutil.copy(args.key, key_copy)
        key_copy.chmod(0o600)
        key = load_key(key_copy)
        root = Path(folder) / "glm52-port"
        lay_out(root, evidence=False)  # the run was made at the code commit
        pin(open_workspace(root), "HEAD", echo=lambda _: None)
        workspace = open_workspace(root)
        env = json.loads((root / "results/torch/env.json").read_text())
        common = {"framework": Framework.TORCH, "profile": PROFILE, "overwrite": True}
        cache = StatCache(None)
        dump = tuple(
            path.relative_to(root).as_posix() for path in sorted(dump_files(root / "results/torch"))
        )
        states = tuple(
            path.relative_to(root).as_posix()
            for path in sorted((root / "results/torch/states").glob("*.safetensors"))
        )
        run, _ = create_receipt(
            workspace,
            ReceiptRequest(
                kind=ArtifactKind.RUN,
                subjects=(
                    *(f"results/torch/{name}" for name in OUTPUTS),
                    f"results/torch/{COMMITMENTS}",
                    *dump,
                    *states,
                ),
                command=TORCH_ENTRYPOINT,
                environment=_environment(env),
                output="results/torch/run.receipt.json",
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
        written = ["run.receipt.json"]
        for name, kind in OUTPUTS.items():
            receipt_name = name.split("/")[0].split(".")[0] + ".receipt.json"
            create_receipt(
                workspace,
                ReceiptRequest(
                    kind=kind,
                    subjects=(f"results/torch/{name}",),
                    command=TORCH_ENTRYPOINT,
                    environment=_environment(env),
                    inputs=(run.id,),
                    output=f"results/torch/{receipt_name}",
                    **common,  # type: ignore[arg-type]
                ),
                cache=cache,
                signing_key=key,
            )
            written.append(receipt_name)
        if dump:
            create_receipt(
                workspace,
                ReceiptRequest(
                    kind=ArtifactKind.TENSOR_DUMP,
                    subjects=dump,
                    command=TORCH_ENTRYPOINT,
                    environment=_environment(env),
                    inputs=(run.id,),
                    output=f"results/torch/{TENSORS_FOLDER}.receipt.json",
                    **common,  # type: ignore[arg-type]
                ),
                cache=cache,
                signing_key=key,
            )
            written.append(f"{TENSORS_FOLDER}.receipt.json")
        for receipt_name in written:
            shutil.copy(
                root / "results/torch" / receipt_name, HERE / "results/torch" / receipt_name
            )
    print(f"signed the recorded torch run: {', '.join(written)} (key {key.keyid[:16]}...)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
