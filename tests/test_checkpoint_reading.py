"""Reading a checkpoint once: the index parsed once for the layout and the hygiene check,
the tensors placed as a name -> shard dict and compared with the index as one, against
the paths they replace.

`inspect_checkpoint` hands the index `load_checkpoint_and_index` parsed to `hygiene`,
which otherwise reads it itself; each index below (valid, not JSON, not an object, no
weight_map, values that are not strings, shards outside the folder, a symlink, a
folder) must give the findings the second read gives. `_check_index` skips its loops
when the index agrees with every header; that must be exactly when the placed tensors'
shards, as the `tensors` view pairs them, are the index's. That view and `kinds` must
be what placing the tensors one by one made (the first shard keeps a tensor two hold).
"""

from __future__ import annotations

import json
import operator
import random
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from gates.checkpoints.check import inspect_checkpoint
from gates.checkpoints.hygiene import hygiene
from gates.checkpoints.incomplete import incomplete_findings
from gates.checkpoints.layout import (
    INDEX_NAME,
    Checkpoint,
    Located,
    _check_index,
    _place_tensors,
    _shard_names,
    kinds,
    load_checkpoint,
)
from gates.safetensors.header import Header, TensorEntry

_SHARD = operator.itemgetter(0)


def _agrees_as_dicts(
    weight_map: dict[str, str], checkpoint: Checkpoint, on_disk: list[str]
) -> bool:
    """The index agrees with the headers: each placed tensor's shard, as the `tensors`
    view pairs them, is the index's."""
    placed = dict(zip(checkpoint.tensors, map(_SHARD, checkpoint.tensors.values()), strict=False))
    return placed == weight_map and set(weight_map.values()) >= set(on_disk)


def _random_case(rng: random.Random) -> tuple[dict[str, str], Checkpoint, list[str]]:
    """Headers of random tensors (now and then one in two shards), placed as the loader
    places them, and an index of the placed tensors, changed or not."""
    shards = [f"s{index}.safetensors" for index in range(rng.randint(1, 4))]
    held: dict[str, dict[str, TensorEntry]] = {shard: {} for shard in shards}
    for number in range(rng.randint(0, 12)):
        for shard in rng.sample(shards, 2 if len(shards) > 1 and rng.random() < 0.05 else 1):
            # each shard's copy its own shape: the placing must keep the first shard's
            entry = TensorEntry(f"t{number}", "U8", (shards.index(shard) + 1,), 0, 1)
            held[shard][entry.name] = entry
    checkpoint = Checkpoint(Path("unused"))
    checkpoint.shards = {shard: Header(tensors, None, 8, 9) for shard, tensors in held.items()}
    _place_tensors(checkpoint)
    checkpoint.problems.clear()  # a tensor in two shards: named by the placing, not here
    weight_map = {name: located.shard for name, located in checkpoint.tensors.items()}
    change = rng.randrange(6)
    if change == 0 and weight_map:  # an entry naming another shard
        weight_map[rng.choice(list(weight_map))] = rng.choice([*shards, "gone.safetensors"])
    elif change == 1 and weight_map:  # an entry missing
        del weight_map[rng.choice(list(weight_map))]
    elif change == 2:  # an entry no header holds
        weight_map["ghost"] = rng.choice(shards)
    elif change == 3 and weight_map:  # one gone, another in its place: the same length
        del weight_map[rng.choice(list(weight_map))]
        weight_map["ghost"] = rng.choice(shards)
    on_disk = sorted(rng.sample([*shards, "extra.safetensors"], rng.randint(0, len(shards))))
    return weight_map, checkpoint, on_disk


def test_the_index_agrees_exactly_when_the_dicts_did() -> None:
    rng = random.Random(5)  # noqa: S311 - reproducible test inputs
    agreed = disagreed = 0
    for _ in range(3000):
        weight_map, checkpoint, on_disk = _random_case(rng)
        _check_index(weight_map, set(weight_map.values()), checkpoint, on_disk)
        if _agrees_as_dicts(weight_map, checkpoint, on_disk):
            assert checkpoint.problems == [], (weight_map, on_disk)
            agreed += 1
        else:
            # the loops name at least one disagreement: the fast path was not taken
            assert checkpoint.problems, (weight_map, checkpoint.tensors, on_disk)
            disagreed += 1
    assert agreed > 300 and disagreed > 1000, (agreed, disagreed)


def _placed_one_by_one(checkpoint: Checkpoint) -> dict[str, Located]:
    """The placing as it was written before (the code kept here): shard by shard in sorted
    order, the first shard that holds a tensor keeping it."""
    placed: dict[str, Located] = {}
    for shard, header in sorted(checkpoint.shards.items()):
        for name, entry in header.tensors.items():
            placed.setdefault(name, Located(shard, entry))
    return placed


def test_the_tensors_and_their_kinds_are_those_placed_one_by_one() -> None:
    rng = random.Random(7)  # noqa: S311 - reproducible test inputs
    doubled = 0
    for _ in range(3000):
        _, checkpoint, _ = _random_case(rng)
        expected = _placed_one_by_one(checkpoint)
        assert list(checkpoint.tensors.items()) == list(expected.items())  # in order
        kinds_expected = [(name, (t.entry.dtype, t.entry.shape)) for name, t in expected.items()]
        assert list(kinds(checkpoint).items()) == kinds_expected
        assert checkpoint.shard_of == {name: t.shard for name, t in expected.items()}
        doubled += len(expected) < sum(len(h.tensors) for h in checkpoint.shards.values())
    assert doubled > 50, doubled


def _checkpoint(folder: Path) -> dict[str, str]:
    folder.mkdir()
    weight_map = {}
    for index in range(3):
        shard = f"model-{index + 1:05d}-of-00003.safetensors"
        save_file({f"w{index}": np.ones(2, np.float32)}, str(folder / shard))
        weight_map[f"w{index}"] = shard
    return weight_map


INDEXES: dict[str, object] = {
    "valid": None,  # the checkpoint's own weight_map
    "escapes": {"w0": "../outside.safetensors", "w1": "/abs.safetensors", "w2": "a\\b"},
    "values_not_strings": {"w0": 5, "w1": None, "w2": "../up.safetensors", "w3": [1]},
    "no_weight_map": {"other": {}},
    "not_an_object": [1, 2],
    "null": None,
    "weight_map_a_list": ["model-00001-of-00003.safetensors"],  # hygiene crashed on these
    "weight_map_a_string": "model-00001-of-00003.safetensors",
}


@pytest.mark.parametrize("kind", [*INDEXES, "not_json", "symlink", "folder", "absent"])
def test_the_index_read_once_gives_the_findings_of_a_second_read(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "ckpt"
    weight_map = _checkpoint(folder)
    index = folder / INDEX_NAME
    if kind == "valid":
        index.write_text(json.dumps({"weight_map": weight_map}))
    elif kind == "null":
        index.write_text("null")
    elif kind in ("not_an_object", "no_weight_map"):
        index.write_text(json.dumps(INDEXES[kind]))
    elif kind in INDEXES:
        index.write_text(json.dumps({"metadata": {}, "weight_map": INDEXES[kind]}))
    elif kind == "not_json":
        index.write_text('{"weight_map": {')
    elif kind == "symlink":
        target = tmp_path / "index.json"
        target.write_text(json.dumps({"weight_map": {**weight_map, "x": "../o.safetensors"}}))
        index.symlink_to(target)
    elif kind == "folder":
        index.mkdir()
    checkpoint, findings, incomplete = inspect_checkpoint(folder)
    # the paths as they ran before: every step reading the folder for itself
    reference = load_checkpoint(folder)
    expected_incomplete = incomplete_findings(folder, reference.index_present, reference.shards)
    assert findings == tuple(hygiene(folder))
    assert incomplete == tuple(expected_incomplete)
    assert checkpoint.problems == [
        *reference.problems,
        *(f"incomplete: {finding}" for finding in expected_incomplete),
    ]
    assert checkpoint.tensors == reference.tensors
    assert checkpoint.shards == reference.shards
    assert checkpoint.index_present == reference.index_present
    if kind in ("escapes", "values_not_strings", "symlink"):
        assert any(finding.kind == "escapes" for finding in findings), findings


VALUES: list[object] = ["a.safetensors", "b.safetensors", 1, True, 0, None, 1.5, [1], {"k": 1}]


def test_the_shard_names_are_those_of_a_weight_map_checked_value_by_value() -> None:
    """`_shard_names` checks the values' types on their set: a map is valid exactly when
    every value is a string (the check it replaces), its names then the values' set."""
    rng = random.Random(11)  # noqa: S311 - reproducible test inputs
    valid = 0
    for _ in range(2000):
        values = [rng.choice(VALUES[:2] * 6 + VALUES) for _ in range(rng.randint(0, 6))]
        weight_map = {f"t{index}": value for index, value in enumerate(values)}
        expected = set(values) if all(type(value) is str for value in values) else None
        assert _shard_names(weight_map) == expected, values
        valid += expected is not None
    assert valid > 200, valid
    assert _shard_names([["t", "a.safetensors"]]) is None
    assert _shard_names(None) is None
