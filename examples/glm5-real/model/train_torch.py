"""The reference: transformers 5.3.0 `GlmMoeDsaForCausalLM`, trained on the CPU.

Loads the official weights (`official/`, HF naming), trains 20 SGD steps on the fixed
batch, records every loss unrounded (`gates.recorder.RunRecorder`) with a digest of the
training state per step (`gates.replay.capture`), dumps every module's output, the
gradients and the parameters of steps 1-2 (`gates.tensors.recorder.TensorRecorder`), and
saves the loaded weights with `save_pretrained` (`checkpoint/`):

    gates run --framework torch -- python model/train_torch.py

Attention is transformers' eager implementation: with SDPA, `GlmMoeDsaAttention` hands
the DSA index mask to the kernel in place of the causal mask, and without padding every
token then attends to the whole sequence (README.md).

The replay protocol (docs/replay.md): resume a saved state, run steps START+1..END:

    python model/train_torch.py --resume STATE --start START --end END --out OUT
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one reduction order, run after run
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from common import CONFIG, DUMPED_STEPS, LEARNING_RATE, OFFICIAL, TRAIN_STEPS, tokens
from transformers import GlmMoeDsaForCausalLM

from gates.recorder import RunRecorder
from gates.replay.capture import capture_torch, restore_torch
from gates.replay.state import load_state
from gates.tensors.recorder import TensorRecorder


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resume", type=Path, help="a saved training state to resume from")
    parser.add_argument("--start", type=int, default=0, help="the step the state is after")
    parser.add_argument("--end", type=int, help="the last step to run (default: 20)")
    parser.add_argument("--out", type=Path, help="the run folder (default: GATES_RUN_DIR)")
    return parser.parse_args()


def main() -> int:
    args = arguments()
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    model = GlmMoeDsaForCausalLM.from_pretrained(
        OFFICIAL, dtype=torch.float32, attn_implementation="eager"
    )
    model.train()
    weights = dict(model.named_parameters())
    optimizer = torch.optim.SGD(list(weights.values()), lr=LEARNING_RATE)
    inputs, labels = (torch.from_numpy(array) for array in tokens())
    start = args.start
    if args.resume is not None:
        start = restore_torch(load_state(args.resume, str(args.resume)), weights, optimizer)
    end = TRAIN_STEPS if args.end is None else args.end
    replaying = args.resume is not None
    with (
        RunRecorder(
            args.out,
            framework="torch",
            model_config=CONFIG,
            weights_loaded=True,
            first_step=start + 1,
        ) as run,
        TensorRecorder(
            args.out, framework="torch", steps=() if replaying else DUMPED_STEPS
        ) as dump,
    ):
        if not replaying:
            dump.watch(model, optimizer)
            model.save_pretrained(run.folder / "checkpoint")
        run.start(capture_torch(weights, optimizer, data_position=start))
        for step in range(start + 1, end + 1):
            dump.start_step(step)
            logits = model(input_ids=inputs, use_cache=False).logits
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
            )
            loss.backward()
            dump.record_grads()
            optimizer.step()
            dump.record_update()
            optimizer.zero_grad()
            run.record(
                step, loss.item(), state=capture_torch(weights, optimizer, data_position=step)
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
