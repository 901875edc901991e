"""A checkpoint still being written, or cut short on the file system: incomplete, never valid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gates.checkpoints.incomplete import changed_while_checked, stat_keys
from tests.glm_fixture import reference_arrays, write_checkpoint
from tests.helpers import Workspace

CKPT = "results/paddle/checkpoint"


def checked(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    result = ws.gates(capsys, "check", "checkpoint", CKPT, "--format", "json")
    assert result.out, result.err
    figures: dict[str, object] = json.loads(result.out)
    return result.code, figures


@pytest.fixture
def folder(ws: Workspace) -> Path:
    return write_checkpoint(ws.root / CKPT, reference_arrays(), shards=3)


def test_a_truncated_shard_is_named(
    ws: Workspace, capsys: pytest.CaptureFixture[str], folder: Path
) -> None:
    shard = folder / "model-00002-of-00003.safetensors"
    size = shard.stat().st_size
    with shard.open("r+b") as handle:
        handle.truncate(size - 100)
    code, figures = checked(ws, capsys)
    assert code == 1 and figures["valid"] is False and figures["digest"] is None
    incomplete = figures["incomplete"]
    assert isinstance(incomplete, list) and len(incomplete) == 1
    assert incomplete[0] == (
        f"shard model-00002-of-00003.safetensors is truncated: its header declares {size} "
        f"bytes, the file holds {size - 100} (cut short on the file system, or still being written)"
    )


def test_an_index_not_yet_written_and_a_missing_shard(
    ws: Workspace, capsys: pytest.CaptureFixture[str], folder: Path
) -> None:
    (folder / "model.safetensors.index.json").unlink()
    code, figures = checked(ws, capsys)
    assert code == 1 and figures["valid"] is False
    assert figures["incomplete"] == [
        "3 shards but no model.safetensors.index.json (not yet written?)"
    ]
    (folder / "model-00003-of-00003.safetensors").unlink()
    _, figures = checked(ws, capsys)
    assert figures["incomplete"] == [
        "shard(s) 00003 of 00003 missing (still being written?)",
        "2 shards but no model.safetensors.index.json (not yet written?)",
    ]


def test_a_partial_file_beside_the_shards(
    ws: Workspace, capsys: pytest.CaptureFixture[str], folder: Path
) -> None:
    (folder / ".model-00002-of-00003.safetensors.x1y2.tmp").write_bytes(b"\0" * 64)
    code, figures = checked(ws, capsys)
    assert code == 1 and figures["valid"] is False
    assert figures["incomplete"] == [
        ".model-00002-of-00003.safetensors.x1y2.tmp: a partial file is still there "
        "(a write in progress?)"
    ]
    problems = figures["problems"]
    assert isinstance(problems, list) and problems[-1].startswith("incomplete: ")


def test_a_shard_that_grows_while_it_is_checked(folder: Path) -> None:
    shards = sorted(p.name for p in folder.glob("*.safetensors"))
    before = stat_keys(folder, shards)
    with (folder / shards[0]).open("ab") as handle:
        handle.write(b"\0" * 16)
    changed = changed_while_checked(before, stat_keys(folder, shards))
    size = before[shards[0]][0]
    assert changed == [
        f"shard {shards[0]} changed while it was checked ({size} -> {size + 16} bytes): "
        "still being written?"
    ]
    assert changed_while_checked(before, before) == []
