"""The candidate: PaddleFormers 1.2.0 on PaddlePaddle 3.3.1, trained on the CPU.

PaddleFormers' own `GlmMoeDsaForCausalLM` imports PaddleFleet, which the package index
does not have; until it can be installed the candidate is PaddleFormers'
`DeepseekV3ForCausalLM` (MLA attention, the same sigmoid/noaux_tc MoE with a shared
expert; no DSA indexer) with the GLM config mapped (`common.paddle_config`), and
`paddlefleet_stub/` answers the one PaddleFleet flag its MoE layers import. The official
weights (`official/`, HF naming and layout) are loaded by PaddleFormers' own HF
conversion (`from_pretrained(..., convert_from_hf=True)`), which writes a metadata file
and a lock beside them: gates.toml shows `official/` to the sandbox as a private
writable copy. Trains the same 20 SGD steps as the reference, records every loss and a
digest of the training state per step, dumps steps 1-2, and saves the loaded weights in
HF naming (`save_pretrained(..., save_to_hf=True)`, `checkpoint/`):

    gates run --framework paddle -- python model/train_paddle.py

The replay protocol (docs/replay.md):

    python model/train_paddle.py --resume STATE --start START --end END --out OUT
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one reduction order, run after run
os.environ.setdefault("FLAGS_cudnn_deterministic", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent / "paddlefleet_stub"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import paddle
from common import CONFIG, DUMPED_STEPS, LEARNING_RATE, OFFICIAL, TRAIN_STEPS, paddle_config, tokens
from paddleformers.transformers import DeepseekV3Config, DeepseekV3ForCausalLM

from gates.recorder import RunRecorder
from gates.replay.capture import capture_paddle, restore_paddle
from gates.replay.state import load_state
from gates.tensors.recorder import TensorRecorder

logging.disable(logging.INFO)  # PaddleFormers' and Paddle's progress lines: one per tensor


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resume", type=Path, help="a saved training state to resume from")
    parser.add_argument("--start", type=int, default=0, help="the step the state is after")
    parser.add_argument("--end", type=int, help="the last step to run (default: 20)")
    parser.add_argument("--out", type=Path, help="the run folder (default: GATES_RUN_DIR)")
    return parser.parse_args()


def main() -> int:
    args = arguments()
    paddle.set_device("cpu")
    paddle.seed(0)
    model = DeepseekV3ForCausalLM.from_pretrained(
        OFFICIAL, config=DeepseekV3Config(**paddle_config()), convert_from_hf=True, dtype="float32"
    )
    model.train()
    weights = dict(model.named_parameters())
    optimizer = paddle.optimizer.SGD(learning_rate=LEARNING_RATE, parameters=list(weights.values()))
    inputs, labels = (paddle.to_tensor(array) for array in tokens())
    start = args.start
    if args.resume is not None:
        start = restore_paddle(load_state(args.resume, str(args.resume)), weights, optimizer)
    end = TRAIN_STEPS if args.end is None else args.end
    replaying = args.resume is not None
    with (
        RunRecorder(
            args.out,
            framework="paddle",
            model_config=CONFIG,
            weights_loaded=True,
            first_step=start + 1,
        ) as run,
        TensorRecorder(
            args.out, framework="paddle", steps=() if replaying else DUMPED_STEPS
        ) as dump,
    ):
        if not replaying:
            dump.watch(model, optimizer)
            model.save_pretrained(run.folder / "checkpoint", save_to_hf=True)
        run.start(capture_paddle(weights, optimizer, data_position=start))
        for step in range(start + 1, end + 1):
            dump.start_step(step)
            logits = model(input_ids=inputs, use_cache=False, return_dict=True).logits
            loss = paddle.nn.functional.cross_entropy(
                logits.reshape([-1, logits.shape[-1]]), labels.reshape([-1])
            )
            loss.backward()
            dump.record_grads()
            optimizer.step()
            dump.record_update()
            optimizer.clear_grad()
            run.record(step, loss, state=capture_paddle(weights, optimizer, data_position=step))
    return 0


if __name__ == "__main__":
    sys.exit(main())
