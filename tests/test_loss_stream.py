"""The streamed loss reader (gates/losses/series.py) against the whole-document strict reader.

The reader converts the `losses` array block by block and checks the rest of
the document as a skeleton at the end. Differential fuzzing here holds it to
what `json.loads` with duplicate-key and NaN refusal says of the same bytes,
with blocks cut everywhere (a block of 1, 2, 3, 7 and 16 bytes); the CLI
tests show the errors name the file and the element (`$.losses[40]`), and a
subprocess shows the memory stays below the files' size.
"""

from __future__ import annotations

import json
import math
import os
import random
import struct
import subprocess
import sys
from array import array
from pathlib import Path

import pytest

import gates.losses.series
from gates.core.content_ids import strict_loads
from gates.losses.series import LossFileError, parse_losses
from tests.helpers import REPO_ROOT, Workspace, write
from tests.lossgen import train_losses, write_loss_json

REF = "results/torch/loss.json"
CAND = "results/paddle/loss.json"


def oracle(data: bytes) -> tuple[list[float], int | None] | None:  # noqa: PLR0911
    """The strict whole-document reading: the values, or None when the file is invalid.

    Returns (values, None) for a valid series, and for a document that parses
    but holds a bad element, ([], index of the first bad element)."""
    try:
        document = strict_loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(document, dict) or not isinstance(document.get("losses"), list):
        return None
    losses = document["losses"]
    if not losses:
        return None
    values = []
    for index, value in enumerate(losses):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return [], index
        try:
            number = float(value)
        except OverflowError:
            return [], index
        if not math.isfinite(number):
            return [], index
        values.append(number)
    return values, None


NUMBERS = ["1", "-0", "0", "1.5", "-2.25e-3", "1E5", "3.141592653589793", "12.000001", "1e400"]
BAD = ["NaN", "Infinity", '"1.5"', "true", "null", "[]", "{}", '"a]b,c"', "1.", "01", "+1", ".5"]
SEPARATORS = [",", ", ", " ,\n", ",\t"]
OTHER_VALUES = [
    '{"losses": [1, 2]}',
    '"losses"',
    '["x", {"y": [1, "]"]}]',
    '"\\"quoted\\" ]["',
    "null",
    "7",
    '{"a": {"b": {"c": [[], {}]}}}',
]
KEYS = ['"step"', '"meta"', '"\\u006cosses"', '"losses"', '"x\\\\"']


def document(rng: random.Random) -> bytes:
    """A loss.json, mostly valid, sometimes broken in one of many ways."""
    count = rng.choice([0, 1, 2, 5, 30])
    elements = [rng.choice(NUMBERS[:-1]) for _ in range(count)]
    if elements and rng.random() < 0.3:
        elements[rng.randrange(len(elements))] = rng.choice([*BAD, "1e400"])
    body = ""
    for index, element in enumerate(elements):
        body += (rng.choice(SEPARATORS) if index else rng.choice(["", " ", "\n"])) + element
    if rng.random() < 0.05:
        body += ","  # trailing comma
    if rng.random() < 0.05 and body:
        body = body.replace(",", ",,", 1)
    members = [f'"losses": [{body}]' if rng.random() > 0.03 else f'"losses": [{body}']
    for _ in range(rng.choice([0, 0, 1, 2])):
        members.insert(
            rng.randrange(len(members) + 1),
            f"{rng.choice(KEYS)}: {rng.choice(OTHER_VALUES)}",
        )
    text = "{" + rng.choice(["", " ", "\n  "]) + ", ".join(members) + "}"
    if rng.random() < 0.03:
        text += " x"
    if rng.random() < 0.03:
        text = "[" + text + "]"
    return text.encode()


def bits(values: list[float] | array[float]) -> bytes:
    return struct.pack(f"<{len(values)}d", *values)


@pytest.mark.parametrize("block", [1, 2, 3, 7, 16, 1 << 20])
def test_streamed_reader_agrees_with_the_strict_reader(
    block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gates.losses.series, "BLOCK", block)
    rng = random.Random(block)  # noqa: S311 - reproducible test inputs
    seen = {"valid": 0, "bad element": 0, "invalid": 0}
    for _ in range(1500):
        data = document(rng)
        expected = oracle(data)
        try:
            series = parse_losses(data, "loss.json")
        except LossFileError as error:
            assert expected is None or expected[1] is not None, (data, str(error))
            if expected is None:
                seen["invalid"] += 1
            else:
                seen["bad element"] += 1
                assert f"$.losses[{expected[1]}]" in str(error), (data, str(error))
            continue
        assert expected is not None and expected[1] is None, data
        assert bits(series.values) == bits(expected[0]), data
        assert series.rounded == gates.losses.series.looks_rounded(array("d", expected[0]))
        seen["valid"] += 1
    assert min(seen.values()) > 50, seen  # every kind of input was exercised


def test_a_bad_element_in_a_later_block_is_named_by_its_json_path(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gates.losses.series, "BLOCK", 64)
    losses = json.dumps(train_losses(60))[1:-1].split(", ")
    losses[40] = '"0.5"'
    write_loss_json(ws.root / REF, train_losses(60))
    write(ws.root, CAND, '{"run": {"id": "e1"}, "losses": [' + ", ".join(losses) + '], "n": 60}')
    result = ws.gates(capsys, "check", "loss", REF, CAND)
    assert result.code == 2
    assert f"gates: error: {CAND}: $.losses[40]: '0.5' is not a number" in result.err
    assert not (ws.root / "outputs/loss_check.json").exists()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"losses": [1.5], "losses": [2.5]}', "duplicate key 'losses'"),
        ('{"meta": {"a": 1, "a": 2}, "losses": [1.5]}', "duplicate key 'a'"),
        ('{"losses": [1.5, 2.5', "the losses array is not closed"),
        ('{"losses": [1.5, 2.5,]}', "$.losses[2]: not valid JSON"),
        ('{"losses": [1.5 2.5]}', "$.losses[0]: not valid JSON"),
        ('{"losses": [1.5]} {}', "not valid JSON: Extra data"),
        ('{"losses": [1.5, 1' + "0" * 400 + "]}", "$.losses[1]"),
        ('{"nested": {"losses": [1.5]}}', "'losses' array"),
    ],
)
def test_document_level_faults_are_refused(
    ws: Workspace, capsys: pytest.CaptureFixture[str], text: str, problem: str
) -> None:
    write_loss_json(ws.root / REF, [1.5])
    write(ws.root, CAND, text)
    result = ws.gates(capsys, "check", "loss", REF, CAND)
    assert result.code == 2
    assert f"gates: error: {CAND}: " in result.err
    assert problem in result.err


def test_other_keys_around_the_losses_are_read_in_the_same_pass(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    losses = train_losses(20)
    write_loss_json(ws.root / REF, losses)
    text = json.dumps({"meta": {"losses": [9.0], "note": "]["}, "losses": losses, "steps": 20})
    write(ws.root, CAND, text)
    result = ws.gates(capsys, "check", "loss", REF, CAND, "--format", "json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["consistent_steps"] == 20


# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across exec.
MEASURE = """
import sys
from pathlib import Path
from gates.losses.series import read_losses
from gates.losses.compare import compare_losses
def peak():
    lines = Path("/proc/self/status").read_text().splitlines()
    return next(int(l.split()[1]) * 1024 for l in lines if l.startswith("VmHWM:"))
before = peak()
result = compare_losses(read_losses(Path(sys.argv[1])), read_losses(Path(sys.argv[2])), 1)
assert result.consistent_steps == int(sys.argv[3]), result
print(peak() - before)
"""


@pytest.mark.slow
@pytest.mark.heavy
def test_memory_grows_by_less_than_the_files_size(tmp_path: Path) -> None:
    """Two 1.5-million-step files (about 30 MB each): reading and comparing both grows the
    process by the float64 values (12 MB each) and a block, not by the parsed documents
    (the whole-document reader grew by several times the files' size)."""
    steps = 1_500_000
    rng = random.Random(3)  # noqa: S311 - reproducible test inputs
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    losses = [12.0 * 0.999999**step + rng.random() * 1e-3 for step in range(steps)]
    for path in paths:
        path.write_text(json.dumps({"losses": losses}))
    del losses
    size = sum(path.stat().st_size for path in paths)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}

    command = [sys.executable, "-c", MEASURE, *map(str, paths), str(steps)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    grown = int(done.stdout)
    assert grown < 0.6 * size, (grown, size)
    assert grown >= 2 * 8 * steps * 0.9  # the values themselves are held (sanity)
