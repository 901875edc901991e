"""Transposed and fused tensors larger than one slab (64 rows) and one tile (256 columns):
the blocked copy-and-memcmp comparison finds every single flipped bit, wherever it falls
(first or last row or column, a tile edge, the ragged last slab), through the CLI."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tests.helpers import Workspace, write
from tests.tensorgen import write_dump

REF, CAND = "results/torch", "results/paddle"
RULES = (
    'id = "x.rules"\ntitle = "t"\ncheck = "tensor_inventory"\ndischarge = "d"\n[params]\n'
    '[[params.rules]]\nkind = "transpose"\nmatch = "{p}.{proj:gate|up|down}"\n'
    '[[params.rules]]\nkind = "fuse"\nsources = ["{p}.gate", "{p}.up"]\n'
    'target = "{p}.up_gate"\naxis = 1\n'
)


def run(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    result = ws.gates(
        capsys, "check", "tensors", REF, CAND, "--rules", "rules.toml", "--format", "json"
    )
    return result.code, json.loads(result.out)


@pytest.mark.parametrize(("rows", "cols"), [(300, 130), (65, 513), (64, 256)])
@pytest.mark.slow
def test_every_flipped_bit_is_found_through_transpose_and_fusion(
    ws: Workspace, capsys: pytest.CaptureFixture[str], rows: int, cols: int
) -> None:
    write(ws.root, "rules.toml", RULES)
    rng = np.random.default_rng(rows * cols)
    gate, up, down = (rng.standard_normal((rows, cols), dtype=np.float32) for _ in range(3))
    write_dump(ws.root / REF, {1: {"grad": {"m.gate": gate, "m.up": up, "m.down": down}}})
    fused = np.concatenate([gate.T, up.T], axis=1)  # [cols, 2 * rows]
    candidate = {"m.up_gate": fused, "m.down": np.ascontiguousarray(down.T)}
    write_dump(ws.root / CAND, {1: {"grad": candidate}})
    code, doc = run(ws, capsys)
    assert code == 0, doc
    assert doc["totals"]["equal"] == 2
    spots = [(0, 0), (cols - 1, 2 * rows - 1), (cols // 2, rows), (cols - 1, rows - 1)]
    spots.append((int(rng.integers(cols)), int(rng.integers(2 * rows))))
    for row, col in spots:
        flipped = fused.copy()
        flipped.view(np.uint32)[row, col] ^= 1 << int(rng.integers(32))
        write_dump(ws.root / CAND, {1: {"grad": {**candidate, "m.up_gate": flipped}}})
        code, doc = run(ws, capsys)
        assert code == 1
        assert doc["first_divergence"]["candidate"] == "m.up_gate"
        assert doc["first_divergence"]["index"] == row * 2 * rows + col
        assert doc["first_divergence"]["reference"] == ("m.gate" if col < rows else "m.up")
