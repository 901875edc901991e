"""The consumption probe of the official MTP forward, on the official weights and the
training batch:

    gates probe consumed model/probe_mtp.py:build

Does the MTP forward consume its five DSA indexer tensors? With sequences no longer than
the indexer's top-k, every key is selected and the indexer cannot change the output.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from official import config, mtp_forward, official_weights, tokens


def build() -> tuple[Callable[[], np.ndarray], dict[str, np.ndarray]]:
    weights = official_weights()
    ids, _ = tokens()
    mtp = f"model.layers.{config()['num_hidden_layers']}."
    probed = {name: value for name, value in weights.items() if name.startswith(mtp)}
    return (lambda: mtp_forward(weights, ids)), probed
