"""The shards of a checkpoint folder read together: each refusal is the one-at-a-time one.

`load_checkpoint` reads the regular files of the folder's listing in one pass
(`read_header`: the symlink refused by the open itself) and any other
name one at a time; the problems must be the same, in the same order.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from gates.checkpoints.layout import INDEX_NAME, load_checkpoint


def test_every_kind_of_bad_shard_is_named_once_in_order(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    outside = tmp_path / "outside.safetensors"
    save_file({"o": np.zeros(2, np.float32)}, str(outside))
    weight_map = {}
    for name in ("a", "g", "h"):
        save_file({f"{name}.w": np.ones(3, np.float32)}, str(folder / f"{name}.safetensors"))
        weight_map[f"{name}.w"] = f"{name}.safetensors"
    (folder / "b.safetensors").symlink_to(outside)
    os.mkfifo(folder / "c.safetensors")  # a blocking open would hang here
    (folder / "d.safetensors").mkdir()
    (folder / "e.safetensors").write_bytes(b"\x02\0\0\0\0\0\0\0{}!")
    save_file({"x": np.zeros(1, np.uint8)}, str(folder / "x\\y.safetensors"))
    for name in "bcdef":
        weight_map[f"{name}.w"] = f"{name}.safetensors"
    weight_map["x"] = "x\\y.safetensors"
    (folder / INDEX_NAME).write_text(json.dumps({"weight_map": weight_map}))
    checkpoint = load_checkpoint(folder)
    assert sorted(checkpoint.shards) == ["a.safetensors", "g.safetensors", "h.safetensors"]
    assert sorted(checkpoint.tensors) == ["a.w", "g.w", "h.w"]
    assert checkpoint.problems == [
        "shard b.safetensors is not a regular file",
        "shard c.safetensors is not a regular file",
        "shard d.safetensors is not a regular file",
        "e.safetensors: incomplete metadata: the tensors cover 0 of 1 buffer bytes",
        "shard f.safetensors does not exist",
        f"{INDEX_NAME}: shard 'x\\\\y.safetensors' contains a backslash",
    ]


def test_shards_without_an_index_read_together(tmp_path: Path) -> None:
    """Many small shards, one of them bad: the others all read, the bad one named."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    for index in range(200):
        arrays = {f"layers.{index}.w": np.full(2, index, np.float32)}
        save_file(arrays, str(folder / f"s{index:03d}.safetensors"), metadata={"format": "pt"})
    bad = folder / "s117.safetensors"
    bad.write_bytes(bad.read_bytes()[:-1])
    checkpoint = load_checkpoint(folder)
    assert len(checkpoint.shards) == 199
    assert len(checkpoint.tensors) == 199
    assert checkpoint.tensors["layers.5.w"].shard == "s005.safetensors"
    assert checkpoint.tensors["layers.5.w"].entry.shape == (2,)
    assert checkpoint.shards["s005.safetensors"].metadata == {"format": "pt"}
    assert checkpoint.problems == [
        "s117.safetensors: incomplete metadata: the tensors cover 8 of 7 buffer bytes"
    ]
